"""Local Cloud Storage: the real google-cloud-storage client against gcp-storage-emulator,
whose store is the kit's local bucket folder (what the trainer writes is visible as objects)."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from labkit.cloud import paths, storage
from labkit.cloud.settings import Settings

pytest_plugins = ["fixtures_storage"]  # shared fixtures: kit_home, local_gcs, gcs_client


def md5_b64(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode("ascii")


def test_the_client_talks_to_127_0_0_1(gcs_client, local_gcs):
    """The kit's client sends its requests to the local server, and they land in the lab's
    local bucket folder: a client that went to Google (or to another folder) fails here."""
    assert local_gcs.host.startswith("http://127.0.0.1:")
    assert local_gcs.host == gcs_client._connection.API_BASE_URL
    assert gcs_client.lookup_bucket("probe-bucket") is None
    gcs_client.create_bucket("probe-bucket")
    assert (paths.local_gcs_root() / "probe-bucket").is_dir()
    assert [b.name for b in gcs_client.list_buckets()] == ["probe-bucket"]


def test_objects_are_plain_files_in_the_local_bucket_folder(gcs_client, kit_settings):
    bucket, created = storage.ensure_kit_bucket(
        gcs_client, kit_settings.bucket, location="us-central1", labels=kit_settings.labels
    )
    assert created
    bucket.blob("notes/hello.txt").upload_from_string(b"hello")
    on_disk = paths.local_gcs_root() / kit_settings.bucket / "notes" / "hello.txt"
    assert on_disk.read_bytes() == b"hello"
    assert paths.gcs_to_local(f"gs://{kit_settings.bucket}/notes/hello.txt") == str(on_disk)
    meta = json.loads((paths.local_gcs_root() / ".meta").read_text())
    assert "notes/hello.txt" in meta["objects"][kit_settings.bucket]


def test_kit_bucket_carries_the_labels_once_and_a_foreign_one_stays_foreign(
    gcs_client, kit_settings
):
    bucket, created = storage.ensure_kit_bucket(
        gcs_client,
        f"gs://{kit_settings.bucket}/",
        location="us-central1",
        labels=kit_settings.labels,
    )
    assert created
    fetched = gcs_client.get_bucket(kit_settings.bucket)
    assert fetched.labels == {"lab": "cassava", "lab-run": "test-run"}
    assert fetched.soft_delete_policy.retention_duration_seconds == 0
    again, created_again = storage.ensure_kit_bucket(
        gcs_client, kit_settings.bucket, location="us-central1", labels=kit_settings.labels
    )
    assert not created_again and again.name == kit_settings.bucket

    gcs_client.create_bucket("someone-elses-bucket")
    theirs, created = storage.ensure_kit_bucket(
        gcs_client, "someone-elses-bucket", location="us-central1", labels=kit_settings.labels
    )
    assert not created and not theirs.labels, "an existing bucket must never be claimed"
    assert [b.name for b in storage.list_kit_buckets(gcs_client)] == [kit_settings.bucket]
    assert storage.list_kit_buckets(gcs_client, run_id="another-run") == []


def test_what_the_trainer_writes_becomes_objects_and_follows_changes(gcs_client, kit_settings):
    storage.ensure_kit_bucket(
        gcs_client, kit_settings.bucket, location="us-central1", labels=kit_settings.labels
    )
    model_dir = paths.local_gcs_root() / kit_settings.bucket / "job-1" / "model"
    model_dir.mkdir(parents=True)
    (model_dir / "saved_model.pb").write_bytes(b"A" * 1000)
    (model_dir / "metrics.json").write_text('{"accuracy": 0.9}')

    blobs = {b.name: b for b in gcs_client.list_blobs(kit_settings.bucket, prefix="job-1/")}
    assert set(blobs) == {"job-1/model/saved_model.pb", "job-1/model/metrics.json"}
    assert blobs["job-1/model/saved_model.pb"].size == 1000
    assert blobs["job-1/model/saved_model.pb"].md5_hash == md5_b64(b"A" * 1000)
    assert blobs["job-1/model/metrics.json"].content_type == "application/json"
    blob = gcs_client.bucket(kit_settings.bucket).blob("job-1/model/metrics.json")
    assert json.loads(blob.download_as_bytes()) == {"accuracy": 0.9}

    (model_dir / "saved_model.pb").write_bytes(b"B" * 10)  # the trainer overwrites
    (model_dir / "metrics.json").unlink()  # and removes a temporary file
    blobs = {b.name: b for b in gcs_client.list_blobs(kit_settings.bucket)}
    assert set(blobs) == {"job-1/model/saved_model.pb"}
    assert blobs["job-1/model/saved_model.pb"].md5_hash == md5_b64(b"B" * 10)


def test_settings_bucket_is_created_once_with_the_run_labels(local_gcs, kit_settings):
    bucket, created = storage.ensure_settings_bucket(kit_settings)
    assert created and bucket.name == kit_settings.bucket
    assert storage.ensure_settings_bucket(kit_settings)[1] is False
    assert (paths.local_gcs_root() / kit_settings.bucket).is_dir()


def test_a_folder_nobody_created_is_a_bucket_without_the_kit_label(gcs_client):
    (paths.local_gcs_root() / "made-by-hand" / "data").mkdir(parents=True)
    (paths.local_gcs_root() / "made-by-hand" / "data" / "x.csv").write_text("a,b\n")
    bucket = gcs_client.get_bucket("made-by-hand")
    assert not bucket.labels and not storage.is_kit_bucket(bucket)
    assert [b.name for b in gcs_client.list_blobs("made-by-hand")] == ["data/x.csv"]


def test_two_servers_on_one_root_see_each_others_writes(gcs_client, kit_settings):
    """Notebook kernels are separate processes, each with its own server on the same root."""
    from google.cloud import storage as gcs

    storage.ensure_kit_bucket(
        gcs_client, kit_settings.bucket, location="us-central1", labels=kit_settings.labels
    )
    other = storage.LocalStorageServer(root=paths.local_gcs_root(), port=0).start()
    try:
        other_client = gcs.Client(
            project="local-project",
            credentials=other.credentials(),
            client_options={"api_endpoint": other.host},
        )
        other_client.bucket(kit_settings.bucket).blob("from-other.txt").upload_from_string("hi")
        assert other_client.get_bucket(kit_settings.bucket).labels["lab"] == "cassava"
        names = [b.name for b in gcs_client.list_blobs(kit_settings.bucket)]
        assert names == ["from-other.txt"]
    finally:
        other.stop()


def test_deleting_objects_and_buckets_is_idempotent(gcs_client, kit_settings):
    bucket, _ = storage.ensure_kit_bucket(
        gcs_client, kit_settings.bucket, location="us-central1", labels=kit_settings.labels
    )
    bucket.blob("a/1.txt").upload_from_string("1")
    tmp_file = paths.lab_home() / "2.txt"
    tmp_file.write_text("2")
    storage.upload_file(
        gcs_client, tmp_file, f"gs://{kit_settings.bucket}/a/2.txt", labels=kit_settings.labels
    )
    assert storage.delete_objects(gcs_client, kit_settings.bucket, "a/", only_kit=True) == 1
    assert [b.name for b in gcs_client.list_blobs(kit_settings.bucket)] == ["a/1.txt"]
    assert storage.delete_bucket(gcs_client, kit_settings.bucket) == 1
    assert not (paths.local_gcs_root() / kit_settings.bucket).exists()
    assert gcs_client.lookup_bucket(kit_settings.bucket) is None
    assert storage.delete_bucket(gcs_client, kit_settings.bucket) == 0  # second time: nothing


def test_removing_the_root_under_a_running_server_does_not_bring_it_back(gcs_client, kit_settings):
    import shutil

    storage.ensure_kit_bucket(
        gcs_client, kit_settings.bucket, location="us-central1", labels=kit_settings.labels
    )
    shutil.rmtree(paths.local_gcs_root())
    assert list(gcs_client.list_buckets()) == []
    assert not paths.local_gcs_root().exists()


def test_bad_names_and_cloud_placeholders_fail_early(gcs_client, kit_settings):
    with pytest.raises(ValueError, match="not valid"):
        storage.ensure_kit_bucket(
            gcs_client, "Bad_Bucket!", location="us-central1", labels=kit_settings.labels
        )
    with pytest.raises(ValueError, match="lab=cassava"):
        storage.ensure_kit_bucket(gcs_client, "fine-name", location="us-central1", labels={})
    with pytest.raises(ValueError, match="placeholder"):
        storage.storage_client(Settings(mode="cloud", project_id="your-cloud-project"))
    with pytest.raises(ValueError, match="gs://"):
        storage.split_gs_uri("/local/path")
