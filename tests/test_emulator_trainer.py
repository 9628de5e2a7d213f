"""The kit's own image (the repository's Dockerfile) on the sample, through the real SDK.

Each job is a chief and one worker training ResNet50 at 32x32 for a few steps, so a job
takes about a minute on 2 cores. The times printed here are the ones the docs quote.
"""

from __future__ import annotations

import re
import time

import pytest
from google.cloud import aiplatform
from google.cloud.aiplatform.compat.types import job_state as gca_job_state

from labkit.vertex import job_logs, job_output_dir

JobState = gca_job_state.JobState
# Slow: each test trains; the generous timeout is for a loaded 2-core CI machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def trainer_pools(image_uri: str, tfds_dir, epochs: int, env: dict[str, str] | None = None):
    args = [
        "--data", "tfds:cassava", "--data-dir", str(tfds_dir),
        "--image-size", "32", "--batch-size", "8", "--epochs", str(epochs),
        "--steps-per-epoch", "3", "--validation-steps", "1", "--weights", "none",
    ]  # fmt: skip
    container = {"image_uri": image_uri, "args": args}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    machine = {"machine_type": "n1-standard-4"}
    return [
        {"replica_count": 1, "machine_spec": machine, "container_spec": container},
        {"replica_count": 1, "machine_spec": machine, "container_spec": container},
    ]


def test_kit_image_trains_on_the_sample(local_vertex, sample_for_jobs):
    tf = pytest.importorskip("tensorflow")
    job = aiplatform.CustomJob(
        display_name="cassava-2-workers",
        worker_pool_specs=trainer_pools(
            local_vertex.settings.image_uri, sample_for_jobs.tfds_data_dir, epochs=2
        ),
        labels=local_vertex.settings.labels,
    )
    started = time.monotonic()
    job.run()
    print(
        f"\n[timing] 2-worker job on the sample: run() -> SUCCEEDED in {time.monotonic() - started:.1f} s"
    )
    assert job.state == JobState.JOB_STATE_SUCCEEDED

    logs = job_logs(job)
    assert "[trainer] task=chief:0" in logs["chief-0"]
    assert "[trainer] task=worker:0" in logs["worker-0"]
    assert re.search(r"done task=chief:0 replicas=2", logs["chief-0"])
    out = job_output_dir(job)
    saved = out / "model" / "savedmodel"
    loaded = tf.saved_model.load(str(saved))
    predicted = loaded.signatures["serving_default"](images=tf.zeros([3, 48, 64, 3], tf.uint8))
    assert predicted["probabilities"].shape == (3, 5)
    assert (out / "model" / "metrics.json").is_file()
    assert list((out / "logs").rglob("events.out.tfevents*")), "no TensorBoard events"


def test_preempted_worker_resumes_after_a_restart(local_vertex, sample_for_jobs, assert_gone):
    fault = {"LAB_FAIL_AFTER_EPOCH": "1", "LAB_FAIL_TASK": "worker:0"}
    job = aiplatform.CustomJob(
        display_name="cassava-preempted",
        worker_pool_specs=trainer_pools(
            local_vertex.settings.image_uri, sample_for_jobs.tfds_data_dir, epochs=3, env=fault
        ),
        labels=local_vertex.settings.labels,
    )
    started = time.monotonic()
    job.run(restart_job_on_worker_restart=True)
    print(f"\n[timing] preempted job with one restart: {time.monotonic() - started:.1f} s")
    assert job.state == JobState.JOB_STATE_SUCCEEDED

    logs = job_logs(job)
    worker = logs["worker-0"]
    first, second = worker.split("attempt 2 of 4")
    assert "FAULT INJECTED: exiting after epoch 1" in first
    assert "resumed from backup at epoch 1" in second
    assert "epoch 1/3" not in second  # the second attempt starts at epoch 2
    assert "epoch 2/3" in second and "epoch 3/3" in second
    assert "restarting the whole cluster (restart 1 of 3)" in logs["job"]
    assert (job_output_dir(job) / "model" / "savedmodel").is_dir()
    pids = [int(p) for p in re.findall(r"[a-z]+-\d+ \(pid (\d+)\)", logs["job"])]
    assert len(pids) == 4  # two replicas, two attempts
    assert_gone(pids)
    from labkit.emulator import control

    assert not list(control.resolve_state_dir(local_vertex.state_dir).glob("jobs/*/processes.json"))


def test_preempted_worker_without_restarts_fails_the_job(local_vertex, sample_for_jobs):
    fault = {"LAB_FAIL_AFTER_EPOCH": "1", "LAB_FAIL_TASK": "worker:0"}
    job = aiplatform.CustomJob(
        display_name="cassava-no-restart",
        worker_pool_specs=trainer_pools(
            local_vertex.settings.image_uri, sample_for_jobs.tfds_data_dir, epochs=3, env=fault
        ),
        labels=local_vertex.settings.labels,
    )
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="workerpool1-0"):
        job.run()
    elapsed = time.monotonic() - started
    print(f"\n[timing] failure after epoch 1 surfaced through run() in {elapsed:.1f} s")
    assert elapsed < 300
    message = job.error.message
    assert "The replica workerpool1-0 (worker-0) exited with a non-zero status of 3" in message
    assert "FAULT INJECTED" in message  # the tail of the worker's log
    events = job_logs(job)["job"]
    failed_at = re.search(r"attempt 1: worker-0 exited with status 3", events)
    # The chief is stopped too (TensorFlow swallows SIGTERM, so after the grace period by SIGKILL).
    assert failed_at and re.search(r"chief-0 was killed by SIG(TERM|KILL)", events)
