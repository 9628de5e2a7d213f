"""A job's image environment: the Python its Dockerfile gives the container, built here.

Running every job in the kit's own virtualenv once hid a broken image: the Dockerfile did not
install importlib-resources, which TFDS needs to find cassava's checksums, and no local run
could see it. So the replicas of a job run in the environment the image itself would have:

- The final stage's base (FROM) maps to the Python packages that stand for it (`base_image`):
  the TensorFlow images of the kit's TensorFlow release (CPU and ``-gpu``), Vertex AI's
  prebuilt TensorFlow training containers and Deep Learning Containers (their TensorFlow
  release, where it installs on this Python; their other packages are not added),
  ``python:3.N`` images of this machine's Python, and ``scratch``. Any other base is refused
  before the job starts, naming the ones the kit can run.
- Every ``pip install`` of the final stage's RUN steps is run with pip
  (`labkit.local.emulator.pip_steps`); other RUN commands are listed in the job's log as not
  executed.
- The result is cached virtualenvs of this machine's Python, layered as Docker layers are: the
  base's packages once per base, the RUN installs on top, the base layer after them on
  ``sys.path`` through a ``.pth`` file. pip does not uninstall outside the environment it
  installs into, so a RUN line that changes a base package installs its own copy on top and
  never touches the base layer. Each layer is keyed by a hash of what it installs (files by
  their content) and reused until that changes.

What it is not: no system packages, no CUDA (TensorFlow runs on the CPU), this machine's Python
whatever the base's version, and pip's cache is used. Replicas see this environment and the
files the COPY steps put in the image, nothing of the kit.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import venv
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

from labkit.local.emulator.dockerfile import ImageError, ImagePlan
from labkit.local.emulator.pip_steps import PYTHON_PROGRAM, PipInstall, read_run_steps

PYTHON_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"
MANIFEST = "labkit-image-env.json"
BASE_LAYER_PTH = "labkit-base-layer.pth"
# Docker's default PATH in a container: the system's programs, never the kit's virtualenv.
CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CACHE_VARIABLE = "LABKIT_IMAGE_ENVS"
LOCK_POLL_S = 0.2
PIP_TAIL_LINES = 15
# Host variables that would put the kit's Python into an image's (pip's or a replica's).
KIT_PYTHON_VARIABLES = (
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "VIRTUAL_ENV",
)


class BuildCancelled(ImageError):
    """The job was cancelled (or the service stopped) while its environment was built."""


@dataclasses.dataclass(frozen=True)
class BaseImage:
    """What a FROM image stands for here: the pip requirements of its Python packages."""

    image: str
    packages: tuple[str, ...]
    has_python: bool
    stands_for: str


def kit_tensorflow() -> str:
    """The TensorFlow release the kit pins (the installed one: tests/test_pins.py keeps
    them equal), whose official images the local service runs."""
    return metadata.version("tensorflow")


_TF_IMAGE = re.compile(
    r"^(?:(?:index\.)?docker\.io/)?tensorflow/tensorflow:(?P<version>\d+\.\d+\.\d+)(?P<gpu>-gpu)?$"
)
_VERTEX_TF = re.compile(
    r"^[a-z0-9-]+-docker\.pkg\.dev/vertex-ai/training/tf-(?:cpu|gpu)\.2-(?P<minor>\d+)"
    r"\.py3\d+(?::[\w.-]+)?$"
)
_DLC_TF = re.compile(
    r"^(?:(?:[a-z]+\.)?gcr\.io|[a-z0-9-]+-docker\.pkg\.dev/deeplearning-platform-release/gcr\.io)"
    r"/(?:deeplearning-platform-release/)?tf2?-(?:cpu|gpu)\.2-(?P<minor>\d+)(?:\.py3\d+)?"
    r"(?::[\w.-]+)?$"
)
_PYTHON_IMAGE = re.compile(
    r"^(?:(?:index\.)?docker\.io/)?(?:library/)?python:(?P<version>3\.\d+)(?:[.\w-]*)$"
)


def supported_bases() -> list[str]:
    """The bases the local service can run, as a learner would write them."""
    tf = kit_tensorflow()
    return [
        f"tensorflow/tensorflow:{tf} or :{tf}-gpu (TensorFlow {tf}, the kit's release)",
        "REGION-docker.pkg.dev/vertex-ai/training/tf-cpu.2-NN.py3NN (or tf-gpu): Vertex AI's "
        "prebuilt TensorFlow training containers, as TensorFlow 2.NN",
        "gcr.io/deeplearning-platform-release/tf2-cpu.2-NN (or tf2-gpu): Deep Learning "
        "Containers, as TensorFlow 2.NN",
        f"python:{PYTHON_VERSION} (any variant, e.g. python:{PYTHON_VERSION}-slim): this "
        "machine's Python, no packages",
        "scratch: no Python",
    ]


def base_image(image: str) -> BaseImage:
    """The Python packages that stand for ``image`` here; ImageError for a base the kit
    cannot stand in for, naming the ones it can."""
    if image == "scratch":
        return BaseImage(image, (), False, "an empty image: no Python")
    if match := _TF_IMAGE.match(image):
        version = match.group("version")
        if version == kit_tensorflow():
            gpu = " (CUDA is not reproduced: TensorFlow runs on the CPU)" if match["gpu"] else ""
            return BaseImage(
                image, (f"tensorflow=={version}",), True, f"tensorflow=={version}{gpu}"
            )
    for family in (_VERTEX_TF, _DLC_TF):
        if match := family.match(image):
            requirement = f"tensorflow==2.{int(match.group('minor'))}.*"
            return BaseImage(
                image,
                (requirement,),
                True,
                f"{requirement} (the image's other packages are not added)",
            )
    if (match := _PYTHON_IMAGE.match(image)) and match.group("version") == PYTHON_VERSION:
        return BaseImage(image, (), True, f"Python {PYTHON_VERSION}, no packages")
    raise ImageError(
        f"the base image {image} has no stand-in here: the local service builds each job's "
        "Python environment from its base, without Docker, and can run these bases: "
        + "; ".join(supported_bases())
        + ". Change the Dockerfile's FROM line to one of them."
    )


def cache_root() -> Path:
    """Where image environments are kept: ``$LABKIT_IMAGE_ENVS``, else
    ``$XDG_CACHE_HOME/cassava-mwms/image-envs`` (``~/.cache/...``); deleting it is safe."""
    if os.environ.get(CACHE_VARIABLE):
        return Path(os.environ[CACHE_VARIABLE]).expanduser().resolve()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return (cache / "cassava-mwms" / "image-envs").resolve()


def site_packages(prefix: Path) -> Path:
    return prefix / "lib" / f"python{PYTHON_VERSION}" / "site-packages"


def without_kit_python(env: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """``env`` without the variables that would put the kit's Python into an image's."""
    return {k: v for k, v in env.items() if k not in KIT_PYTHON_VARIABLES}


@dataclasses.dataclass(frozen=True)
class ImageEnvironment:
    """The Python a job's replicas run in (``prefix`` None: a base without Python)."""

    base: BaseImage
    prefix: Path | None

    @property
    def python(self) -> Path | None:
        return self.prefix / "bin" / "python" if self.prefix else None

    def path_variable(self) -> str:
        """PATH in a replica: the environment's programs first, then the container's."""
        return (
            f"{self.prefix / 'bin'}{os.pathsep}{CONTAINER_PATH}" if self.prefix else CONTAINER_PATH
        )

    def argv(self, argv: Sequence[str]) -> list[str]:
        """``argv`` with a leading ``python``/``python3`` (or the image's /usr/bin one) as this
        environment's interpreter; a shell-form command finds it first on PATH."""
        argv = list(argv)
        if self.python and argv and PYTHON_PROGRAM.match(argv[0]):
            argv[0] = str(self.python)
        return argv


def _layer_key(payload: dict) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def _locked(lock_path: Path, cancel: threading.Event | None):
    """An exclusive lock on ``lock_path`` (one build of a layer at a time, across processes),
    waiting for it while ``cancel`` is not set."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(lock_path, "w")  # noqa: SIM115 - closed by the caller's `with`
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if cancel is not None and cancel.is_set():
                handle.close()
                raise BuildCancelled(
                    "cancelled while another build of the environment ran"
                ) from None
            time.sleep(LOCK_POLL_S)


def _pip(prefix: Path, install: PipInstall, log_path: Path, cancel: threading.Event | None) -> None:
    """Run one ``pip install`` into ``prefix`` (the kit's pip, run by the environment's own
    Python through ``pip --python``, so pip sees only that environment)."""
    from labkit.local.supervisor import die_with_parent

    argv = [sys.executable, "-m", "pip", "--python", str(prefix / "bin" / "python"), "install"]
    argv += ["--no-input", "--disable-pip-version-check", *install.args]
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"\n$ {' '.join(argv)}\n")
        log.flush()
        process = subprocess.Popen(  # noqa: S603 - the kit's own pip
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=without_kit_python(os.environ),
            preexec_fn=die_with_parent,  # noqa: PLW1509 - one prctl call
        )
        while process.poll() is None:
            if cancel is not None and cancel.is_set():
                process.kill()
                process.wait()
                raise BuildCancelled(f"cancelled during `{install.line}`")
            time.sleep(LOCK_POLL_S)
    if process.returncode != 0:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        errors = [line for line in lines if line.startswith("ERROR:")]  # pip's own verdict
        tail = errors or lines[-PIP_TAIL_LINES:]
        raise ImageError(
            f"`{install.line}` failed in the image environment (pip exited with "
            f"{process.returncode}); pip's last lines:\n"
            + "\n".join(tail)
            + f"\n(whole log: {log_path})"
        )


def _build_layer(
    name: str,
    installs: Sequence[PipInstall],
    parent: Path | None,
    log: Callable[[str], None],
    cancel: threading.Event | None,
) -> Path:
    """The layer ``name`` in the cache, built now unless a finished one is there."""
    root = cache_root()
    prefix = root / name
    with _locked(root / f"{name}.lock", cancel):
        if (prefix / MANIFEST).is_file():
            log(f"image environment: reusing {prefix}")
            return prefix
        shutil.rmtree(prefix, ignore_errors=True)  # a build that died half way
        log_path = root / f"{name}.log"
        log_path.write_text("")
        log(
            f"image environment: building {prefix} ({len(installs)} pip install step(s); pip's output: {log_path})"
        )
        started = time.monotonic()
        try:
            venv.EnvBuilder(with_pip=False, symlinks=True, clear=True).create(prefix)
            if parent is not None:
                (site_packages(prefix) / BASE_LAYER_PTH).write_text(f"{site_packages(parent)}\n")
            for install in installs:
                log(f"image environment: pip install {' '.join(install.args)}")
                _pip(prefix, install, log_path, cancel)
        except BaseException:
            shutil.rmtree(prefix, ignore_errors=True)
            raise
        seconds = time.monotonic() - started
        manifest = {
            "installs": [i.line for i in installs],
            "parent": str(parent),
            "seconds": seconds,
        }
        (prefix / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        log(f"image environment: built {prefix} in {seconds:.0f} s")
        return prefix


def ensure_environment(
    plan: ImagePlan,
    log: Callable[[str], None] = lambda line: None,
    cancel: threading.Event | None = None,
) -> ImageEnvironment:
    """The environment of ``plan``'s image: its base layer and its RUN installs, built now or
    reused from the cache. ImageError (before anything runs) for a base or a RUN step the
    kit cannot run, or a pip install that fails."""
    base = base_image(plan.base)
    steps = read_run_steps(plan)
    log(f"image environment: FROM {plan.base} stands for {base.stands_for}")
    for command in steps.not_executed:
        log(
            f"image environment: RUN not executed (Python packages only, no system packages): {command}"
        )
    for note in steps.dropped:
        log(f"image environment: {note}")
    if not base.has_python:
        if steps.installs:
            raise ImageError(
                f"{plan.base} has no Python, so `{steps.installs[0].line}` cannot run: start "
                "the Dockerfile FROM an image with Python, e.g. " + supported_bases()[0]
            )
        return ImageEnvironment(base, None)
    interpreter = {"python": sys.version, "platform": sys.platform}
    parent = None
    if base.packages:
        base_install = PipInstall(line=f"FROM {plan.base}", args=base.packages, key=base.packages)
        key = _layer_key({**interpreter, "base": list(base.packages)})
        try:
            parent = _build_layer(f"base-{key}", [base_install], None, log, cancel)
        except BuildCancelled:
            raise
        except ImageError as err:
            raise ImageError(
                f"the base image {plan.base} stands for {' '.join(base.packages)} on this "
                f"machine's Python {PYTHON_VERSION}, and pip could not install it. Bases the "
                f"kit can run: {'; '.join(supported_bases())}.\n{err}"
            ) from err
    key = _layer_key(
        {**interpreter, "parent": str(parent), "installs": [list(i.key) for i in steps.installs]}
    )
    return ImageEnvironment(base, _build_layer(f"image-{key}", steps.installs, parent, log, cancel))
