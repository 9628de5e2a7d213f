"""SIGKILL of the `labkit cluster` launcher or of the local service: the replicas die with
their parent (parent-death signal), their pids were recorded, state files are whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from labkit.cloud.paths import REPO_ROOT
from labkit.local import supervisor
from labkit.local.emulator import control
from labkit.local.emulator.store import write_json_atomic

from .conftest import alive, gone_within, start_service


def _recorded(folder, count: int, timeout: float = 20.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            records = json.loads((folder / supervisor.PROCESS_RECORD).read_text())
            if len(records) >= count:
                return [int(r["pid"]) for r in records.values()]
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"no {count} replicas recorded in {folder}")


def test_sigkilled_cluster_launcher_takes_its_replicas_with_it(tmp_path):
    logs = tmp_path / "logs"
    launcher = subprocess.Popen(
        [sys.executable, "-m", "labkit", "cluster", "--workers", "2", "--logs", str(logs)]
        + ["--", sys.executable, "-c", "import time; time.sleep(120)"],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        pids = _recorded(logs, 2)  # recorded for a later clean-up
        assert all(alive(pid) for pid in pids)
        launcher.send_signal(signal.SIGKILL)  # no handler runs: only the kernel can help
        launcher.wait()
        took = gone_within(pids, 3)
        print(f"replicas gone {took:.2f} s after the launcher's SIGKILL")
    finally:
        launcher.kill()


def test_sigkilled_service_takes_its_replicas_with_it_and_a_restart_marks_the_job_failed(
    tmp_path, tiny_image
):
    state = tmp_path / "vertex"
    service = start_service(state, tiny_image)
    try:
        job = service.create_job({"SLEEP": "120"}, replicas=2)
        pids = service.recorded_pids(job["name"], 2)
        os.kill(service.pid, signal.SIGKILL)
        took = gone_within(pids + [service.pid], 3)
        print(f"replicas gone {took:.2f} s after the service's SIGKILL")
        # the record is still there for `labkit emulator stop` / cleanup (nothing left to kill)
        assert control.kill_recorded_processes(state / "jobs" / job["name"].rsplit("/", 1)[1]) == []
        again = start_service(state, tiny_image)  # recovery: the job did not survive
        assert again.get(job["name"])["state"] == "JOB_STATE_FAILED"
    finally:
        control.stop(state)


def test_stop_kills_recorded_replicas_that_outlived_their_parent(tmp_path):
    """Without the parent-death signal (a replica that forked away from it), the record
    is what ends it: `kill_recorded` checks the start time, so a reused pid is never hit."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True
    )
    try:
        supervisor.record_processes(tmp_path, {"worker-0": child.pid})
        assert supervisor.kill_recorded(tmp_path) == [child.pid]
        child.wait(5)
        assert not (tmp_path / supervisor.PROCESS_RECORD).exists()
        supervisor.record_processes(tmp_path, {"worker-0": os.getpid()})
        records = json.loads((tmp_path / supervisor.PROCESS_RECORD).read_text())
        records["worker-0"]["create_time"] -= 100  # the same pid, another process
        (tmp_path / supervisor.PROCESS_RECORD).write_text(json.dumps(records))
        assert supervisor.kill_recorded(tmp_path) == []
    finally:
        child.kill()


@pytest.mark.parametrize(
    "write",
    [
        lambda folder: write_json_atomic(folder / "job.json", {"state": "NEW"}),
        lambda folder: supervisor.record_processes(folder, {"w": os.getpid()}),
    ],
    ids=["job-record", "process-record"],
)
def test_state_files_are_never_half_written(tmp_path, monkeypatch, write):
    """A write that dies before its rename leaves the old file whole (temp file + os.replace)."""
    for name in ("job.json", supervisor.PROCESS_RECORD):
        (tmp_path / name).write_text('{"state": "OLD"}\n')

    def crash(src, dst):
        raise OSError("killed before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        write(tmp_path)
    assert json.loads((tmp_path / "job.json").read_text()) == {"state": "OLD"}
    assert json.loads((tmp_path / supervisor.PROCESS_RECORD).read_text()) == {"state": "OLD"}
