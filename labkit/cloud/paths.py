"""Where the kit keeps its local state, and how `gs://` maps onto it in local mode.

Everything the kit writes locally lives under one folder, LAB_HOME (``$CASSAVA_LAB_HOME``,
by default ``<repo>/.lab``; the docs call it LAB_HOME), so cleanup
can remove it in one place and git can ignore it in one line.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]


def lab_home() -> Path:
    """The kit's local state folder: ``$CASSAVA_LAB_HOME`` or ``<repo>/.lab``."""
    return Path(os.environ.get("CASSAVA_LAB_HOME") or REPO_ROOT / ".lab").resolve()


def sample_root() -> Path:
    """Synthetic sample: ``raw/cassavaleafdata/...`` JPEGs and ``tfds/`` prepared data."""
    return lab_home() / "sample"


def sample_tfds_dir() -> Path:
    """The TFDS data dir holding the prepared `cassava` sample (never ~/tensorflow_datasets)."""
    return sample_root() / "tfds"


def emulator_state_dir() -> Path:
    """The local Vertex AI service's jobs, logs and pid file."""
    return lab_home() / "vertex"


def local_gcs_root() -> Path:
    """The folder that stands for Cloud Storage in local mode: ``gs://B/p`` is ``<root>/B/p``."""
    return lab_home() / "gcs"


def settings_file() -> Path:
    return lab_home() / "settings.json"


def gcs_to_local(uri: str, root: Path | None = None) -> str:
    """Map ``gs://bucket/path`` to the local folder standing for it; other paths pass through.

    `tf.io.gfile` has no endpoint override for a Cloud Storage emulator, so in local mode
    the trainer is handed local paths instead of `gs://` ones.
    """
    if not uri.startswith("gs://"):
        return uri
    base = Path(root) if root is not None else local_gcs_root()
    rest = uri[len("gs://") :]
    local = base / rest
    return str(local) + ("/" if uri.endswith("/") else "")


def local_to_gcs(path: str | Path, root: Path | None = None) -> str | None:
    """The `gs://` URI a local path stands for, or None when it is outside the local bucket root."""
    base = (Path(root) if root is not None else local_gcs_root()).resolve()
    try:
        rel = Path(path).resolve().relative_to(base)
    except ValueError:
        return None
    return "gs://" + rel.as_posix()


def write_json_atomic(path: Path, payload: Any, *, sort_keys: bool = False) -> None:
    """Write JSON so that a reader (or a crash) never sees half a file: a temporary file
    named for this process and thread, then `os.replace` over the old one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=sort_keys) + "\n")
    os.replace(tmp, path)
