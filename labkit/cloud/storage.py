"""Bucket work through the real `google-cloud-storage` client, in both modes.

cloud: the client talks to Cloud Storage with the learner's credentials.
local: it talks to `gcp-storage-emulator`, served from a thread in this process on
127.0.0.1 (``STORAGE_EMULATOR_HOST`` points the client at it), behind the same guard as the
local Vertex AI service (`labkit.local.guard`: Host, Origin, and a session token made when the
server starts, which `storage_client` hands the client as its credentials, so it sends
``Authorization: Bearer`` as it would to Google; nothing else it sends changes).

How the local emulator and the local bucket folders are one thing: gcp-storage-emulator
keeps an object's bytes in ``<store>/<bucket>/<object name>`` and all metadata in one
``<store>/.meta`` JSON file. `LabStorage` makes ``<store>`` the kit's local bucket root
(`labkit.cloud.paths.local_gcs_root()`), the folder that ``gs://B/p`` maps to in local mode
(`labkit.cloud.paths.gcs_to_local`). The trainer, which cannot reach an emulator through
`tf.io.gfile`, writes plain files there; before every request the server re-reads
``.meta`` and reconciles it with the folder: new files become objects, vanished files stop
being objects, changed files get new sizes and hashes, and a folder nobody created as a
bucket shows up as a bucket *without* the kit's labels. So what the trainer writes is
visible as objects, and several processes (notebook kernels, tests) can share the root.

Which buckets did the kit create? Those carrying the label ``lab=cassava``: the kit sets it
when it creates a bucket and never on a bucket that already existed. Cleanup deletes a
bucket whole only when it carries that label.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import logging
import mimetypes
import os
import re
import threading
from collections.abc import Iterator, Mapping
from functools import partial
from http import server as http_server
from pathlib import Path
from typing import Any

from labkit import KIT_LABEL_KEY, KIT_LABEL_VALUE, RUN_LABEL_KEY
from labkit.cloud import paths
from labkit.cloud.settings import Settings

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$")

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- local emulator


def _emulator_modules() -> tuple[Any, Any, Any, Any]:
    """gcp-storage-emulator's pieces, imported only when local mode needs them."""
    from gcp_storage_emulator import server as gse_server
    from gcp_storage_emulator import storage as gse_storage
    from gcp_storage_emulator.handlers import buckets as gse_buckets
    from gcp_storage_emulator.handlers import objects as gse_objects

    return gse_server, gse_storage, gse_buckets, gse_objects


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(text: str | None) -> float:
    if not text:
        return 0.0
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _hashes(path: Path) -> tuple[str, str]:
    """(md5, crc32c) in the base64 form Cloud Storage reports."""
    import google_crc32c

    md5 = hashlib.md5()
    crc = google_crc32c.Checksum()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            md5.update(chunk)
            crc.update(chunk)
    return (
        base64.b64encode(md5.digest()).decode("ascii"),
        base64.b64encode(crc.digest()).decode("ascii"),
    )


def make_lab_storage(root: Path) -> Any:
    """A gcp-storage-emulator `Storage` whose on-disk store is exactly ``root``.

    The emulator itself puts its store at ``$STORAGE_BASE/$STORAGE_DIR`` (read once at
    import). Here the store is pointed at ``root`` instead, so ``root/<bucket>/<name>`` are
    the object bytes. Relies on the internals of the pinned gcp-storage-emulator release;
    tests/test_storage.py checks the layout.
    """
    _, gse_storage, gse_buckets, gse_objects = _emulator_modules()

    class LabStorage(gse_storage.Storage):
        """The emulator's storage, rooted at the kit's local bucket folder, synced with it."""

        def __init__(self, store_root: Path) -> None:
            super().__init__(use_memory_fs=True)  # nothing on disk yet; re-rooted below
            self._use_memory_fs = False
            self._data_dir = str(store_root)
            self._store = gse_storage._FileStore(use_memory=False, root=store_root)
            self.root = store_root
            self._lock = threading.Lock()
            self._read_config_from_file()

        def sync_from_disk(self) -> bool:
            """Re-read ``.meta`` (other processes) and reconcile it with the files; True if
            anything changed."""
            with self._lock:
                self._read_config_from_file()
                if not self.root.is_dir():  # removed by cleanup: nothing to serve, nothing to write
                    return False
                changed = self._reconcile()
                if changed:
                    self._write_config_to_file()
                return changed

        def _reconcile(self) -> bool:
            changed = False
            on_disk = {
                p.name
                for p in self.root.iterdir()
                if p.is_dir() and not p.name.startswith(("_", ".")) and _BUCKET_NAME.match(p.name)
            }
            for name in sorted(on_disk - set(self.buckets)):
                # A folder nobody created through the API: a bucket, but not the kit's.
                self.buckets[name] = gse_buckets._make_bucket_resource(name, self.project_number)
                changed = True
            for name in list(self.buckets):
                if name not in on_disk:
                    del self.buckets[name]
                    self.objects.pop(name, None)
                    changed = True
                    continue
                changed |= self._reconcile_bucket(name)
            return changed

        def _reconcile_bucket(self, bucket: str) -> bool:
            changed = False
            objects = self.objects.setdefault(bucket, {})
            base = self.root / bucket
            files = {p.relative_to(base).as_posix(): p for p in base.rglob("*") if p.is_file()}
            for name in [n for n in objects if n not in files]:
                del objects[name]
                changed = True
            for name, path in files.items():
                stat = path.stat()
                obj = objects.get(name)
                unchanged = (
                    obj is not None
                    and int(obj.get("size") or -1) == stat.st_size
                    and stat.st_mtime <= _parse_time(obj.get("updated")) + 1.0
                )
                if unchanged:
                    continue
                content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
                new = gse_objects._make_object_resource(
                    "http://127.0.0.1", bucket, name, content_type, str(stat.st_size)
                )
                md5, crc = _hashes(path)
                new.update(md5Hash=md5, crc32c=crc, etag=md5)
                if obj is not None and obj.get("metadata"):
                    new["metadata"] = obj["metadata"]
                stamp = dt.datetime.fromtimestamp(stat.st_mtime, dt.timezone.utc)
                new["updated"] = stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
                objects[name] = new
                changed = True
            return changed

    root.mkdir(parents=True, exist_ok=True)
    return LabStorage(root)


@dataclasses.dataclass
class LocalStorageServer:
    """gcp-storage-emulator on 127.0.0.1 in a daemon thread, store = the local bucket root."""

    root: Path
    port: int
    _httpd: Any = None
    _thread: threading.Thread | None = None
    storage: Any = None
    guard: Any = dataclasses.field(default=None, repr=False)  # labkit.local.guard.Guard

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def credentials(self) -> Any:
        """Credentials that carry this server's session token, for Google's storage client."""
        from google.oauth2.credentials import Credentials

        return Credentials(self.guard.token)

    def start(self) -> LocalStorageServer:
        from labkit.local.guard import Guard, new_token

        gse_server, _, _, _ = _emulator_modules()
        self.storage = make_lab_storage(self.root)
        storage, server = self.storage, self

        class GuardedSyncingHandler(gse_server.RequestHandler):
            """Refuse what the guard refuses; else reconcile the store with the folder
            before the request is routed."""

            def parse_request(self) -> bool:
                if not super().parse_request():
                    return False
                path = self.path.split("?", 1)[0]
                refusal = server.guard.check(self.command, path, self.headers, {})
                if refusal is not None:
                    body = json.dumps(refusal.to_json()).encode()
                    self.send_response(refusal.http_status)
                    self.send_header("Content-Type", "application/json; charset=UTF-8")
                    self.send_header("Content-Length", str(len(body)))
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(body)
                    self.close_connection = True
                    return False  # nothing routed, nothing read or written
                storage.sync_from_disk()
                return True

        self._httpd = http_server.HTTPServer(
            ("127.0.0.1", self.port), partial(GuardedSyncingHandler, storage)
        )
        self.port = self._httpd.server_address[1]
        self.guard = Guard(new_token(), self.port, service="the local Cloud Storage emulator")
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="lab-storage-emulator", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @property
    def running(self) -> bool:
        return self._httpd is not None


_SERVERS: dict[Path, LocalStorageServer] = {}
_SERVERS_LOCK = threading.Lock()


def start_local_storage(root: Path | None = None, port: int = 0) -> LocalStorageServer:
    """The local Cloud Storage for ``root`` (default `paths.local_gcs_root()`), started once
    per process, with ``STORAGE_EMULATOR_HOST`` set so clients (and child processes) use it."""
    root = Path(root or paths.local_gcs_root()).resolve()
    with _SERVERS_LOCK:
        srv = _SERVERS.get(root)
        if srv is None or not srv.running:
            srv = LocalStorageServer(root=root, port=port).start()
            _SERVERS[root] = srv
    os.environ[EMULATOR_ENV] = srv.host
    return srv


def stop_local_storage(root: Path | None = None) -> None:
    """Stop this process's local Cloud Storage server(s) (all of them when root is None)."""
    with _SERVERS_LOCK:
        roots = list(_SERVERS) if root is None else [Path(root).resolve()]
        for r in roots:
            srv = _SERVERS.pop(r, None)
            if srv is not None:
                if os.environ.get(EMULATOR_ENV) == srv.host:
                    del os.environ[EMULATOR_ENV]
                srv.stop()


# --------------------------------------------------------------------------- client and buckets


def storage_client(settings: Settings) -> Any:
    """A `google.cloud.storage.Client` for the settings' mode (local: the emulator above)."""
    from google.cloud import storage

    if settings.mode == "local":
        server = start_local_storage()
        return storage.Client(project=settings.project_id, credentials=server.credentials())
    settings.check_cloud_ready()
    stop_local_storage()  # a kernel that was in local mode must not keep talking to the emulator
    return storage.Client(project=settings.project_id)


def is_kit_bucket(bucket: Any, run_id: str | None = None) -> bool:
    """Whether the kit created this bucket: it carries ``lab=cassava`` (and the run id, if
    given)."""
    labels = bucket.labels or {}
    if labels.get(KIT_LABEL_KEY) != KIT_LABEL_VALUE:
        return False
    return run_id is None or labels.get(RUN_LABEL_KEY) == run_id


def ensure_kit_bucket(
    client: Any, name: str, *, location: str, labels: Mapping[str, str]
) -> tuple[Any, bool]:
    """Create bucket ``name`` with the kit's labels, or return the existing one untouched.

    Returns ``(bucket, created)``. An existing bucket is never labelled afterwards: it was
    not the kit's, and cleanup must not delete it whole. Kit buckets get soft delete off so
    that what cleanup deletes is gone and no longer billed. (gcp-storage-emulator drops
    labels and policies sent with a create, so they are also patched on when missing.)
    """
    from google.api_core import exceptions as gexc

    name = name.removeprefix("gs://").rstrip("/")
    if not _BUCKET_NAME.match(name):
        raise ValueError(
            f"bucket name {name!r} is not valid: 3-63 lowercase letters, digits, '-', '_' or "
            "'.', starting and ending with a letter or digit."
        )
    if labels.get(KIT_LABEL_KEY) != KIT_LABEL_VALUE:
        raise ValueError(
            f"labels must carry {KIT_LABEL_KEY}={KIT_LABEL_VALUE}: pass settings.labels."
        )
    existing = client.lookup_bucket(name)
    if existing is not None:
        return existing, False
    bucket = client.bucket(name)
    bucket.labels = dict(labels)
    bucket.soft_delete_policy.retention_duration_seconds = 0
    bucket.iam_configuration.uniform_bucket_level_access_enabled = True
    try:
        bucket = client.create_bucket(bucket, location=location)
    except gexc.Conflict:
        return client.get_bucket(name), False
    if (bucket.labels or {}).get(
        KIT_LABEL_KEY
    ) != KIT_LABEL_VALUE or bucket.soft_delete_policy.retention_duration_seconds:
        bucket.labels = dict(labels)
        bucket.soft_delete_policy.retention_duration_seconds = 0
        bucket.patch()
    return bucket, True


def ensure_settings_bucket(settings: Settings) -> tuple[Any, bool]:
    """The settings' bucket in the settings' region with the run's labels (notebook 00)."""
    client = storage_client(settings)
    return ensure_kit_bucket(
        client, settings.bucket, location=settings.region, labels=settings.labels
    )


def list_kit_buckets(client: Any, run_id: str | None = None) -> list[Any]:
    """Every bucket the kit created (label ``lab=cassava``) in the client's project."""
    return [b for b in client.list_buckets() if is_kit_bucket(b, run_id)]


def split_gs_uri(uri: str) -> tuple[str, str]:
    """``gs://bucket/some/prefix`` -> ("bucket", "some/prefix")."""
    if not uri.startswith("gs://"):
        raise ValueError(f"{uri!r} is not a gs:// URI.")
    bucket, _, prefix = uri[len("gs://") :].partition("/")
    if not bucket:
        raise ValueError(f"{uri!r} names no bucket.")
    return bucket, prefix


def iter_blobs(client: Any, bucket_name: str, prefix: str = "") -> Iterator[Any]:
    from google.api_core import exceptions as gexc

    try:
        yield from client.list_blobs(bucket_name, prefix=prefix or None)
    except gexc.NotFound:
        return


def upload_file(
    client: Any, local_path: str | Path, gs_uri: str, *, labels: Mapping[str, str] | None = None
) -> Any:
    """Upload one file; ``labels`` become the object's metadata so cleanup can tell it is
    the kit's even in a bucket the kit did not create."""
    bucket_name, name = split_gs_uri(gs_uri)
    blob = client.bucket(bucket_name).blob(name)
    if labels:
        blob.metadata = dict(labels)
    blob.upload_from_filename(str(local_path))
    return blob


def is_kit_object(blob: Any, run_id: str | None = None) -> bool:
    """An object the kit uploaded itself carries the kit's labels as metadata."""
    meta = blob.metadata or {}
    if meta.get(KIT_LABEL_KEY) != KIT_LABEL_VALUE:
        return False
    return run_id is None or meta.get(RUN_LABEL_KEY) == run_id


def delete_bucket(client: Any, bucket_name: str) -> int:
    """Delete every object of the bucket, then the bucket; returns how many objects went.

    Idempotent: a missing bucket deletes nothing.
    """
    from google.api_core import exceptions as gexc

    deleted = delete_objects(client, bucket_name, "")
    with contextlib.suppress(gexc.NotFound):
        client.bucket(bucket_name).delete()
    return deleted


def delete_objects(client: Any, bucket_name: str, prefix: str, *, only_kit: bool = False) -> int:
    """Delete the objects under ``prefix`` (with ``only_kit``: only kit-labelled ones)."""
    from google.api_core import exceptions as gexc

    deleted = 0
    for blob in list(iter_blobs(client, bucket_name, prefix)):
        if only_kit and not is_kit_object(blob):
            continue
        try:
            blob.delete()
            deleted += 1
        except gexc.NotFound:
            pass
    return deleted
