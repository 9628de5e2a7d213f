"""TrainingPipelines in the local Vertex AI service, driven by the unchanged SDK (issue 15).

The console's "custom training (advanced)" and ``aiplatform.CustomContainerTrainingJob(...)
.run()`` make a TrainingPipeline whose own CustomJob runs the replicas. Here: the kit's image
trains on two replicas through the SDK and its model loads and predicts; a cancelled
pipeline ends PIPELINE_STATE_CANCELLED with no replica left; the REST surface (list with
filter and paging, delete as an operation, the refused fields) answers as Vertex's does.
"""

from __future__ import annotations

import re
import time

import pytest
from conftest import DEMO_IMAGE_URI
from google.cloud import aiplatform
from google.cloud.aiplatform.compat.types import pipeline_state as gca_pipeline_state
from test_emulator import http
from trainer_runs import small_args

from labkit.cloud import specs
from labkit.local.vertex import job_logs, job_output_dir, job_resource

PipelineState = gca_pipeline_state.PipelineState
LABELS = {"lab": "cassava", "lab-run": "pipe-test"}
PARENT = "/v1/projects/local-project/locations/us-central1"


def pipeline_body(name: str = "rest-pipe", sleep: str = "0", **extra) -> dict:
    pool = {
        "replica_count": 1,
        "machine_spec": {"machine_type": "n1-standard-4"},
        "container_spec": {"image_uri": DEMO_IMAGE_URI, "args": ["--sleep", sleep]},
    }
    return {
        "displayName": name,
        "trainingTaskDefinition": specs.CUSTOM_TASK_SCHEMA,
        "trainingTaskInputs": {
            "worker_pool_specs": [pool],
            "base_output_directory": {"output_uri_prefix": f"gs://emu-test-bucket/{name}"},
        },
        "labels": LABELS,
        **extra,
    }


def replica_pids(job) -> list[int]:
    """The pids the service recorded when it started the replicas (``started chief-0 (pid N)``)."""
    started = re.findall(r"\[emulator\] started (.*)$", job_logs(job)["job"], re.M)
    return [int(pid) for line in started for pid in re.findall(r"\(pid (\d+)\)", line)]


def wait_until(predicate, timeout: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
def test_custom_container_training_job_two_replicas_model_loads_and_predicts(
    local_vertex, sample_for_jobs, assert_gone
):
    """Done-when of issue 15: the SDK's CustomContainerTrainingJob, 2 replicas, the kit's image."""
    base = "gs://emu-test-bucket/pipeline-run"
    args = small_args(
        sample_for_jobs.tfds_data_dir,
        local_vertex.state_dir,
        **{
            "--model-dir": None,  # the trainer reads AIP_MODEL_DIR, set from base_output_dir
            "--checkpoint-dir": None,
            "--tensorboard-dir": None,
            "--epochs": 1,
            "--steps-per-epoch": 2,
            "--validation-steps": 1,
        },
    )
    job = aiplatform.CustomContainerTrainingJob(
        display_name="pipe-sdk", container_uri=local_vertex.settings.image_uri, labels=LABELS
    )
    model = job.run(
        args=args,
        replica_count=2,
        machine_type="n1-standard-4",
        base_output_dir=base,
    )
    assert model is None  # no modelToUpload: the model stays in the base output directory
    assert job.state == PipelineState.PIPELINE_STATE_SUCCEEDED
    pipeline = job_resource(job)
    assert pipeline["trainingTaskDefinition"] == specs.CUSTOM_TASK_SCHEMA
    backing = pipeline["trainingTaskMetadata"]["backingCustomJob"]
    custom_job = aiplatform.CustomJob.get(backing)
    assert custom_job.labels == LABELS
    assert job_resource(backing)["labkitLocal"]["trainingPipeline"] == job.resource_name
    logs = job_logs(job)
    assert {"chief-0", "worker-0"} <= set(logs)
    assert_gone(replica_pids(job))

    listed = aiplatform.CustomContainerTrainingJob.list(filter='labels.lab-run="pipe-test"')
    assert [j.resource_name for j in listed] == [job.resource_name]

    out = job_output_dir(job)
    assert out == local_vertex.gcs_root / "emu-test-bucket" / "pipeline-run"
    for folder in ("model", "checkpoints", "logs"):  # AIP_MODEL/CHECKPOINT/TENSORBOARD_LOG_DIR
        assert (out / folder).is_dir(), folder
    import tensorflow as tf

    loaded = tf.saved_model.load(str(out / "model" / "savedmodel"))
    predicted = loaded.signatures["serving_default"](images=tf.zeros([2, 40, 50, 3], tf.uint8))
    probabilities = predicted["probabilities"].numpy()
    assert probabilities.shape == (2, 5)
    assert abs(float(probabilities.sum(axis=1)[0]) - 1.0) < 1e-3


def test_pipeline_cancelled_mid_run_ends_cancelled_with_no_process_left(local_vertex, assert_gone):
    job = aiplatform.CustomContainerTrainingJob(
        display_name="pipe-cancel", container_uri=DEMO_IMAGE_URI, labels=LABELS
    )
    job.run(
        args=["--sleep", "120"],
        replica_count=2,
        machine_type="n1-standard-4",
        base_output_dir="gs://emu-test-bucket/pipe-cancel",
        sync=False,
    )
    job.wait_for_resource_creation()
    pids = wait_until(lambda: len(replica_pids(job)) == 2 and replica_pids(job), what="replicas")
    assert job.state == PipelineState.PIPELINE_STATE_RUNNING
    job.cancel()
    wait_until(
        lambda: job.state == PipelineState.PIPELINE_STATE_CANCELLED, what="PIPELINE_STATE_CANCELLED"
    )
    assert_gone(pids)
    backing = job_resource(job)["trainingTaskMetadata"]["backingCustomJob"]
    assert job_resource(backing)["state"] == "JOB_STATE_CANCELLED"
    assert not list((local_vertex.state_dir / "jobs").glob("*/processes.json"))
    with pytest.raises(RuntimeError, match=r"(?s)Training failed with.*CANCELED"):
        job.wait()


def test_pipeline_rest_surface_list_filter_paging_delete_and_refusals(local_vertex):
    for name in ("pipe-a", "pipe-b", "pipe-c"):
        status, created = http(
            local_vertex, "POST", f"{PARENT}/trainingPipelines", pipeline_body(name)
        )
        assert status == 200, created
        assert created["state"] == "PIPELINE_STATE_PENDING"
    names = []
    token = ""
    while True:
        status, page = http(
            local_vertex,
            "GET",
            f"{PARENT}/trainingPipelines?pageSize=2&filter=labels.lab%3D%22cassava%22"
            + (f"&pageToken={token}" if token else "")
            + "&%24alt=json%3Benum-encoding%3Dint",
        )
        assert status == 200
        names += [p["displayName"] for p in page["trainingPipelines"]]
        token = page.get("nextPageToken")
        if not token:
            break
    assert sorted(names) == ["pipe-a", "pipe-b", "pipe-c"]

    last = page["trainingPipelines"][-1]
    wait_until(
        lambda: (
            http(local_vertex, "GET", f"/v1/{last['name']}")[1]["state"]
            == "PIPELINE_STATE_SUCCEEDED"
        ),
        what="the pipeline to succeed",
    )
    status, jobs = http(local_vertex, "GET", f"{PARENT}/customJobs")
    assert len(jobs["customJobs"]) == 3  # each pipeline's own CustomJob, listed with the others
    status, operation = http(local_vertex, "DELETE", f"/v1/{last['name']}")
    assert status == 200 and operation["done"] is True
    assert http(local_vertex, "GET", f"/v1/{operation['name']}")[0] == 200
    assert http(local_vertex, "GET", f"/v1/{last['name']}")[0] == 404

    status, answer = http(
        local_vertex,
        "POST",
        f"{PARENT}/trainingPipelines",
        pipeline_body(modelToUpload={"displayName": "m", "containerSpec": {"imageUri": "x"}}),
    )
    assert (status, answer["error"]["status"]) == (501, "UNIMPLEMENTED")
    assert "modelToUpload" in answer["error"]["message"]
    status, answer = http(
        local_vertex,
        "POST",
        f"{PARENT}/trainingPipelines",
        pipeline_body(trainingTaskDefinition="gs://google-cloud-aiplatform/schema/x.yaml"),
    )
    assert (status, answer["error"]["status"]) == (501, "UNIMPLEMENTED")
    bad = pipeline_body()
    bad["trainingTaskInputs"]["worker_pool_specs"][0]["replica_count"] = 2
    status, answer = http(local_vertex, "POST", f"{PARENT}/trainingPipelines", bad)
    assert status == 400
    (violation,) = answer["error"]["details"][0]["fieldViolations"]
    assert violation["field"] == "training_task_inputs.worker_pool_specs[0].replica_count"
    assert "Fix:" in violation["description"]
