"""The local service's state on disk, so a restarted service still knows its jobs.

Layout under the state dir::

    emulator.pid, server.json, server.log   the running service (see `control`)
    images.json                             image URI -> build context
    jobs/<id>/job.json                      the CustomJob exactly as GET returns it
    jobs/<id>/job.log                       states, restarts and every replica's lines
    jobs/<id>/logs/<role>.log               one log per replica (all attempts)
    jobs/<id>/processes.json                pids of the running replicas (for `stop`)
    pipelines/<id>/job.json                 a TrainingPipeline exactly as GET returns it
                                            (its replicas run in its backing CustomJob)
    operations/<id>.json                    delete operations the SDK polls

Only the service process writes here; a lock serialises its request threads. Files are
replaced atomically, so a reader never sees half a job.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from labkit.cloud.paths import write_json_atomic
from labkit.local.emulator.errors import not_found

TERMINAL_STATES = frozenset(
    {
        "JOB_STATE_SUCCEEDED",
        "JOB_STATE_FAILED",
        "JOB_STATE_CANCELLED",
        "JOB_STATE_EXPIRED",
        "PIPELINE_STATE_SUCCEEDED",
        "PIPELINE_STATE_FAILED",
        "PIPELINE_STATE_CANCELLED",
    }
)
# REST collection -> (folder under the state dir, the resource's name in messages, its first state)
KINDS: dict[str, tuple[str, str, str]] = {
    "customJobs": ("jobs", "CustomJob", "JOB_STATE_PENDING"),
    "trainingPipelines": ("pipelines", "TrainingPipeline", "PIPELINE_STATE_PENDING"),
}


def now_rfc3339() -> str:
    """Timestamps as the JSON API writes them: UTC, microseconds, ``Z``."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_numeric_id() -> str:
    """Vertex resource ids are large numbers; time first keeps them in creation order."""
    return f"{time.time_ns() // 1000}{random.randrange(1000):03d}"


def split_name(name: str) -> tuple[str, str, str]:
    """``projects/P/locations/L/customJobs/ID`` -> (parent, ``customJobs``, ID)."""
    for kind, (_, what, _) in KINDS.items():
        parent, sep, resource_id = name.rpartition(f"/{kind}/")
        if sep:
            if not resource_id or "/" in resource_id:
                raise not_found(f"{what} {name}")
            return parent, kind, resource_id
    raise not_found(f"Resource {name}")


def split_job_name(name: str) -> tuple[str, str]:
    """``projects/P/locations/L/customJobs/ID`` -> (parent, ID)."""
    parent, _, job_id = split_name(name)
    return parent, job_id


class JobStore:
    """CustomJob and TrainingPipeline records, and delete operations, under ``state_dir``."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        self.jobs_dir = self.state_dir / "jobs"
        self.ops_dir = self.state_dir / "operations"
        for folder, _, _ in KINDS.values():
            (self.state_dir / folder).mkdir(parents=True, exist_ok=True)
        self.ops_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()

    def _kind_dir(self, kind: str) -> Path:
        return self.state_dir / KINDS[kind][0]

    # ---- jobs and pipelines ----
    def job_dir(self, name: str) -> Path:
        _, kind, resource_id = split_name(name)
        return self._kind_dir(kind) / resource_id

    def create(self, parent: str, body: dict[str, Any], kind: str = "customJobs") -> dict[str, Any]:
        with self._lock:
            folder = self._kind_dir(kind)
            job_id = new_numeric_id()
            while (folder / job_id).exists():
                job_id = new_numeric_id()
            stamp = now_rfc3339()
            job = {
                **body,
                "name": f"{parent}/{kind}/{job_id}",
                "state": KINDS[kind][2],
                "createTime": stamp,
                "updateTime": stamp,
            }
            for output_only in (
                "startTime",
                "endTime",
                "error",
                "webAccessUris",
                "trainingTaskMetadata",
            ):
                job.pop(output_only, None)
            write_json_atomic(folder / job_id / "job.json", job)
            return job

    def get(self, name: str) -> dict[str, Any]:
        _, kind, _ = split_name(name)
        path = self.job_dir(name) / "job.json"
        with self._lock:
            if not path.is_file():
                raise not_found(f"{KINDS[kind][1]} {name}")
            job = json.loads(path.read_text())
        if job["name"] != name:
            raise not_found(f"{KINDS[kind][1]} {name}")
        return job

    def exists(self, name: str) -> bool:
        try:
            self.get(name)
        except Exception:
            return False
        return True

    def update(self, name: str, **changes: Any) -> dict[str, Any] | None:
        """Apply ``changes`` (a None value removes the field); None if the job was deleted."""
        with self._lock:
            if not self.exists(name):
                return None
            job = self.get(name)
            for key, value in changes.items():
                if value is None:
                    job.pop(key, None)
                else:
                    job[key] = value
            job["updateTime"] = now_rfc3339()
            write_json_atomic(self.job_dir(name) / "job.json", job)
            return job

    def list(self, parent: str, kind: str = "customJobs") -> list[dict[str, Any]]:
        jobs = []
        with self._lock:
            for path in self._kind_dir(kind).glob("*/job.json"):
                try:
                    job = json.loads(path.read_text())
                except (OSError, json.JSONDecodeError):
                    continue
                if job.get("name", "").startswith(f"{parent}/{kind}/"):
                    jobs.append(job)
        return sorted(jobs, key=lambda j: j.get("createTime", ""), reverse=True)

    def all_jobs(self, kind: str = "customJobs") -> list[dict[str, Any]]:
        with self._lock:
            return [json.loads(p.read_text()) for p in self._kind_dir(kind).glob("*/job.json")]

    def delete(self, name: str) -> None:
        with self._lock:
            self.get(name)
            shutil.rmtree(self.job_dir(name), ignore_errors=True)

    def append_event(self, name: str, line: str) -> None:
        """One line of the job's own log (``job.log``), with a timestamp."""
        with self._lock:
            folder = self.job_dir(name)
            if not folder.is_dir():
                return
            with open(folder / "job.log", "a", encoding="utf-8") as log:
                log.write(f"{now_rfc3339()} {line}\n")

    # ---- operations ----
    def save_operation(self, operation: dict[str, Any]) -> None:
        op_id = operation["name"].rsplit("/", 1)[1]
        write_json_atomic(self.ops_dir / f"{op_id}.json", operation)

    def get_operation(self, name: str) -> dict[str, Any]:
        op_id = name.rsplit("/", 1)[-1]
        path = self.ops_dir / f"{op_id}.json"
        if not path.is_file():
            raise not_found(f"Operation {name}")
        operation = json.loads(path.read_text())
        if operation["name"] != name:
            raise not_found(f"Operation {name}")
        return operation
