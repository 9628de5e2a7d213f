"""Cleanup against the local services: the real Vertex AI SDK talking to the local Vertex AI
service, google-cloud-storage talking to gcp-storage-emulator. It deletes exactly what the
kit created, in order, leaves foreign buckets and objects alone, and a second run is a no-op."""

from __future__ import annotations

import subprocess
import time

import pytest

from labkit.cloud import cleanup, paths, storage
from labkit.cloud.settings import Settings

pytest_plugins = ["fixtures_storage"]  # kit_home: a LAB_HOME of this test's own

WRITER_IMAGE = "us-central1-docker.pkg.dev/local-project/cleanup-test/writer:1"
WRITER_DOCKERFILE = """\
FROM python:3.11-slim
WORKDIR /app
COPY app.py /app/app.py
ENTRYPOINT ["python", "app.py"]
"""
# Writes model files where Vertex says (AIP_MODEL_DIR), then sleeps as long as asked.
WRITER_APP = """\
import os, sys, time
model_dir = os.environ["AIP_MODEL_DIR"]
os.makedirs(os.path.join(model_dir, "savedmodel"), exist_ok=True)
with open(os.path.join(model_dir, "savedmodel", "saved_model.pb"), "wb") as f:
    f.write(b"m" * 2048)
with open(os.path.join(model_dir, "metrics.json"), "w") as f:
    f.write('{"accuracy": 0.5}')
print("wrote", model_dir, flush=True)
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""
FOREIGN = "foreign-bucket"


def writer_pool(sleep: int) -> list[dict]:
    return [
        {
            "replica_count": 1,
            "machine_spec": {"machine_type": "n1-standard-4"},
            "container_spec": {"image_uri": WRITER_IMAGE, "args": [str(sleep)]},
        }
    ]


def wait_for_state(job, states: set[str], timeout: float = 60.0) -> str:
    from google.cloud import aiplatform

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = aiplatform.CustomJob.get(job.resource_name).state.name
        if state in states:
            return state
        time.sleep(0.3)
    raise AssertionError(f"{job.resource_name} never reached {states}")


def start_default_service(settings: Settings, images: dict, log_path) -> object:
    """The local Vertex AI service as `python -m labkit emulator serve` runs it by default:
    state in LAB_HOME/vertex, job outputs (gs:// paths) in the kit's local bucket root."""
    import sys

    from labkit.local.emulator import control

    argv = [sys.executable, "-m", "labkit", "emulator", "serve", "--quiet"]
    argv += ["--port", str(settings.emulator_port)]
    argv += [f"--image={uri}={context}" for uri, context in images.items()]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv, cwd=paths.REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = control.status()
        if status.running and status.pid == proc.pid:
            assert status.gcs_root == str(paths.local_gcs_root()), status
            return status
        assert proc.poll() is None, log_path.read_text()
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"the local Vertex AI service did not start: {log_path.read_text()}")


@pytest.fixture
def kit_world(kit_home, tmp_path, monkeypatch, assert_gone):
    """Kit resources (labelled jobs, a labelled bucket with model files, sample data) next to
    foreign ones (a bucket the kit did not create, with objects of its own)."""
    from google.cloud import aiplatform

    from labkit.local import vertex, vertex_env
    from labkit.local.emulator import control

    monkeypatch.delenv(storage.EMULATOR_ENV, raising=False)
    context = tmp_path / "writer-image"
    context.mkdir()
    (context / "Dockerfile").write_text(WRITER_DOCKERFILE)
    (context / "app.py").write_text(WRITER_APP)
    settings = Settings(
        mode="local",
        project_id="local-project",
        run_id="run-a",
        emulator_port=vertex_env.free_ports(1)[0],
    )
    status = start_default_service(settings, {WRITER_IMAGE: context}, tmp_path / "service.log")
    try:
        vertex.init_vertex(settings, ensure_service=False)
        client = storage.storage_client(settings)
        storage.ensure_kit_bucket(
            client, settings.bucket, location=settings.region, labels=settings.labels
        )
        foreign = client.create_bucket(FOREIGN)
        foreign.blob("theirs/data.csv").upload_from_string("a,b\n1,2\n")
        foreign.blob("kit-out-not-mine/keep.txt").upload_from_string("not the kit's")

        def job(name: str, sleep: int, **kwargs) -> aiplatform.CustomJob:
            return aiplatform.CustomJob(
                display_name=name,
                worker_pool_specs=writer_pool(sleep),
                labels=settings.labels,
                staging_bucket=settings.bucket_uri,
                **kwargs,
            )

        finished = job("kit-model", 0)
        finished.run(sync=True)
        in_foreign = job(
            "kit-output-in-foreign-bucket", 0, base_output_dir=f"gs://{FOREIGN}/kit-out"
        )
        in_foreign.run(sync=True)
        running = job("kit-still-running", 120)
        running.submit()
        wait_for_state(running, {"JOB_STATE_RUNNING"})

        sample_file = paths.sample_root() / "raw" / "cassavaleafdata" / "train" / "cbb" / "x.jpg"
        sample_file.parent.mkdir(parents=True)
        sample_file.write_bytes(b"\xff\xd8jpeg")
        yield {
            "settings": settings,
            "client": client,
            "jobs": [finished, in_foreign, running],
            "service_pid": status.pid,
        }
    finally:
        control.stop()  # in case the test failed before cleanup stopped it
        storage.stop_local_storage()
    assert_gone([status.pid])


@pytest.mark.slow
def test_cleanup_lists_then_deletes_only_the_kits_resources_and_is_idempotent(kit_world):
    settings, client = kit_world["settings"], kit_world["client"]
    running = kit_world["jobs"][2]
    kit_bucket_dir = paths.local_gcs_root() / settings.bucket
    model_files = [p for p in kit_bucket_dir.rglob("*") if p.is_file()]
    assert {p.name for p in model_files} == {"saved_model.pb", "metrics.json"}
    assert (paths.local_gcs_root() / FOREIGN / "kit-out" / "model" / "metrics.json").is_file()

    # ---- dry run: exactly the kit's resources, in order; nothing deleted
    lines: list[str] = []
    plan = cleanup.cleanup(settings, yes=False, out=lines.append)
    job = {j.display_name: j.resource_name for j in kit_world["jobs"]}
    names = plan.names()
    deletes = [("custom job", f"{name} ({display})") for display, name in job.items()]
    assert names[0] == ("custom job", f"{job['kit-still-running']} (kit-still-running)")
    assert names[1:3] == [
        ("objects", f"gs://{FOREIGN}/kit-out/"),
        ("bucket", f"gs://{settings.bucket}"),
    ]
    assert sorted(names[3:6]) == sorted(deletes)
    assert names[6:] == [
        ("local service", "local Vertex AI service"),
        ("local state", str(paths.emulator_state_dir())),
        ("local folder", str(paths.sample_root())),
    ]
    assert plan.items[0].action.startswith("cancel")
    text = "\n".join(lines)
    assert FOREIGN + "/theirs" not in text and "kit-out-not-mine" not in text
    assert f"left alone, not created by the kit: gs://{FOREIGN}" in text
    assert "Dry run: nothing was deleted" in text
    assert "gcloud workbench instances stop" in text
    assert wait_for_state(running, {"JOB_STATE_RUNNING"}) == "JOB_STATE_RUNNING"
    assert all(p.exists() for p in model_files)
    assert paths.sample_root().exists()

    # ---- --yes: all of it goes, in that order; the foreign bucket keeps its own objects
    lines.clear()
    plan = cleanup.cleanup(settings, yes=True, out=lines.append)
    assert plan.errors == [], "\n".join(lines)
    assert "Done: everything the kit created is gone." in lines
    from labkit.local.emulator import control

    assert not control.status().running
    assert not paths.emulator_state_dir().exists()
    assert not paths.sample_root().exists()
    assert not kit_bucket_dir.exists()
    assert client.lookup_bucket(settings.bucket) is None
    left = sorted(b.name for b in client.list_blobs(FOREIGN))
    assert left == ["kit-out-not-mine/keep.txt", "theirs/data.csv"]
    assert not (paths.local_gcs_root() / FOREIGN / "kit-out").exists()
    assert [b.name for b in client.list_buckets()] == [FOREIGN]

    # ---- a second run finds nothing and says so
    lines.clear()
    plan = cleanup.cleanup(settings, yes=True, out=lines.append)
    assert plan.items == []
    assert lines[0].startswith("Nothing to delete (local mode): the kit left nothing behind.")
    assert any("workbench" in line for line in lines)
    assert not control.status().running


@pytest.mark.slow
def test_dry_run_after_a_reboot_starts_the_service_only_to_list_and_stops_it(kit_world):
    """The service was stopped (e.g. the machine restarted) but its state is still there."""
    from labkit.local.emulator import control

    settings = kit_world["settings"]
    control.stop()
    assert not control.status().running
    plan = cleanup.cleanup(settings, yes=False, out=lambda line: None)
    assert ("local service", "local Vertex AI service") in plan.names()
    assert len([k for k, _ in plan.names() if k == "custom job"]) == 3  # none running any more
    assert not control.status().running, "a dry run must not leave a service running"


def test_local_cleanup_removes_the_whole_bucket_root_when_only_kit_buckets_are_in_it(
    kit_home, gcs_client, kit_settings
):
    storage.ensure_kit_bucket(
        gcs_client, kit_settings.bucket, location="us-central1", labels=kit_settings.labels
    )
    (paths.local_gcs_root() / kit_settings.bucket / "model.keras").write_bytes(b"k")
    lines: list[str] = []
    plan = cleanup.cleanup(kit_settings, yes=True, out=lines.append)
    assert plan.names() == [
        ("bucket", f"gs://{kit_settings.bucket}"),
        ("local folder", str(paths.local_gcs_root())),
    ]
    assert plan.errors == [] and not paths.local_gcs_root().exists()
    again = cleanup.cleanup(kit_settings, yes=False, out=lines.append)
    assert again.items == [] and not paths.local_gcs_root().exists()


def test_run_id_limits_the_cleanup_to_one_run(kit_home, gcs_client, kit_settings):
    other_run = Settings(
        mode="local", project_id="local-project", bucket="other-run-bucket", run_id="run-b"
    )
    storage.ensure_kit_bucket(
        gcs_client, kit_settings.bucket, location="us-central1", labels=kit_settings.labels
    )
    storage.ensure_kit_bucket(
        gcs_client, other_run.bucket, location="us-central1", labels=other_run.labels
    )
    plan = cleanup.plan_cleanup(kit_settings, run_id="run-b")
    assert [n for k, n in plan.names() if k == "bucket"] == ["gs://other-run-bucket"]


# --------------------------------------------------------------------------- cloud-mode pieces


CLOUD = Settings(mode="cloud", project_id="cassava-lab-4711", run_id="run-a")


def test_cloud_cleanup_refuses_placeholders_before_touching_anything():
    with pytest.raises(ValueError, match="placeholder"):
        cleanup.plan_cleanup(Settings(mode="cloud", project_id="your-cloud-project"))


def test_workbench_reminder_gives_both_commands():
    text = cleanup.workbench_reminder(CLOUD)
    assert "gcloud workbench instances stop" in text
    assert "gcloud workbench instances delete" in text
    assert "--project=cassava-lab-4711" in text


@pytest.mark.slow
def test_cleanup_finds_the_kits_training_pipelines_too(kit_world):
    """Issue 15: pipelines (the console's route, CustomContainerTrainingJob) are the kit's too."""
    from google.cloud import aiplatform

    settings = kit_world["settings"]
    pipeline = aiplatform.CustomContainerTrainingJob(
        display_name="kit-pipeline", container_uri=WRITER_IMAGE, labels=settings.labels
    )
    pipeline.run(
        args=["120"],
        replica_count=1,
        machine_type="n1-standard-4",
        base_output_dir=f"gs://{settings.bucket}/kit-pipeline",
        sync=False,
    )
    pipeline.wait_for_resource_creation()
    deadline = time.monotonic() + 60
    while pipeline.state.name != "PIPELINE_STATE_RUNNING":
        assert time.monotonic() < deadline, pipeline.state
        time.sleep(0.3)
    backing = pipeline.gca_resource.training_task_metadata["backingCustomJob"]

    lines: list[str] = []
    plan = cleanup.cleanup(settings, yes=False, out=lines.append)
    entry = ("training pipeline", f"{pipeline.resource_name} (kit-pipeline)")
    names = plan.names()
    assert names[0] == entry and plan.items[0].action.startswith("cancel")
    assert names.count(entry) == 2  # cancel, then delete
    assert any(kind == "custom job" and name.startswith(backing) for kind, name in names)
    assert "PIPELINE_STATE_RUNNING" in "\n".join(lines)
    assert pipeline.state.name == "PIPELINE_STATE_RUNNING"  # a dry run touches nothing

    plan = cleanup.cleanup(settings, yes=True, out=lines.append)
    assert plan.errors == [], "\n".join(lines)
    plan = cleanup.cleanup(settings, yes=True, out=lambda line: None)
    assert plan.items == []
