"""The local service's state on disk, so a restarted service still knows its jobs.

Layout under the state dir::

    emulator.pid, server.json, server.log   the running service (see `control`)
    images.json                             image URI -> build context
    jobs/<id>/job.json                      the CustomJob exactly as GET returns it
    jobs/<id>/job.log                       states, restarts and every replica's lines
    jobs/<id>/logs/<role>.log               one log per replica (all attempts)
    jobs/<id>/processes.json                pids of the running replicas (for `stop`)
    operations/<id>.json                    delete operations the SDK polls

Only the service process writes here; a lock serialises its request threads. Files are
replaced atomically, so a reader never sees half a job.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from labkit.emulator.errors import not_found

TERMINAL_STATES = frozenset(
    {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"}
)


def now_rfc3339() -> str:
    """Timestamps as the JSON API writes them: UTC, microseconds, ``Z``."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_numeric_id() -> str:
    """Vertex resource ids are large numbers; time first keeps them in creation order."""
    return f"{time.time_ns() // 1000}{random.randrange(1000):03d}"


def write_json_atomic(path: Path, payload: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(payload, indent=2) + "\n")
    os.replace(tmp, path)


def split_job_name(name: str) -> tuple[str, str]:
    """``projects/P/locations/L/customJobs/ID`` -> (parent, ID)."""
    parent, sep, job_id = name.rpartition("/customJobs/")
    if not sep or not job_id or "/" in job_id:
        raise not_found(f"CustomJob {name}")
    return parent, job_id


class JobStore:
    """CustomJob records and delete operations under ``state_dir``."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        self.jobs_dir = self.state_dir / "jobs"
        self.ops_dir = self.state_dir / "operations"
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        self.ops_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()

    # ---- jobs ----
    def job_dir(self, name: str) -> Path:
        return self.jobs_dir / split_job_name(name)[1]

    def create(self, parent: str, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            job_id = new_numeric_id()
            while (self.jobs_dir / job_id).exists():
                job_id = new_numeric_id()
            stamp = now_rfc3339()
            job = {
                **body,
                "name": f"{parent}/customJobs/{job_id}",
                "state": "JOB_STATE_PENDING",
                "createTime": stamp,
                "updateTime": stamp,
            }
            for output_only in ("startTime", "endTime", "error", "webAccessUris"):
                job.pop(output_only, None)
            write_json_atomic(self.jobs_dir / job_id / "job.json", job)
            return job

    def get(self, name: str) -> dict[str, Any]:
        parent, job_id = split_job_name(name)
        path = self.jobs_dir / job_id / "job.json"
        with self._lock:
            if not path.is_file():
                raise not_found(f"CustomJob {name}")
            job = json.loads(path.read_text())
        if job["name"] != name:
            raise not_found(f"CustomJob {name}")
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

    def list(self, parent: str) -> list[dict[str, Any]]:
        jobs = []
        with self._lock:
            for path in self.jobs_dir.glob("*/job.json"):
                try:
                    job = json.loads(path.read_text())
                except (OSError, json.JSONDecodeError):
                    continue
                if job.get("name", "").startswith(parent + "/customJobs/"):
                    jobs.append(job)
        return sorted(jobs, key=lambda j: j.get("createTime", ""), reverse=True)

    def all_jobs(self) -> list[dict[str, Any]]:
        with self._lock:
            return [json.loads(p.read_text()) for p in self.jobs_dir.glob("*/job.json")]

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
