"""A real local service (``python -m labkit emulator serve``) in a temp state folder, running
a tiny image whose replica does what its env says: sleep, allocate memory, SIGKILL itself."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from labkit.local import vertex_env
from labkit.local.emulator import control

IMAGE = "us-central1-docker.pkg.dev/local-project/reliability/tiny:1"
PARENT = "projects/local-project/locations/us-central1"
TINY_APP = """\
import os, signal, sys, time
print(f"pid={os.getpid()}", flush=True)
hold = bytearray(int(os.environ.get("ALLOC_MB", "0")) * 1024 * 1024)
hold[::4096] = b"x" * len(hold[::4096])  # touch every page: resident, not just reserved
if os.environ.get("KILL_SELF"):
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(float(os.environ.get("SLEEP", "0")))
print("done", flush=True)
"""


@pytest.fixture(scope="session")
def tiny_image(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-image")
    (folder / "Dockerfile").write_text(
        'FROM python:3.11-slim\nWORKDIR /app\nCOPY app.py /app/app.py\nENTRYPOINT ["python", "app.py"]\n'
    )
    (folder / "app.py").write_text(TINY_APP)
    return folder


class Service:
    """A running local service: its pid, port, state folder, and a small HTTP client."""

    def __init__(self, state_dir: Path, status: control.ServiceStatus) -> None:
        self.state_dir = state_dir
        self.pid = status.pid
        self.port = status.port
        self.token = status.token

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        signed: bool = True,
    ) -> tuple[int, Any]:
        """(status, JSON or text). ``signed``: as the kit's clients send it (JSON, the token);
        else with only ``headers`` (and the Host of 127.0.0.1 unless they name one)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        defaults = {"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"}
        conn.request(
            method, path, body=data, headers={**(defaults if signed else {}), **(headers or {})}
        )
        answer = conn.getresponse()
        raw = answer.read()
        conn.close()
        try:
            return answer.status, json.loads(raw)
        except ValueError:
            return answer.status, raw.decode(errors="replace")

    def create_job(
        self, env: dict[str, str] | None = None, replicas: int = 1, **extra: Any
    ) -> dict:
        pools = [
            {
                "machineSpec": {"machineType": "n1-standard-4"},
                "replicaCount": "1",
                "containerSpec": {
                    "imageUri": IMAGE,
                    "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
                },
            }
        ]
        if replicas > 1:
            pools.append({**pools[0], "replicaCount": str(replicas - 1)})
        body = {"displayName": "tiny", "jobSpec": {"workerPoolSpecs": pools}, **extra}
        status, job = self.request("POST", f"/v1/{PARENT}/customJobs", body)
        assert status == 200, job
        return job

    def get(self, name: str) -> dict:
        status, job = self.request("GET", f"/v1/{name}")
        assert status == 200, job
        return job

    def wait(self, name: str, states: set[str], timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.get(name)
            if job["state"] in states:
                return job
            time.sleep(0.1)
        raise AssertionError(f"{name} never reached {states}: {self.get(name)['state']}")

    def recorded_pids(self, name: str, count: int, timeout: float = 20.0) -> list[int]:
        """The replica pids the service recorded for a job, once ``count`` are recorded."""
        path = self.state_dir / "jobs" / name.rsplit("/", 1)[1] / "processes.json"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                pids = [int(r["pid"]) for r in json.loads(path.read_text()).values()]
            except (OSError, ValueError):
                pids = []
            if len(pids) >= count:
                return pids
            time.sleep(0.05)
        raise AssertionError(f"{count} replica pids never recorded in {path}")


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def gone_within(pids: list[int], seconds: float) -> float:
    """Seconds until every pid has gone; fails after ``seconds``."""
    started = time.monotonic()
    while any(alive(pid) for pid in pids):
        assert time.monotonic() - started < seconds, [p for p in pids if alive(p)]
        time.sleep(0.05)
    return time.monotonic() - started


def start_service(state_dir: Path, image: Path) -> Service:
    status = control.start(state_dir, vertex_env.free_ports(1)[0], {IMAGE: str(image)})
    return Service(state_dir, status)


@pytest.fixture
def service(tmp_path, tiny_image) -> Iterator[Service]:
    """The local service on a free port, state in tmp; stopped afterwards, leaving nothing."""
    running = start_service(tmp_path / "vertex", tiny_image)
    yield running
    control.stop(running.state_dir)
    assert not list((running.state_dir / "jobs").glob("*/processes.json"))
