"""Local cleanup never touches what the kit did not create, and is idempotent."""

from __future__ import annotations

import time

import pytest

from labkit import KIT_LABEL_KEY, KIT_LABEL_VALUE, RUN_LABEL_KEY
from labkit.cloud import cleanup, paths
from labkit.cloud.settings import Settings
from labkit.local import vertex_env
from labkit.local.emulator import control

from .conftest import IMAGE, Service, alive


@pytest.fixture
def lab(tmp_path, monkeypatch, tiny_image):
    """A LAB_HOME of its own and the local service in its default place (LAB_HOME/vertex)."""
    monkeypatch.setenv("CASSAVA_LAB_HOME", str(tmp_path / "lab"))
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    settings = Settings(
        mode="local", project_id="local-project", emulator_port=vertex_env.free_ports(1)[0]
    )
    status = control.start(None, settings.emulator_port, {IMAGE: str(tiny_image)})
    yield settings, Service(paths.emulator_state_dir(), status)
    control.stop()


@pytest.mark.parametrize("run_id", [None, "run-a"], ids=["whole-lab", "one-run"])
def test_cleanup_keeps_a_running_job_without_the_label_and_says_why(lab, run_id, monkeypatch):
    settings, service = lab
    theirs = service.create_job({"SLEEP": "120"})  # no lab label: not the kit's
    service.wait(theirs["name"], {"JOB_STATE_RUNNING"}, timeout=30)
    their_pids = service.recorded_pids(theirs["name"], 1)
    ours = service.create_job(labels={KIT_LABEL_KEY: KIT_LABEL_VALUE, RUN_LABEL_KEY: "run-a"})
    service.wait(ours["name"], {"JOB_STATE_SUCCEEDED"}, timeout=30)
    their_dir = service.state_dir / "jobs" / theirs["name"].rsplit("/", 1)[1]

    lines: list[str] = []
    started = time.monotonic()
    plan = cleanup.cleanup(settings, yes=True, run_id=run_id, out=lines.append)
    took = time.monotonic() - started
    text = "\n".join(lines)
    assert not plan.errors, text
    assert service.request("GET", f"/v1/{ours['name']}")[0] == 404  # the kit's job: deleted
    assert service.get(theirs["name"])["state"] == "JOB_STATE_RUNNING"  # theirs: untouched
    assert all(alive(pid) for pid in their_pids)
    assert (their_dir / "job.json").is_file() and (their_dir / "logs" / "chief-0.log").is_file()
    assert control.status().running
    if run_id is None:
        assert "kept the local Vertex AI service" in text and theirs["name"] in text, text
        assert "without the label lab=cassava" in text
    print(f"cleanup ({run_id or 'whole lab'}) {took:.1f} s")

    again: list[str] = []
    plan = cleanup.cleanup(settings, yes=True, run_id=run_id, out=again.append)
    assert not plan.items and not plan.errors, again  # nothing of the kit's is left
    assert service.get(theirs["name"])["state"] == "JOB_STATE_RUNNING"
    assert not any("could not list" in line for line in lines + again), lines + again
    monkeypatch.setattr(cleanup, "load_settings", lambda *args: settings)  # this port
    assert cleanup.main(["--yes"] + (["--run-id", run_id] if run_id else [])) == 0


def test_cleanup_removes_the_service_and_its_state_when_only_the_kit_lived_there(lab):
    settings, service = lab
    ours = service.create_job(labels={KIT_LABEL_KEY: KIT_LABEL_VALUE, RUN_LABEL_KEY: "run-a"})
    service.wait(ours["name"], {"JOB_STATE_SUCCEEDED"}, timeout=30)
    lines: list[str] = []
    plan = cleanup.cleanup(settings, yes=True, out=lines.append)
    assert not plan.errors, lines
    assert not control.status().running
    assert not paths.emulator_state_dir().exists()
    again: list[str] = []
    plan = cleanup.cleanup(settings, yes=True, out=again.append)
    assert not plan.items and not plan.errors, again
    assert not paths.emulator_state_dir().exists()  # a second run starts nothing, creates nothing
