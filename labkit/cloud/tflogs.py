"""TensorFlow's C++ logging kept out of notebook cells, and kept in a file instead; its Python
logger's INFO and WARNING lines kept out too.

`TF_CPP_MIN_LOG_LEVEL=2` hides INFO and WARNING lines, but not the ones TensorFlow logs
before absl is initialised (``cudart_stub.cc: Could not find cuda drivers``, the absl
pre-init notice, ``failed call to cuInit``): those are written straight to file
descriptor 2, which a Jupyter kernel forwards into the running cell. So the kernel imports
TensorFlow and lists its devices once with descriptor 2 pointed at a log file; replicas
started from the kernel are filtered in the runner's stream instead
(`labkit.local.supervisor.is_cpp_log_line`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from labkit.cloud import paths


def kernel_log_path() -> Path:
    """Where this kernel's TensorFlow start-up lines go (one file per process)."""
    return paths.lab_home() / "logs" / f"tensorflow-kernel-{os.getpid()}.log"


@contextlib.contextmanager
def stderr_to(path: Path) -> Iterator[Path]:
    """Point file descriptor 2 at ``path`` (appended) while the block runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield path
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def import_tensorflow_quietly() -> Path | None:
    """Import TensorFlow and initialise its devices with their C++ chatter sent to a file.

    Returns the log file, or None when TensorFlow was already imported (too late to catch).
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if "tensorflow" in sys.modules:
        _quiet_python_logger(sys.modules["tensorflow"])
        return None
    path = kernel_log_path()
    with stderr_to(path):
        import tensorflow as tf

        tf.config.list_physical_devices()  # the CUDA probe (cuInit) logs here
    _quiet_python_logger(tf)
    return path


def _quiet_python_logger(tf: object) -> None:
    """TensorFlow's Python logger at ERROR. Its first `get_logger()` call sets INFO in an
    interactive shell (Jupyter), so lines such as "Using MirroredStrategy with devices",
    "Collective ops is not configured at program startup" or "Assets written to" were printed
    into the cells (twice: its handler's and the root's). Errors still show."""
    tf.get_logger().setLevel(logging.ERROR)  # type: ignore[attr-defined]
