"""Twenty jobs created at once: at most the replica limit runs, the rest wait QUEUED."""

from __future__ import annotations

import threading
import time

import pytest

from labkit.local.emulator import admission
from labkit.local.emulator.admission import Admission

from .conftest import PARENT, start_service

LIMIT = 2


def test_twenty_jobs_at_once_never_run_more_than_the_limit_and_all_succeed(
    tmp_path, tiny_image, monkeypatch
):
    monkeypatch.setenv(admission.LIMIT_VARIABLE, str(LIMIT))  # the service reads it at start
    service = start_service(tmp_path / "vertex", tiny_image)
    try:
        created = time.monotonic()
        jobs = [service.create_job({"SLEEP": "0.3"}) for _ in range(20)]
        names = {job["name"] for job in jobs}
        most_running, queued_seen = 0, False
        while time.monotonic() - created < 120:
            status, page = service.request("GET", f"/v1/{PARENT}/customJobs?pageSize=100")
            assert status == 200, page
            states = [job["state"] for job in page["customJobs"] if job["name"] in names]
            most_running = max(most_running, states.count("JOB_STATE_RUNNING"))
            queued_seen = queued_seen or "JOB_STATE_QUEUED" in states  # visible in the list
            processes = list((service.state_dir / "jobs").glob("*/processes.json"))
            assert len(processes) <= LIMIT, processes
            if all(s == "JOB_STATE_SUCCEEDED" for s in states):
                break
            assert not {"JOB_STATE_FAILED", "JOB_STATE_CANCELLED"} & set(states), states
            time.sleep(0.05)
        elapsed = time.monotonic() - created
        assert all(service.get(n)["state"] == "JOB_STATE_SUCCEEDED" for n in names)
        print(
            f"20 jobs, limit {LIMIT}: all SUCCEEDED in {elapsed:.1f} s, at most {most_running} running"
        )
        assert queued_seen
        assert 1 <= most_running <= LIMIT
        _, logs = service.request("GET", f"/labkit/v1/{jobs[-1]['name']}/logs")
        assert (
            "state JOB_STATE_QUEUED" in logs["job"] and "LABKIT_MAX_RUNNING_REPLICAS" in logs["job"]
        )
    finally:
        from labkit.local.emulator import control

        control.stop(service.state_dir)


def test_a_queued_job_can_be_cancelled_and_never_starts(tmp_path, tiny_image, monkeypatch):
    monkeypatch.setenv(admission.LIMIT_VARIABLE, "1")
    service = start_service(tmp_path / "vertex", tiny_image)
    try:
        first = service.create_job({"SLEEP": "30"})
        second = service.create_job({"SLEEP": "30"})
        service.wait(second["name"], {"JOB_STATE_QUEUED"}, timeout=20)
        status, _ = service.request("POST", f"/v1/{second['name']}:cancel")
        assert status == 200
        assert service.wait(second["name"], {"JOB_STATE_CANCELLED"}, timeout=20)
        assert service.get(first["name"])["state"] == "JOB_STATE_RUNNING"
        job_dir = service.state_dir / "jobs" / second["name"].rsplit("/", 1)[1]
        assert not (job_dir / "logs").exists()  # no replica was ever started
    finally:
        from labkit.local.emulator import control

        control.stop(service.state_dir)


def test_admission_is_first_come_first_served_and_a_big_job_runs_alone():
    gate = Admission(limit=2)
    never = threading.Event()
    for name in ("a", "b", "c"):
        gate.enqueue(name)
    assert gate.admit("a", 1, never)
    assert gate.would_wait("c", 1)  # b is first in line
    assert gate.admit("b", 1, never)
    assert gate.would_wait("c", 1)  # 2 of 2 replicas run
    gate.release(1)
    assert gate.admit("c", 1, never)
    gate.release(1)
    gate.release(1)
    gate.enqueue("big")
    assert gate.admit("big", 5, never)  # larger than the limit: runs when nothing else does
    gate.enqueue("next")
    cancelled = threading.Event()
    cancelled.set()
    assert not gate.admit("next", 1, cancelled)  # gave up while waiting: left the line
    assert gate.running == 5


def test_the_limit_defaults_to_the_cores_and_a_bad_value_names_the_fix():
    assert admission.default_limit({}) >= 2
    assert admission.default_limit({admission.LIMIT_VARIABLE: "3"}) == 3
    for bad in ("0", "-1", "two"):
        with pytest.raises(ValueError, match="LABKIT_MAX_RUNNING_REPLICAS=.*whole number"):
            admission.default_limit({admission.LIMIT_VARIABLE: bad})
