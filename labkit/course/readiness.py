"""Is everything in place? Notebook 00's checks before the lab, and 05's after cleanup.

Notebook 00 checks now what notebooks 01-05 would otherwise discover later: the packages
against the pins, the bucket, the dataset, the local Vertex AI service (or, in the cloud, the
APIs and Vertex AI itself). `assert_ready` stops with every missing piece named and records
the checks in the run folder; `nothing_left` proves after 05's cleanup that the kit's
resources are gone.
"""

from __future__ import annotations

import dataclasses
import platform
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from labkit.cloud import cleanup, paths, setup_checks, storage
from labkit.cloud.settings import Settings, on_workbench
from labkit.course import pins
from labkit.course.results import record
from labkit.i18n import gettext
from labkit.local.emulator import control

SHOWN_PACKAGES = (
    "tensorflow",
    "tf-keras",
    "tensorflow-datasets",
    "google-cloud-aiplatform",
    "google-cloud-storage",
)
SUPPORTED_PYTHON = ((3, 10), (3, 13))  # pyproject.toml's requires-python: >=3.10,<3.13


def show_run(settings: Settings, mode_parameter: str, run_dir: str | Path) -> None:
    """Notebook 00's first lines: which mode the settings resolved to (``MODE="auto"`` may
    become either) and where this run's results go, in the edition's words."""
    print(
        gettext("mode: {mode} (MODE={parameter!r})").format(
            mode=settings.mode, parameter=mode_parameter
        )
    )
    print(gettext("results of this run: {run_dir}").format(run_dir=run_dir))


def show_devices() -> None:
    """What TensorFlow will train on here, and whether this is a Workbench instance: a
    learner on a CPU-only machine should know why notebook 02 is slow before it starts."""
    import tensorflow as tf  # lazy: see _dataset_ready

    gpus = tf.config.list_physical_devices("GPU")
    print(gettext("devices:"), [device.name for device in tf.config.list_physical_devices()])
    print(gettext("GPUs:"), len(gpus), "" if gpus else gettext("(TensorFlow trains on the CPU)"))
    print(gettext("Vertex AI Workbench instance:"), gettext("yes" if on_workbench() else "no"))


def package_versions(packages: Iterable[str] = SHOWN_PACKAGES) -> list[dict[str, Any]]:
    """Installed vs pinned version of Python and each package, and whether they match."""
    pinned = pins.pinned_versions()
    low, high = SUPPORTED_PYTHON
    rows: list[dict[str, Any]] = [
        {
            "package": "python",
            "installed": platform.python_version(),
            "pinned": f">={low[0]}.{low[1]},<{high[0]}.{high[1]}",
            "matches": low <= tuple(int(p) for p in platform.python_version_tuple()[:2]) < high,
        }
    ]
    for name in packages:
        try:
            installed: str | None = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = None
        rows.append(
            {
                "package": name,
                "installed": installed or "missing",
                "pinned": pinned.get(name.lower()),
                "matches": installed is not None and installed == pinned.get(name.lower()),
            }
        )
    return rows


@dataclasses.dataclass
class Check:
    """One thing the later notebooks need, whether it is in place, and what to do if not."""

    check: str
    ok: bool
    detail: str


def _check(name: str, probe: Callable[[], tuple[bool, str]]) -> Check:
    try:
        ok, detail = probe()
    except Exception as err:  # a failing probe is a failed check, with its reason
        ok, detail = False, f"{type(err).__name__}: {str(err)[:200]}"
    return Check(name, ok, detail)


def readiness(settings: Settings, knobs: Mapping[str, Any]) -> list[Check]:
    """Everything notebooks 01-05 rely on, checked now rather than discovered later."""
    checks = [
        _check(
            "settings saved",
            lambda: (paths.settings_file().is_file(), str(paths.settings_file())),
        ),
        _check(
            "packages match the pins",
            lambda: (
                all(r["matches"] for r in package_versions()),
                "see the version table above",
            ),
        ),
        _check(
            "bucket exists",
            lambda: (
                storage.storage_client(settings).lookup_bucket(settings.bucket) is not None,
                settings.bucket_uri,
            ),
        ),
        _check("dataset readable", lambda: _dataset_ready(knobs)),
    ]
    if settings.mode == "local":
        checks.append(_check("local Vertex AI service", _local_service_ready))
    checks.append(_check("APIs enabled", lambda: _apis_enabled(settings)))
    if settings.mode == "cloud":
        checks.append(_check("Vertex AI reachable", _vertex_reachable))
    return checks


def _apis_enabled(settings: Settings) -> tuple[bool, str]:
    from labkit.local import vertex

    found = setup_checks.check_apis(settings.project_id, vertex.service_usage_client(settings))
    return found.ok, found.message()


def _dataset_ready(knobs: Mapping[str, Any]) -> tuple[bool, str]:
    """Prepared TFDS data (or a folder) is ready; an unprepared TFDS dataset is fine only
    where TFDS may download it (no data dir given, i.e. cloud mode)."""
    # Lazy: TFDS imports TensorFlow, and notebook 00 imports this module before its settings
    # load has sent TensorFlow's C++ start-up lines to the kernel log (labkit.cloud.tflogs).
    import tensorflow_datasets as tfds

    source = str(knobs["data"])
    if not source.startswith("tfds:"):
        return Path(source).is_dir(), source
    name = source.removeprefix("tfds:")
    builder = tfds.builder(name, data_dir=knobs.get("data_dir"))
    if builder.is_prepared():
        return True, gettext("tfds {name} in {data_dir}").format(
            name=name, data_dir=builder.data_dir
        )
    return knobs.get("data_dir") is None, gettext(
        "tfds {name} is not prepared in {data_dir}: the first tfds.load downloads it"
    ).format(name=name, data_dir=builder.data_dir)


def _local_service_ready() -> tuple[bool, str]:
    status = control.status()
    return status.running, status.url or status.detail


def _vertex_reachable() -> tuple[bool, str]:
    jobs = cleanup.list_kit_jobs()
    return True, gettext("{n} custom job(s) of the kit in the project").format(n=len(jobs))


def assert_ready(checks: Sequence[Check], settings: Settings, run_dir: str | Path) -> None:
    """Stop here, naming what is missing, rather than fail in a later notebook; when all is
    in place, record the mode and the checks as this run's ``setup``."""
    missing = [c for c in checks if not c.ok]
    if missing:
        raise RuntimeError(
            "not ready: "
            + "; ".join(f"{c.check} ({c.detail})" for c in missing)
            + ". Fix these and run this notebook again."
        )
    record(run_dir, "setup", {"mode": settings.mode, "checks": checks})


def nothing_left(
    settings: Settings, deleted: cleanup.CleanupPlan, run_dir: str | Path
) -> cleanup.CleanupPlan:
    """After ``cleanup(settings, yes=True)``: list what the kit would still delete (nothing,
    when the cleanup worked), print it and record what was deleted and what is left."""
    after = cleanup.plan_cleanup(settings)
    after.release()
    print(after)
    record(
        run_dir,
        "cleanup",
        {"deleted": len(deleted.items), "errors": deleted.errors, "left": after.names()},
    )
    return after
