"""`labkit cluster` and the supervisor under it: real processes, real signals.

The replicas here are tiny Python scripts (no TensorFlow) so the failure, timeout and
Ctrl-C paths run in seconds; the trainer-backed run is marked slow.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from labkit.cloud.paths import REPO_ROOT
from labkit.local import supervisor
from labkit.local.cluster import run_cluster

# Prints its role, starts a grandchild that sleeps (to prove the whole group is stopped),
# then behaves as FAIL_ROLE / FAIL_CODE / SLEEP ask.
REPLICA_SCRIPT = textwrap.dedent(
    """
    import json, os, subprocess, sys, time
    tf = json.loads(os.environ["TF_CONFIG"])
    role = f"{tf['task']['type']}-{tf['task']['index']}"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    print(f"role={role} pid={os.getpid()} child={child.pid}", flush=True)
    print("cluster=" + json.dumps(tf["cluster"], sort_keys=True), flush=True)
    print("intra_op_threads=" + os.environ.get("TF_NUM_INTRAOP_THREADS", "all"), flush=True)
    if role == os.environ.get("FAIL_ROLE"):
        time.sleep(float(os.environ.get("FAIL_AFTER", "0.5")))
        print("about to fail: disk on fire", flush=True)
        sys.exit(int(os.environ.get("FAIL_CODE", "3")))
    time.sleep(float(os.environ.get("SLEEP", "0")))
    child.kill()
    print("done", flush=True)
    """
)


@pytest.fixture
def replica_script(tmp_path: Path) -> Path:
    path = tmp_path / "replica.py"
    path.write_text(REPLICA_SCRIPT)
    return path


def pids_from_logs(logs: dict[str, Path]) -> list[int]:
    pids = []
    for path in logs.values():
        for line in path.read_text().splitlines():
            if line.startswith("role="):
                fields = dict(part.split("=") for part in line.split())
                pids += [int(fields["pid"]), int(fields["child"])]
    return pids


def test_three_replicas_with_chief_succeed(tmp_path, replica_script, assert_gone):
    lines: list[str] = []
    result = run_cluster(
        ["python", str(replica_script)],
        workers=3,
        chief=True,
        logs_dir=tmp_path / "logs",
        timeout=60,
        sink=lines.append,
    )
    assert result.ok, result.message
    assert result.exit_codes == {"chief-0": 0, "worker-0": 0, "worker-1": 0}
    assert sorted(result.logs) == ["chief-0", "worker-0", "worker-1"]
    for role in result.logs:
        text = result.log_text(role)
        assert f"role={role}" in text
        assert "done" in text
        assert any(line.startswith(f"[{role}] role={role}") for line in lines)
    cluster_lines = {line.split("cluster=")[1] for line in lines if "cluster=" in line}
    assert len(cluster_lines) == 1  # every replica saw the same cluster
    cluster = json.loads(cluster_lines.pop())
    assert len(cluster["chief"]) == 1 and len(cluster["worker"]) == 2
    assert_gone(pids_from_logs(result.logs))


def test_without_chief_all_replicas_are_workers(tmp_path, replica_script):
    result = run_cluster(
        [sys.executable, str(replica_script)], workers=2, logs_dir=tmp_path, timeout=60
    )
    assert result.ok
    tasks = {role: json.loads(cfg)["task"] for role, cfg in result.tf_configs.items()}
    assert tasks == {
        "worker-0": {"type": "worker", "index": 0},
        "worker-1": {"type": "worker", "index": 1},
    }
    spec = json.loads(result.log_text("worker-1").split("TF_CONFIG=", 1)[1].splitlines()[0])
    assert "chief" not in spec["cluster"]
    # Two replicas on one machine split its cores, as each would have its own machine's.
    share = max(1, (os.cpu_count() or 1) // 2)
    for role in result.logs:
        assert f"intra_op_threads={share}" in result.log_text(role)


def test_co_located_replicas_share_the_cores_unless_the_user_chose():
    assert supervisor.co_located_thread_env(2, {}, cpus=2) == {"TF_NUM_INTRAOP_THREADS": "1"}
    assert supervisor.co_located_thread_env(3, {}, cpus=16)["TF_NUM_INTRAOP_THREADS"] == "5"
    assert supervisor.co_located_thread_env(4, {}, cpus=2)["TF_NUM_INTRAOP_THREADS"] == "1"
    assert supervisor.co_located_thread_env(2, {"TF_NUM_INTEROP_THREADS": "4"}, cpus=2) == {}
    assert supervisor.co_located_thread_env(1, {}, cpus=2) == {}  # alone: TF's defaults
    assert supervisor.co_located_thread_env(2, {"TF_NUM_INTRAOP_THREADS": "2"}, cpus=2) == {}


def test_one_failure_stops_the_others_and_names_the_replica(tmp_path, replica_script, assert_gone):
    started = time.monotonic()
    result = run_cluster(
        ["python", str(replica_script)],
        workers=3,
        chief=True,
        logs_dir=tmp_path,
        timeout=120,
        env={"FAIL_ROLE": "worker-1", "FAIL_CODE": "3", "SLEEP": "300"},
        sink=lambda line: None,
    )
    elapsed = time.monotonic() - started
    assert elapsed < 15, f"the failure took {elapsed:.1f} s to stop the cluster"
    assert not result.ok and result.outcome == "failed"
    assert result.failed_role == "worker-1"
    assert result.exit_codes["worker-1"] == 3
    assert result.exit_codes["chief-0"] == -signal.SIGTERM
    assert result.message.startswith("replica worker-1 exited with status 3")
    assert result.message.rstrip().endswith("about to fail: disk on fire")
    assert_gone(pids_from_logs(result.logs))


def test_timeout_stops_everything(tmp_path, replica_script, assert_gone):
    result = run_cluster(
        ["python", str(replica_script)],
        workers=2,
        chief=True,
        logs_dir=tmp_path,
        timeout=1.5,
        env={"SLEEP": "300"},
        sink=lambda line: None,
    )
    assert result.outcome == "timeout" and not result.ok
    assert "timed out after 1.5 s" in result.message
    assert_gone(pids_from_logs(result.logs))


def test_replica_ignoring_sigterm_is_killed(tmp_path, assert_gone):
    stubborn = tmp_path / "stubborn.py"
    stubborn.write_text(
        "import os, signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print(f'role=x pid={os.getpid()} child={os.getpid()}', flush=True)\n"
        "time.sleep(300)\n"
    )
    result = run_cluster(
        ["python", str(stubborn)],
        workers=1,
        logs_dir=tmp_path / "logs",
        timeout=1,
        grace_seconds=1,
        sink=lambda line: None,
    )
    assert result.exit_codes == {"worker-0": -signal.SIGKILL}
    assert_gone(pids_from_logs(result.logs))


def test_supervisor_cancel_and_primary_linger(tmp_path):
    sleeper = [sys.executable, "-c", "import time; time.sleep(300)"]
    quick = [sys.executable, "-c", "print('finished')"]

    def launch(role, argv):
        return supervisor.ReplicaLaunch(role, argv, dict(os.environ), tmp_path / f"{role}.log")

    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    result = supervisor.supervise([launch("chief-0", sleeper)], cancel=cancel, sink=print)
    assert result.outcome == "cancelled"
    assert result.replicas[0].stopped

    # Vertex ends a job when its primary replica is done, even if a ps would run forever.
    result = supervisor.supervise(
        [launch("chief-0", quick), launch("ps-0", sleeper)],
        primary_roles=["chief-0"],
        linger_seconds=0.5,
        sink=print,
    )
    assert result.ok
    assert result.exit_codes["ps-0"] == -signal.SIGTERM


def test_bad_arguments_fail_early(tmp_path):
    with pytest.raises(ValueError, match="no command given"):
        run_cluster([], workers=2)
    with pytest.raises(ValueError, match="--workers must be at least 1"):
        run_cluster(["true"], workers=0)
    with pytest.raises(ValueError, match="timeout must be a positive"):
        run_cluster(["true"], workers=1, timeout=0)
    launch = supervisor.ReplicaLaunch("a", ["true"], {}, tmp_path / "a.log")
    with pytest.raises(ValueError, match="roles must be unique"):
        supervisor.supervise([launch, launch])


def run_cli(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "labkit", "cluster", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        **kwargs,
    )


def test_cli_success_and_failure(tmp_path, replica_script):
    ok = run_cli(
        [
            "--workers",
            "2",
            "--chief",
            "--logs",
            str(tmp_path / "ok"),
            "--",
            "python",
            str(replica_script),
        ]
    )
    assert ok.returncode == 0, ok.stderr
    assert "[chief-0] role=chief-0" in ok.stdout
    assert "[worker-0] role=worker-0" in ok.stdout
    assert "all 2 replicas succeeded" in ok.stdout
    assert (tmp_path / "ok" / "worker-0.log").is_file()

    failed = run_cli(
        [
            "--workers",
            "2",
            "--chief",
            "--logs",
            str(tmp_path / "bad"),
            "--",
            "python",
            str(replica_script),
        ],
        env={**os.environ, "FAIL_ROLE": "chief-0", "SLEEP": "300"},
    )
    assert failed.returncode == 1
    assert "replica chief-0 exited with status 3" in failed.stderr
    assert "about to fail: disk on fire" in failed.stderr

    usage = run_cli(["--workers", "2"])
    assert usage.returncode == 2 and "no COMMAND given" in usage.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_cli_interrupt_leaves_no_process(tmp_path, replica_script, sig, assert_gone):
    import psutil

    cli = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "labkit",
            "cluster",
            "--workers",
            "2",
            "--logs",
            str(tmp_path),
            "--",
            "python",
            str(replica_script),
        ],
        cwd=REPO_ROOT,
        env={**os.environ, "SLEEP": "300"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # Ctrl-C goes to the CLI only, as from its own terminal
        # A shell running pytest in the background ignores SIGINT, and Python keeps an
        # inherited SIG_IGN: give the CLI the default handler a terminal would.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 30
    descendants: list = []
    while time.monotonic() < deadline:
        descendants = psutil.Process(cli.pid).children(recursive=True)
        if len(descendants) >= 4:  # 2 replicas, each with its sleeping child
            break
        time.sleep(0.1)
    assert len(descendants) >= 4
    os.kill(cli.pid, sig)
    _, stderr = cli.communicate(timeout=30)
    assert cli.returncode == 130, stderr
    assert "interrupted: stopped every replica" in stderr
    assert_gone([p.pid for p in descendants])


def test_a_command_that_cannot_start_is_named(tmp_path):
    with pytest.raises(supervisor.ReplicaStartError, match="cannot start replica chief-0"):
        run_cluster(["/no/such/program"], workers=2, chief=True, logs_dir=tmp_path)
    cli = run_cli(["--workers", "1", "--logs", str(tmp_path), "--", "/no/such/program"])
    assert cli.returncode == 2 and "cannot start replica worker-0" in cli.stderr


# --------------------------------------------------------------------------- what a run shows

NOISY_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    tf = json.loads(os.environ["TF_CONFIG"])
    role = f"{tf['task']['type']}:{tf['task']['index']}"
    print("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR")
    print("I0000 00:00:1796391415.818204    5291 cudart_stub.cc:31] Could not find cuda drivers")
    print("2026-12-04 13:00:00.123456: I tensorflow/core/util/port.cc:113] oneDNN custom operations are on.")
    print(f"[trainer] task={role} chief=False workers=2 replicas=2 strategy=X", flush=True)
    print("Epoch 1/1")
    print("4/4 - 3s - loss: 1.6 - accuracy: 0.2 - 750ms/step", flush=True)
    if role == os.environ.get("FAIL_TASK"):
        print(f"[trainer] task={role} FAULT INJECTED: exiting after step 2 (epoch 1, step 2) (simulated preemption)", flush=True)
        sys.exit(3)
    if os.environ.get("FAIL_TASK"):
        import time
        time.sleep(0.5)
        print("Traceback (most recent call last):")
        print('  File "x.py", line 1, in <module>')
        print("tensorflow.python.framework.errors_impl.UnavailableError: peer lost", flush=True)
        sys.exit(1)
    """
)


def test_views_hide_cpp_logging_and_keep_it_in_the_logs(tmp_path):
    script = tmp_path / "noisy.py"
    script.write_text(NOISY_SCRIPT)
    shown: dict[str, list[str]] = {}
    for view in ("all", "quiet", "trainer"):
        lines: list[str] = []
        result = run_cluster(
            [sys.executable, str(script)],
            workers=2,
            chief=True,
            logs_dir=tmp_path / view,
            sink=lines.append,
            view=view,
        )
        assert result.ok, result.message
        shown[view] = lines
        for role in ("chief-0", "worker-0"):
            assert "cudart_stub.cc" in result.log_text(role)  # the log file keeps everything
    assert len(shown["all"]) == 2 * 6
    assert not any(supervisor.is_cpp_log_line(line.split("] ", 1)[1]) for line in shown["quiet"])
    assert len(shown["quiet"]) == 2 * 3
    assert sorted(line.split("] ", 1)[1][:10] for line in shown["trainer"]) == sorted(
        ["[trainer] ", "4/4 - 3s -"] * 2
    )
    with pytest.raises(ValueError, match="view must be one of"):
        run_cluster([sys.executable, str(script)], workers=1, view="loud")


def test_expected_failure_is_a_short_account_without_traceback(tmp_path):
    script = tmp_path / "noisy.py"
    script.write_text(NOISY_SCRIPT)
    lines: list[str] = []
    result = run_cluster(
        [sys.executable, str(script)],
        workers=3,
        chief=True,
        logs_dir=tmp_path / "logs",
        sink=lines.append,
        env={"FAIL_TASK": "worker:0"},
        view="trainer",
        grace_seconds=1,
    )
    assert result.outcome == "failed" and result.failed_role == "worker-0"
    account = result.account(next_step="restart the job")
    assert "worker-0: exited with status 3, failed first: task=worker:0 FAULT INJECTED" in account
    assert "next: restart the job" in account
    assert f"full logs ({result.hidden_lines} more lines): {tmp_path / 'logs'}/" in account
    assert "Traceback" not in account and not any("Traceback" in line for line in lines)
    assert len(account.splitlines()) <= 6
    # The zh-CN edition reads the same account in Chinese (issue 29, item 1); the replica's
    # own last words and the paths stay as written.
    from labkit import i18n

    with i18n.using("zh-CN"):
        chinese = result.account(next_step="重启作业")
    assert chinese.splitlines()[0].startswith("结果：失败，用时 ")
    assert "worker-0：以状态码 3 退出，最先失败：task=worker:0 FAULT INJECTED" in chinese
    assert "下一步：重启作业" in chinese and f"完整日志（另有 {result.hidden_lines} 行）" in chinese
    assert len(chinese.splitlines()) == len(account.splitlines())


def test_cpp_log_lines_are_recognised():
    cpp = [
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
        "E0000 00:00:1796391421.203183    5291 cuda_platform.cc:52] failed call to cuInit: INTERNAL",
        "I0000 00:00:1796391422.240151    5623 cpu_feature_guard.cc:227] This TensorFlow binary",
        "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow "
        "with the appropriate compiler flags.",
        "2024-01-01 10:00:00.000001: W tensorflow/core/framework/local_rendezvous.cc:404] Local",
    ]
    mine = ["[trainer] task=chief:0 epoch 1/2 loss=1.0", "32/32 - 10s - loss: 1.2", "Epoch 1/2"]
    assert all(supervisor.is_cpp_log_line(line) for line in cpp)
    assert not any(supervisor.is_cpp_log_line(line) for line in mine)
