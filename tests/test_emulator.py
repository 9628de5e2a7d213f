"""The local Vertex AI service, driven by the real google-cloud-aiplatform SDK (no patching).

Replicas here run a tiny script from a temporary build context (`demo_build_context`), so
each job takes seconds; the trainer-backed job runs in notebook 04 (tests/test_notebooks.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import DEMO_IMAGE_URI
from google.api_core import exceptions as api_exceptions
from google.cloud import aiplatform
from google.cloud.aiplatform.compat.types import job_state as gca_job_state

from labkit.cloud.paths import REPO_ROOT
from labkit.local.vertex import job_logs, job_output_dir
from labkit.local.vertex_env import free_ports

JobState = gca_job_state.JobState
MACHINE = {"machine_type": "n1-standard-4"}


def pool(replicas: int = 1, *, args=None, env=None, image: str = DEMO_IMAGE_URI) -> dict:
    spec: dict = {"image_uri": image, "args": list(args or ["--sleep", "0"])}
    if env:
        spec["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {"replica_count": replicas, "machine_spec": dict(MACHINE), "container_spec": spec}


def make_job(pools: list[dict], name: str = "emu-test", labels: dict | None = None):
    return aiplatform.CustomJob(
        display_name=name,
        worker_pool_specs=pools,
        labels=labels or {"lab": "cassava", "lab-run": "test"},
    )


def replica_pids(job) -> list[int]:
    logs = job_logs(job)
    return [int(m) for m in re.findall(r"^\S+Z \[[\w-]+\] task=\S+ pid=(\d+)", logs["job"], re.M)]


def wait_for_state(job, states, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if job.state in states:
            return job.state
        time.sleep(0.2)
    raise AssertionError(f"job stayed {job.state}, wanted one of {states}")


def http(local_vertex, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{local_vertex.port}{path}",
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json", **local_vertex.auth()},
        method=method,
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.mark.slow
def test_two_pool_job_gets_the_vertex_environment(local_vertex, assert_gone):
    job = make_job(
        [
            pool(
                1, args=["--sleep", "0", "--out", "gs://emu-test-bucket/extra"], env={"MODE": "x"}
            ),
            pool(2),
        ]
    )
    job.run()
    assert job.state == JobState.JOB_STATE_SUCCEEDED
    assert job.start_time is not None and job.end_time >= job.start_time

    logs = job_logs(job)
    assert set(logs) == {"job", "chief-0", "worker-0", "worker-1"}
    configs = {}
    for role in ("chief-0", "worker-0", "worker-1"):
        text = logs[role]
        task_type, index = role.split("-")
        assert f"task={task_type}:{index}" in text
        assert "greeting=hello from the image" in text  # the Dockerfile's ENV
        configs[role] = json.loads(re.search(r"^tf_config=(.*)$", text, re.M).group(1))
    chief = configs["chief-0"]
    assert len(chief["cluster"]["chief"]) == 1 and len(chief["cluster"]["worker"]) == 2
    assert chief["task"] == {"type": "chief", "index": 0} and chief["environment"] == "cloud"
    assert chief["job"]["worker_pool_specs"][1]["replica_count"] == "2"
    assert all(c["cluster"] == chief["cluster"] for c in configs.values())
    spec = json.loads(re.search(r"^cluster_spec=(.*)$", logs["worker-1"], re.M).group(1))
    assert spec["task"] == {"type": "workerpool1", "index": 1}
    assert set(spec["cluster"]) == {"workerpool0", "workerpool1"}

    # gs:// -> the local bucket folder, in AIP_* and in args; the job lists both.
    out = job_output_dir(job)
    assert out.is_relative_to(local_vertex.gcs_root / "emu-test-bucket")
    assert job.job_spec.base_output_directory.output_uri_prefix.startswith("gs://emu-test-bucket/")
    assert f"model_dir={out}/model/" in logs["chief-0"]
    argv = json.loads(re.search(r"^argv=(.*)$", logs["chief-0"], re.M).group(1))
    assert argv == ["--sleep", "0", "--out", str(local_vertex.gcs_root / "emu-test-bucket/extra")]
    assert re.search(r"^cwd=.*/rootfs/workerpool0/app$", logs["chief-0"], re.M)
    assert "state JOB_STATE_RUNNING (attempt 1)" in logs["job"]
    assert "state JOB_STATE_SUCCEEDED" in logs["job"]
    assert_gone(replica_pids(job))


@pytest.mark.slow
def test_permanent_replica_error_fails_the_job_and_names_it(local_vertex, assert_gone):
    """Exit status 1 (an error in the training code) is permanent: no restart, the job fails."""
    job = make_job(
        [
            pool(1, args=["--sleep", "120"]),
            pool(1, args=["--sleep", "120"], env={"FAIL_TASK": "worker:0", "FAIL_CODE": "1"}),
        ]
    )
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="Job failed") as failure:
        job.run()
    elapsed = time.monotonic() - started
    assert elapsed < 20, f"a failure took {elapsed:.1f} s to surface"
    message = job.error.message
    assert "The replica workerpool1-0 (worker-0) exited with a non-zero status of 1" in message
    assert message.rstrip().endswith("preempted: exiting with 1")
    assert "workerpool1-0" in str(failure.value)
    assert job.state == JobState.JOB_STATE_FAILED
    logs = job_logs(job)
    assert "chief-0 was killed by SIGTERM (stopped by the service)" in logs["job"]
    assert "restarting it alone" not in logs["job"]
    assert_gone(replica_pids(job))


@pytest.mark.slow
def test_restart_job_on_worker_restart_reruns_the_cluster(local_vertex, assert_gone):
    worker_env = {"FAIL_TASK": "worker:0", "FAIL_ONCE": "1"}
    job = make_job([pool(1, args=["--sleep", "1"]), pool(1, args=["--sleep", "1"], env=worker_env)])
    job.run(restart_job_on_worker_restart=True)
    assert job.state == JobState.JOB_STATE_SUCCEEDED
    logs = job_logs(job)
    assert (
        "restartJobOnWorkerRestart restarts every replica (job restart 1 of at most 5)"
        in (logs["job"])
    )
    assert "attempt 2: worker-0" in logs["worker-0"]
    assert logs["worker-0"].count("preempted: exiting with 3") == 1
    assert logs["chief-0"].count("finished") == 1  # stopped in attempt 1, finished in 2
    assert_gone(replica_pids(job))


@pytest.mark.slow
def test_cancel_a_running_job(local_vertex, assert_gone):
    job = make_job([pool(1, args=["--sleep", "300"]), pool(1, args=["--sleep", "300"])])
    job.run(sync=False)
    job.wait_for_resource_creation()
    wait_for_state(job, {JobState.JOB_STATE_RUNNING})
    deadline = time.monotonic() + 30
    while len(replica_pids(job)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    pids = replica_pids(job)
    job.cancel()
    assert wait_for_state(job, {JobState.JOB_STATE_CANCELLED}) == JobState.JOB_STATE_CANCELLED
    with pytest.raises(RuntimeError, match="CANCELED"):
        job.wait()
    assert_gone(pids)
    with pytest.raises(api_exceptions.GoogleAPICallError, match="terminal state"):
        job.cancel()


@pytest.mark.slow
def test_scheduling_timeout_stops_the_job(local_vertex, assert_gone):
    job = make_job([pool(1, args=["--sleep", "300"])])
    with pytest.raises(RuntimeError, match="scheduling.timeout of 2s"):
        job.run(timeout=2)
    assert job.state == JobState.JOB_STATE_FAILED
    assert_gone(replica_pids(job))


@pytest.mark.parametrize(
    ("pools", "field", "words"),
    [
        ([pool(2)], "worker_pool_specs[0].replica_count", "exactly 1 replica"),
        (
            [pool(1), {"replica_count": 1, "machine_spec": dict(MACHINE)}],
            "worker_pool_specs[1].container_spec",
            "no python_package_spec",
        ),
        (
            [{"replica_count": 1, "container_spec": {"image_uri": DEMO_IMAGE_URI}}],
            "worker_pool_specs[0].machine_spec.machine_type",
            "is missing",
        ),
        (
            [
                {
                    **pool(1),
                    "machine_spec": {"machine_type": "n1-standard-4", "accelerator_count": 1},
                }
            ],
            "worker_pool_specs[0].machine_spec.accelerator_count",
            "no accelerator_type is set",
        ),
        ([{}, pool(1)], "worker_pool_specs[0]", "pool 0 is the chief"),
    ],
)
def test_invalid_jobs_are_rejected_naming_the_field(local_vertex, pools, field, words):
    with pytest.raises(api_exceptions.BadRequest) as err:
        make_job(pools).run()
    assert field in err.value.message
    assert words in err.value.message


def test_empty_placeholder_pools_are_accepted(local_vertex):
    job = make_job([pool(1), {}, {}, pool(1)])  # chief + an evaluator, pools 1-2 unused
    job.run(sync=False)
    job.wait_for_resource_creation()
    job.wait()
    logs = job_logs(job)
    assert "task=evaluator:0" in logs["evaluator-0"]
    tf_config = json.loads(re.search(r"^tf_config=(.*)$", logs["evaluator-0"], re.M).group(1))
    assert tf_config["cluster"] == {"chief": tf_config["cluster"]["chief"]}


def test_missing_pools_and_display_name_over_rest(local_vertex):
    parent = "/v1/projects/local-project/locations/us-central1/customJobs"
    status, answer = http(local_vertex, "POST", parent, {"displayName": "x", "jobSpec": {}})
    assert status == 400 and answer["error"]["status"] == "INVALID_ARGUMENT"
    assert "job_spec.worker_pool_specs" in answer["error"]["message"]
    violations = answer["error"]["details"][0]["fieldViolations"]
    assert violations[0]["field"] == "job_spec.worker_pool_specs"

    body = {"jobSpec": {"workerPoolSpecs": [pool(1)]}}
    status, answer = http(local_vertex, "POST", parent, body)
    assert status == 400 and "display_name" in answer["error"]["message"]


def test_unknown_image_fails_with_how_to_register(local_vertex):
    job = make_job([pool(1, image="europe-docker.pkg.dev/p/r/unknown:1")])
    with pytest.raises(RuntimeError, match="not registered"):
        job.run()
    assert "python -m labkit emulator register" in job.error.message


@pytest.mark.slow
def test_list_by_label_and_state_then_delete(local_vertex):
    mine = make_job([pool(1)], name="mine", labels={"lab": "cassava", "lab-run": "r1"})
    other = make_job([pool(1)], name="other", labels={"team": "elsewhere"})
    mine.run()
    other.run()
    listed = aiplatform.CustomJob.list(filter='labels.lab="cassava"')
    assert [j.display_name for j in listed] == ["mine"]
    succeeded = aiplatform.CustomJob.list(filter='state="JOB_STATE_SUCCEEDED" AND labels.team:*')
    assert [j.display_name for j in succeeded] == ["other"]
    assert {j.display_name for j in aiplatform.CustomJob.list()} == {"mine", "other"}
    fetched = aiplatform.CustomJob.get(mine.resource_name)
    assert fetched.labels["lab-run"] == "r1"

    mine.delete()
    assert [j.display_name for j in aiplatform.CustomJob.list()] == ["other"]
    with pytest.raises(api_exceptions.NotFound):
        aiplatform.CustomJob.get(mine.resource_name)
    status, answer = http(local_vertex, "GET", f"/v1/{mine.resource_name}")
    assert status == 404 and answer["error"]["status"] == "NOT_FOUND"


@pytest.mark.slow
def test_delete_of_a_running_job_ends_its_processes(local_vertex, assert_gone):
    job = make_job([pool(1, args=["--sleep", "300"])])
    job.run(sync=False)
    job.wait_for_resource_creation()
    deadline = time.monotonic() + 30
    while not replica_pids(job) and time.monotonic() < deadline:
        time.sleep(0.2)
    pids = replica_pids(job)
    # A separate handle: `job.delete()` would first wait for its own run(sync=False) to end.
    aiplatform.CustomJob.get(job.resource_name).delete()
    assert_gone(pids)
    assert aiplatform.CustomJob.list() == []


@pytest.mark.slow
def test_restarted_service_still_knows_its_jobs(local_vertex, assert_gone):
    done = make_job([pool(1)], name="done")
    done.run()
    running = make_job([pool(1, args=["--sleep", "300"])], name="running")
    running.run(sync=False)
    running.wait_for_resource_creation()
    deadline = time.monotonic() + 30
    while not replica_pids(running) and time.monotonic() < deadline:
        time.sleep(0.2)
    pids = replica_pids(running)
    assert_gone(local_vertex.stop() + pids)  # stop ends the service and the job's replicas

    local_vertex.start()
    jobs = {j.display_name: j for j in aiplatform.CustomJob.list(filter='labels.lab="cassava"')}
    assert jobs["done"].state == JobState.JOB_STATE_SUCCEEDED
    assert jobs["running"].state == JobState.JOB_STATE_FAILED
    assert "service was stopped" in jobs["running"].error.message

    flaky = make_job(
        [pool(1, args=["--sleep", "0"], env={"FAIL_TASK": "chief:0", "FAIL_ONCE": "1"})]
    )
    flaky.run()
    assert flaky.state == JobState.JOB_STATE_SUCCEEDED  # exit 3: restarted in place, as Vertex
    assert "restarting it alone, in place (restart 1 of 5)" in job_logs(flaky)["job"]


def test_python_package_spec_runs_the_module(local_vertex):
    package = local_vertex.gcs_root / "emu-test-bucket" / "pkgs" / "hello_pkg"
    (package / "hello_task").mkdir(parents=True)
    (package / "hello_task" / "__init__.py").write_text("")
    (package / "hello_task" / "main.py").write_text(
        "import os, sys\nprint('package says', sys.argv[1:], os.environ['AIP_MODEL_DIR'])\n"
    )
    job = aiplatform.CustomJob(
        display_name="package-job",
        worker_pool_specs=[
            {
                "replica_count": 1,
                "machine_spec": dict(MACHINE),
                "python_package_spec": {
                    "executor_image_uri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest",
                    "package_uris": ["gs://emu-test-bucket/pkgs/hello_pkg"],
                    "python_module": "hello_task.main",
                    "args": ["--data", "gs://emu-test-bucket/data"],
                },
            }
        ],
    )
    job.run(sync=False)
    job.wait_for_resource_creation()
    job.wait()
    text = job_logs(job)["chief-0"]
    assert f"package says ['--data', '{local_vertex.gcs_root}/emu-test-bucket/data']" in text


def test_http_surface_errors_and_operations(local_vertex):
    status, answer = http(local_vertex, "GET", "/v1/projects/p/locations/l/customJobs/123")
    assert (status, answer["error"]["status"]) == (404, "NOT_FOUND")
    status, answer = http(
        local_vertex, "GET", "/v1/projects/p/locations/l/hyperparameterTuningJobs"
    )
    assert (status, answer["error"]["status"]) == (404, "NOT_FOUND")
    status, answer = http(local_vertex, "PATCH", "/v1/projects/p/locations/l/customJobs/1")
    assert (status, answer["error"]["status"]) == (501, "UNIMPLEMENTED")
    status, answer = http(
        local_vertex, "GET", "/v1/projects/p/locations/l/customJobs?filter=colour%3D%22red%22"
    )
    assert status == 400 and "Unsupported filter field 'colour'" in answer["error"]["message"]

    job = make_job([pool(1)])
    job.run(sync=False)
    job.wait_for_resource_creation()
    job.wait()
    status, operation = http(local_vertex, "DELETE", f"/v1/{job.resource_name}")
    assert status == 200 and operation["done"] is True
    status, polled = http(local_vertex, "GET", f"/v1/{operation['name']}")
    assert status == 200 and polled["name"] == operation["name"]

    status, info = http(local_vertex, "GET", "/labkit/v1/info")
    assert info["port"] == local_vertex.port
    assert Path(info["gcsRoot"]) == local_vertex.gcs_root.resolve()
    assert local_vertex.settings.image_uri in info["images"]


def run_emulator_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "labkit", "emulator", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
def test_cli_start_status_register_stop(tmp_path, demo_build_context, assert_gone):
    state, port = str(tmp_path / "state"), str(free_ports(1)[0])
    started = run_emulator_cli("start", "--state", state, "--port", port)
    assert started.returncode == 0, started.stderr
    assert f"running: http://127.0.0.1:{port}" in started.stdout
    pid = int(re.search(r"pid (\d+)", started.stdout).group(1))
    again = run_emulator_cli("start", "--state", state, "--port", port)
    assert f"pid {pid}," in again.stdout  # idempotent: the same service

    registered = run_emulator_cli("register", f"demo/cli:1={demo_build_context}", "--state", state)
    assert registered.returncode == 0, registered.stderr
    status = run_emulator_cli("status", "--state", state)
    assert status.returncode == 0
    assert f"image demo/cli:1 -> {demo_build_context}" in status.stdout
    assert f"gcs {Path(state) / 'gcs'}" in status.stdout

    missing = "projects/p/locations/l/customJobs/42"
    logs = run_emulator_cli("logs", missing, "--state", state)
    assert logs.returncode == 1 and f"CustomJob {missing} not found" in logs.stderr

    busy = run_emulator_cli("serve", "--state", str(tmp_path / "other"), "--port", port)
    assert busy.returncode == 2 and "pick a free port with --port" in busy.stderr

    stopped = run_emulator_cli("stop", "--state", state)
    assert stopped.stdout.strip() == "stopped"
    assert_gone([pid])
    after = run_emulator_cli("status", "--state", state)
    assert after.returncode == 3 and "not running" in after.stdout
    assert run_emulator_cli("stop", "--state", state).stdout.strip() == "was not running"


@pytest.mark.slow
def test_stop_kills_replicas_even_when_the_service_died(local_vertex, assert_gone):
    from labkit.local.emulator import control

    job = make_job([pool(1, args=["--sleep", "300"]), pool(1, args=["--sleep", "300"])])
    job.run(sync=False)
    job.wait_for_resource_creation()
    deadline = time.monotonic() + 30
    while len(replica_pids(job)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    pids = replica_pids(job)
    server_pid = control.status(local_vertex.state_dir).pid
    os.kill(server_pid, signal.SIGKILL)  # no chance to clean up
    assert_gone([server_pid])
    assert control.stop(local_vertex.state_dir) is False  # nothing answered, yet...
    assert_gone(pids)  # ...the recorded replica groups are killed
    local_vertex.start()
    recovered = aiplatform.CustomJob.get(job.resource_name)
    assert recovered.state == JobState.JOB_STATE_FAILED
    assert "stopped while this job ran" in recovered.error.message


def test_an_entrypoint_that_cannot_start_fails_the_job(local_vertex, tmp_path):
    from labkit.local.vertex import register_image

    context = tmp_path / "broken"
    context.mkdir()
    (context / "Dockerfile").write_text('FROM scratch\nENTRYPOINT ["/opt/missing/bin/serve"]\n')
    register_image("broken/image:1", context, local_vertex.settings)
    job = make_job([pool(1, image="broken/image:1")])
    with pytest.raises(RuntimeError, match="cannot start replica chief-0"):
        job.run()


@pytest.mark.slow
def test_default_service_maps_gs_into_the_kits_bucket_root(tmp_path, monkeypatch, assert_gone):
    """Without --state, state is LAB_HOME/vertex and gs:// maps to LAB_HOME/gcs (cleanup's view)."""
    from labkit.cloud import paths
    from labkit.local.emulator import control

    monkeypatch.setenv("CASSAVA_LAB_HOME", str(tmp_path / "home"))
    status = control.start(port=free_ports(1)[0])
    try:
        assert status.state_dir == paths.emulator_state_dir()
        assert status.gcs_root == str(paths.local_gcs_root())
        assert (paths.emulator_state_dir() / control.PID_FILE).is_file()
    finally:
        assert control.stop() is True
    assert_gone([status.pid])
