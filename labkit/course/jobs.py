"""Vertex AI jobs as notebook 04 uses them: the worker pools at a glance, where a job's
output is, its state and logs, the console-made job.

One function per fact: `job_output_uri` is where a job's (or a training pipeline's) base
output directory is, `job_model_dir` where its chief saved the model; the cleanup and the
Dockerfile exercise use the same two.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from labkit.cloud.cleanup import job_output_uri
from labkit.cloud.settings import Settings
from labkit.cloud.specs import POOL_ROLES, snake_keys
from labkit.course.results import record
from labkit.course.views import Table
from labkit.i18n import gettext
from labkit.local import vertex
from labkit.local.console import client as console

CUSTOM_JOBS_PAGE = (
    "https://console.cloud.google.com/vertex-ai/training/custom-jobs?project={project}"
)


def job_model_dir(job: Any, settings: Settings) -> str:
    """Where a job's chief saved the model: ``<base output dir>/model``
    (Vertex AI's ``AIP_MODEL_DIR``).

    Cloud: under the job's ``gs://`` output folder. Local: under the folder that stands for
    it (the local service maps ``gs://`` to a folder; `labkit.local.vertex.job_output_dir`).
    """
    if settings.mode == "local":
        return str(vertex.job_output_dir(job, settings=settings) / "model")
    base = job_output_uri(job)
    if base is None:
        raise ValueError(
            f"{job.resource_name} has no base output directory, so Vertex AI set no "
            "AIP_MODEL_DIR: fill in the model output directory (base_output_dir) and rerun it"
        )
    return base + "model"


def describe_pools(worker_pool_specs: Sequence[Mapping[str, Any]]) -> Table:
    """One row per worker pool: its role, replicas, machine, GPUs and image."""
    rows = []
    for i, raw in enumerate(worker_pool_specs):
        pool = snake_keys(dict(raw))
        machine = pool.get("machine_spec") or {}
        rows.append(
            {
                "pool": i,
                "role": POOL_ROLES[i] if i < len(POOL_ROLES) else "?",
                "replicas": pool.get("replica_count", 0),
                "machine": machine.get("machine_type", "-"),
                "gpus": (
                    f"{machine['accelerator_count']} x {machine.get('accelerator_type')}"
                    if machine.get("accelerator_count")
                    else "none"
                ),
                "image": (pool.get("container_spec") or {}).get("image_uri", "-"),
            }
        )
    return Table(rows)


def show_job(job: Any, settings: Settings, run_dir: str | Path, *, tail: int = 12) -> None:
    """A finished job's state and name, then its last log lines (local) or the console page
    that lists it (cloud); recorded as this run's ``job``."""
    print(gettext("state:"), job.state.name)
    print(gettext("job:"), job.resource_name)
    if settings.mode == "local":
        vertex.print_job_logs(job, tail=tail)
    else:
        print(CUSTOM_JOBS_PAGE.format(project=settings.project_id))
    record(run_dir, "job", {"state": job.state.name, "name": job.resource_name})


def follow_console_job(
    settings: Settings, display_name: str, run_dir: str | Path
) -> dict[str, Any] | None:
    """The console-made training pipeline named ``display_name``, followed to its end
    (`labkit.local.console.client.follow_console_job`) and recorded as this run's
    ``console_job``; None when there is none yet (cloud: create it in the console first)."""
    found = console.follow_console_job(settings, display_name, run_dir=run_dir)
    if found is not None:
        record(
            run_dir,
            "console_job",
            {key: found.get(key) for key in ("name", "state", "model_dir", "screenshot")},
        )
    return found
