"""Vertex's restart rules in the local service (`labkit.local.emulator.restarts`), through the SDK.

Tiny commands where the point is the process handling (seconds); one real 2-replica trainer
run each way where the point is MultiWorkerMirroredStrategy and BackupAndRestore.
"""

from __future__ import annotations

import time
import uuid

import psutil
import pytest
from conftest import DEMO_IMAGE_URI
from google.cloud import aiplatform
from google.cloud.aiplatform.compat.types import job_state as gca_job_state
from trainer_runs import small_args

from labkit.cloud import specs
from labkit.local.emulator import restarts
from labkit.local.vertex import job_logs

JobState = gca_job_state.JobState

# Replaces conftest's demo app for this module: a replica that SIGKILLs itself, or exits
# with a code, or (MWMS-like) waits forever for a peer after it was restarted alone.
RESTART_APP = """\
import json, os, signal, sys, time
tf = json.loads(os.environ["TF_CONFIG"])
task = f"{tf['task']['type']}:{tf['task']['index']}"
marker = os.path.join(os.environ["AIP_CHECKPOINT_DIR"], "ran-" + task)
again = os.path.exists(marker)
os.makedirs(os.path.dirname(marker), exist_ok=True)
open(marker, "a").close()
print(f"task={task} pid={os.getpid()} again={again}", flush=True)
if os.environ.get("KILL_TASK") == task:
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGKILL)
if os.environ.get("ONCE_TASK") == task and not again:
    time.sleep(0.2)
    sys.exit(3)
time.sleep(float(os.environ.get("SLEEP", "300")))
print("finished", flush=True)
"""


@pytest.fixture
def demo_build_context(tmp_path_factory):
    folder = tmp_path_factory.mktemp("restart-image")
    (folder / "Dockerfile").write_text(
        'FROM python:3.11-slim\nWORKDIR /app\nCOPY app.py /app/app.py\nENTRYPOINT ["python", "app.py"]\n'
    )
    (folder / "app.py").write_text(RESTART_APP)
    return folder


@pytest.fixture
def short_stall(monkeypatch):
    """The service (started after this) gives up on a lone-restarted cluster after 4 s."""
    monkeypatch.setenv("LABKIT_LONE_RESTART_STALL_S", "4")


@pytest.fixture
def trainer_stall(monkeypatch):
    """As `short_stall`, with time for TensorFlow to start and fail by itself first."""
    monkeypatch.setenv("LABKIT_LONE_RESTART_STALL_S", "150")


def tiny_job(
    worker_env: dict[str, str] | None, marker: str, *, chief_env=None
) -> aiplatform.CustomJob:
    """Chief + one worker (``worker_env`` None: the chief alone) running RESTART_APP."""

    def pool(env):
        env = {**(env or {}), "MARKER": marker}
        return {
            "replica_count": 1,
            "machine_spec": {"machine_type": "n1-standard-4"},
            "container_spec": {
                "image_uri": DEMO_IMAGE_URI,
                "args": ["--marker", marker],
                "env": [{"name": k, "value": v} for k, v in env.items()],
            },
        }

    return aiplatform.CustomJob(
        display_name="restart-test",
        worker_pool_specs=[pool(chief_env)]
        + ([pool(worker_env)] if worker_env is not None else []),
        labels={"lab": "cassava", "lab-run": "restart-test"},
        base_output_dir=f"gs://emu-test-bucket/restarts/{marker}",
    )


def left_over(marker: str) -> list[int]:
    """Processes whose command line carries this test's marker (the job's replicas)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if marker in " ".join(proc.info["cmdline"] or []):
            found.append(proc.info["pid"])
    return found


@pytest.mark.parametrize("flag", [False, True], ids=["default", "restart_job_on_worker_restart"])
def test_replica_sigkilled_again_and_again_fails_in_bounded_time(local_vertex, flag):
    marker = uuid.uuid4().hex
    job = tiny_job({"KILL_TASK": "worker:0"}, marker)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="Job failed"):
        job.run(restart_job_on_worker_restart=flag)
    elapsed = time.monotonic() - started
    assert elapsed < 120, f"took {elapsed:.0f} s"
    assert job.state == JobState.JOB_STATE_FAILED
    message = job.error.message
    assert "The replica workerpool1-0 (worker-0) was killed by SIGKILL" in message
    log = job_logs(job)["job"]
    if flag:
        assert "restartJobOnWorkerRestart); it is not restarted again" in message
        assert log.count("restarts every replica (job restart") == restarts.REPLICA_RESTART_LIMIT
        assert "restarting it alone" not in log
    else:
        per_attempt = restarts.REPLICA_RESTART_LIMIT
        assert log.count("restarting it alone, in place") == per_attempt * (
            1 + restarts.JOB_RETRY_LIMIT
        )
        assert log.count("retrying the whole job") == restarts.JOB_RETRY_LIMIT
        assert "restartJobOnWorkerRestart" in message  # the fix, named in the error
    time.sleep(0.5)
    assert left_over(marker) == []


def test_disable_retries_skips_job_retries_and_overrides_the_flag(local_vertex):
    marker = uuid.uuid4().hex
    job = tiny_job({"KILL_TASK": "worker:0"}, marker)
    with pytest.raises(RuntimeError, match="Job failed"):
        job.run(restart_job_on_worker_restart=True, disable_retries=True)
    log = job_logs(job)["job"]
    assert log.count("restarting it alone, in place") == restarts.REPLICA_RESTART_LIMIT
    assert "retrying the whole job" not in log
    assert "restarts every replica (job restart" not in log
    assert left_over(marker) == []


def test_lone_restart_that_stalls_the_cluster_fails_naming_the_flag(short_stall, local_vertex):
    """Without the flag a worker restarted alone cannot rejoin (here: it waits forever, as an
    MWMS peer would); the job ends in bounded time with the flag named as the fix."""
    marker = uuid.uuid4().hex
    job = tiny_job({"ONCE_TASK": "worker:0", "SLEEP": "300"}, marker)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="Job failed"):
        job.run()
    assert time.monotonic() - started < 60
    message = job.error.message
    assert "made no progress for 4 s after workerpool1-0 restarted alone" in message
    assert "scheduling.restartJobOnWorkerRestart=true" in message
    assert "restart_job_on_worker_restart=True" in message
    assert left_over(marker) == []


def test_single_replica_restarted_in_place_succeeds(local_vertex):
    """A one-replica job whose replica exits non-permanently once runs on, as on Vertex."""
    marker = uuid.uuid4().hex
    job = tiny_job(None, marker, chief_env={"ONCE_TASK": "chief:0", "SLEEP": "0"})
    job.run()
    assert job.state == JobState.JOB_STATE_SUCCEEDED
    assert "restarting it alone, in place (restart 1 of 5)" in job_logs(job)["job"]


def test_job_request_run_kwargs_set_the_flag_for_multi_worker_jobs(local_vertex):
    multi = specs.build_job(local_vertex.settings, workers=1)
    single = specs.build_job(local_vertex.settings, workers=0)
    assert multi.run_kwargs() == {"restart_job_on_worker_restart": True}
    assert single.run_kwargs() == {}


# --------------------------------------------------------------------- the real trainer


def trainer_request(local_vertex, sample, run: str) -> specs.JobRequest:
    args = small_args(
        sample.tfds_data_dir,
        local_vertex.state_dir,
        **{
            "--model-dir": None,
            "--checkpoint-dir": None,
            "--tensorboard-dir": None,
            "--image-size": 32,
            "--epochs": 1,
            "--steps-per-epoch": 4,
            "--validation-steps": 1,
            "--backup-every-steps": 1,
        },
    )
    return specs.build_job(
        local_vertex.settings,
        display_name=f"restart-{run}",
        args=args,
        env={"LAB_FAIL_AT_STEP": "2", "LAB_FAIL_TASK": "worker:0"},
        base_output_dir=f"gs://emu-test-bucket/restart-{run}",
        workers=1,
    )


@pytest.mark.slow
def test_trainer_with_the_flag_restarts_the_job_and_resumes_from_the_backup(
    local_vertex, sample_for_jobs, assert_gone
):
    request = trainer_request(local_vertex, sample_for_jobs, "flag")
    job = aiplatform.CustomJob(**request.sdk_kwargs())
    job.run(**request.run_kwargs())
    assert job.state == JobState.JOB_STATE_SUCCEEDED
    logs = job_logs(job)
    assert "restartJobOnWorkerRestart restarts every replica (job restart 1" in logs["job"]
    assert "FAULT INJECTED" in logs["worker-0"]
    assert "resumed from backup at epoch 1, step 3/4" in logs["chief-0"]


@pytest.mark.slow
def test_trainer_without_the_flag_fails_in_bounded_time_naming_it(
    trainer_stall, local_vertex, sample_for_jobs
):
    request = trainer_request(local_vertex, sample_for_jobs, "noflag")
    job = aiplatform.CustomJob(**request.sdk_kwargs())
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="Job failed"):
        job.run()
    elapsed = time.monotonic() - started
    print(f"without the flag: FAILED after {elapsed:.0f} s: {job.error.message[:600]}")
    assert "restartJobOnWorkerRestart" in job.error.message
    assert "restarting it alone, in place" in job_logs(job)["job"]


def test_the_sdk_takes_run_kwargs_in_both_routes():
    """`JobRequest.run_kwargs()` fits ``CustomJob.run`` and ``CustomContainerTrainingJob.run``."""
    import inspect

    for run in (aiplatform.CustomJob.run, aiplatform.CustomContainerTrainingJob.run):
        assert "restart_job_on_worker_restart" in inspect.signature(run).parameters


def test_training_pipeline_passes_the_flag_to_its_job(local_vertex):
    """The pipeline route: trainingTaskInputs.scheduling reaches the backing CustomJob, whose
    worker is then restarted with every replica."""
    from labkit.local.vertex import job_resource

    marker = uuid.uuid4().hex
    job = aiplatform.CustomContainerTrainingJob(
        display_name="restart-pipe", container_uri=DEMO_IMAGE_URI, labels={"lab": "cassava"}
    )
    job.run(
        args=["--marker", marker],
        replica_count=2,
        machine_type="n1-standard-4",
        base_output_dir=f"gs://emu-test-bucket/restarts/{marker}",
        environment_variables={"ONCE_TASK": "worker:0", "SLEEP": "0"},
        restart_job_on_worker_restart=True,
    )
    backing = job_resource(job)["trainingTaskMetadata"]["backingCustomJob"]
    assert job_resource(backing)["jobSpec"]["scheduling"]["restartJobOnWorkerRestart"] is True
    assert "restarts every replica (job restart 1" in job_logs(job)["job"]
    assert left_over(marker) == []
