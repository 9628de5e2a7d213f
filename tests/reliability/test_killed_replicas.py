"""A replica killed by SIGKILL (the out-of-memory killer's signal), again and again."""

from __future__ import annotations

import re
import sys
import time

from labkit.local import cluster, supervisor
from labkit.local.emulator import restarts

from .conftest import alive, gone_within


def test_sigkilled_replica_fails_its_job_within_60s_naming_replica_signal_and_memory(service):
    started = time.monotonic()
    job = service.create_job({"KILL_SELF": "1", "ALLOC_MB": "60"})
    job = service.wait(job["name"], {"JOB_STATE_FAILED"}, timeout=60)
    elapsed = time.monotonic() - started
    assert elapsed < 60, elapsed
    message = job["error"]["message"]
    assert "The replica workerpool0-0 (chief-0) was killed by SIGKILL" in message
    peak = re.search(r"peak memory ([\d.]+) MiB", message)
    assert peak and float(peak.group(1)) >= 60, message  # the 60 MB it held, and Python's own
    _, logs = service.request("GET", f"/labkit/v1/{job['name']}/logs")
    # Vertex's documented rules: 5 restarts in place, then up to 3 whole-job retries
    assert logs["job"].count("restarting it alone, in place") == restarts.REPLICA_RESTART_LIMIT * (
        1 + restarts.JOB_RETRY_LIMIT
    )
    pids = [int(p) for p in re.findall(r"^\S+ \[chief-0\] pid=(\d+)", logs["job"], re.M)]
    assert len(pids) == (restarts.REPLICA_RESTART_LIMIT + 1) * (1 + restarts.JOB_RETRY_LIMIT)
    assert not any(alive(pid) for pid in pids)
    assert not (
        service.state_dir / "jobs" / job["name"].rsplit("/", 1)[1] / "processes.json"
    ).exists()


def test_supervisor_reports_the_peak_memory_of_a_sigkilled_replica(tmp_path):
    launch = supervisor.ReplicaLaunch(
        "worker-0",
        [
            sys.executable,
            "-c",
            "import os, signal; b = bytearray(80 << 20); b[::4096] = b'x' * len(b[::4096]); "
            "os.kill(os.getpid(), signal.SIGKILL)",
        ],
        {},
        tmp_path / "worker-0.log",
    )
    result = supervisor.supervise([launch], grace_seconds=1)
    outcome = result.replicas[0]
    assert outcome.returncode == -9
    assert outcome.peak_rss_bytes is not None and outcome.peak_rss_bytes >= 80 << 20
    assert "was killed by SIGKILL (peak memory" in result.message


def test_cluster_runner_stops_the_rest_within_seconds_when_a_replica_is_sigkilled(tmp_path):
    script = tmp_path / "replica.py"
    script.write_text(
        "import json, os, signal, time\n"
        "task = json.loads(os.environ['TF_CONFIG'])['task']\n"
        "print(f'pid={os.getpid()}', flush=True)\n"
        "if task['index'] == 1:\n"
        "    time.sleep(0.5)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "time.sleep(120)\n"
    )
    started = time.monotonic()
    result = cluster.run_cluster(
        [sys.executable, str(script)], workers=3, logs_dir=tmp_path / "logs", grace_seconds=2
    )
    elapsed = time.monotonic() - started
    assert not result.ok and result.failed_role == "worker-1"
    assert "worker-1 was killed by SIGKILL" in result.message
    assert elapsed < 10, elapsed  # 0.5 s to the kill, then SIGTERM to the rest
    pids = [int(re.search(r"pid=(\d+)", p.read_text()).group(1)) for p in result.logs.values()]
    gone_within(pids, 3)
    assert not (tmp_path / "logs" / supervisor.PROCESS_RECORD).exists()
