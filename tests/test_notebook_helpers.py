"""The notebook helpers by subject (labkit.course.results, readiness, jobs, clusterviews, models):
what each records, and the one copy of each fact (a job's output folder, the pins)."""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

import pytest

from labkit.cloud.settings import Settings, quiet_tensorflow_logs
from labkit.course import clusterviews, jobs, pins, readiness, results

CLOUD = Settings(mode="cloud", project_id="my-project-123", run_id="r1")


def custom_job(prefix: str) -> SimpleNamespace:
    spec = SimpleNamespace(base_output_directory=SimpleNamespace(output_uri_prefix=prefix))
    return SimpleNamespace(
        gca_resource=SimpleNamespace(job_spec=spec), resource_name="projects/p/customJobs/1"
    )


def pipeline(inputs: dict) -> SimpleNamespace:
    return SimpleNamespace(
        gca_resource=SimpleNamespace(training_task_inputs=inputs),
        resource_name="projects/p/trainingPipelines/2",
    )


def test_a_jobs_output_folder_and_model_dir_come_from_its_resource():
    job = custom_job("gs://b/aiplatform-custom-job-1")
    assert jobs.job_output_uri(job) == "gs://b/aiplatform-custom-job-1/"
    assert jobs.job_model_dir(job, CLOUD) == "gs://b/aiplatform-custom-job-1/model"
    # a training pipeline's inputs, as the console writes them (camelCase) and the SDK (snake)
    console = pipeline({"baseOutputDirectory": {"outputUriPrefix": "gs://b/console/"}})
    sdk = pipeline({"base_output_directory": {"output_uri_prefix": "gs://b/sdk"}})
    assert jobs.job_output_uri(console) == "gs://b/console/"
    assert jobs.job_model_dir(sdk, CLOUD) == "gs://b/sdk/model"


def test_a_job_without_an_output_folder_names_the_field():
    assert jobs.job_output_uri(custom_job("")) is None
    with pytest.raises(ValueError, match="model output directory"):
        jobs.job_model_dir(pipeline({}), CLOUD)


def test_describe_pools_reads_rest_and_sdk_spellings():
    specs = [
        {"replicaCount": "1", "machineSpec": {"machineType": "n1-standard-4"}},
        {
            "replica_count": 2,
            "machine_spec": {
                "machine_type": "n1-standard-8",
                "accelerator_type": "NVIDIA_TESLA_T4",
                "accelerator_count": 1,
            },
            "container_spec": {"image_uri": "img"},
        },
    ]
    rows = jobs.describe_pools(specs).rows
    assert [(r["role"], r["machine"], r["gpus"]) for r in rows] == [
        ("chief", "n1-standard-4", "none"),
        ("worker", "n1-standard-8", "1 x NVIDIA_TESLA_T4"),
    ]


def test_assert_ready_records_only_when_everything_is_in_place(tmp_path, capsys):
    ok = [readiness.Check("bucket exists", True, "gs://b")]
    readiness.assert_ready(ok, CLOUD, tmp_path)
    assert results.load_results(tmp_path)["setup"] == {
        "mode": "cloud",
        "checks": [{"check": "bucket exists", "ok": True, "detail": "gs://b"}],
    }
    bad = [*ok, readiness.Check("dataset readable", False, "tfds cassava is not prepared")]
    with pytest.raises(RuntimeError, match=r"not ready: dataset readable \(tfds cassava"):
        readiness.assert_ready(bad, Settings(mode="local", project_id="local-project"), tmp_path)
    assert results.load_results(tmp_path)["setup"]["mode"] == "cloud"  # not overwritten


def test_package_versions_compare_with_the_one_pin_reader():
    rows = {r["package"]: r for r in readiness.package_versions(["tensorflow", "no-such-pkg"])}
    assert rows["tensorflow"]["pinned"] == pins.pinned_versions()["tensorflow"]
    assert rows["no-such-pkg"] == {
        "package": "no-such-pkg",
        "installed": "missing",
        "pinned": None,
        "matches": False,
    }
    assert rows["python"]["matches"] is True  # this interpreter is a supported one


def test_preemption_result_checks_then_records(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(
        clusterviews.faultdemo, "check_resumed", lambda m, p: calls.append("check") or "resumed"
    )
    monkeypatch.setattr(
        clusterviews.faultdemo, "outcome", lambda p, a, b, m: {"steps_run": m["steps_run"]}
    )
    line = clusterviews.preemption_result(None, None, None, {"steps_run": 48}, tmp_path)
    assert line == "resumed" and calls == ["check"]
    assert results.load_results(tmp_path)["preemption"] == {"steps_run": 48}

    def started_over(metrics, plan):
        raise AssertionError("the restart started over")

    monkeypatch.setattr(clusterviews.faultdemo, "check_resumed", started_over)
    with pytest.raises(AssertionError, match="started over"):
        clusterviews.preemption_result(None, None, None, {"steps_run": 64}, tmp_path / "x")
    assert not (tmp_path / "x" / results.RESULTS_FILE).exists()


def test_summarize_run_records_under_its_name(tmp_path):
    from labkit.course import models  # imports TensorFlow

    metrics = {"replicas": 2, "workers": 2, "final_metrics": {"val_accuracy": 0.5}}
    summary = models.summarize_run(metrics, tmp_path, "mwms", wall_time_s=12.0)
    assert summary["val_accuracy"] == 0.5 and summary["workers"] == 2
    assert summary["wall_time_s"] == 12.0
    assert results.load_results(tmp_path)["mwms"] == summary
    assert "workers" not in models.summarize_run({"replicas": 1})


def test_loading_settings_outside_a_kernel_imports_no_tensorflow(monkeypatch):
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    quiet_tensorflow_logs()
    assert "TF_CPP_MIN_LOG_LEVEL" not in os.environ
