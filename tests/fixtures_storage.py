"""Fixtures for tests that need the kit's local state and local Cloud Storage.

Import them into a test module with ``from fixtures_storage import ...`` (pytest puts tests/
on sys.path, then finds the imported fixtures); each test gets its own ``CASSAVA_LAB_HOME``
under ``tmp_path``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from labkit.cloud import storage
from labkit.cloud.settings import Settings

__all__ = ["gcs_client", "kit_home", "kit_settings", "local_gcs"]


@pytest.fixture
def kit_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh LAB_HOME for this test only."""
    home = tmp_path / "lab"
    monkeypatch.setenv("CASSAVA_LAB_HOME", str(home))
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    return home


@pytest.fixture
def kit_settings(kit_home: Path) -> Settings:
    return Settings(mode="local", project_id="local-project", run_id="test-run")


@pytest.fixture
def local_gcs(
    kit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[storage.LocalStorageServer]:
    """gcp-storage-emulator on 127.0.0.1, its store = this test's local bucket root."""
    monkeypatch.delenv(storage.EMULATOR_ENV, raising=False)
    server = storage.start_local_storage()
    yield server
    storage.stop_local_storage()


@pytest.fixture
def gcs_client(kit_settings: Settings, local_gcs: storage.LocalStorageServer):
    """A real google-cloud-storage client talking to the local emulator."""
    return storage.storage_client(kit_settings)
