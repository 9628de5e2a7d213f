"""Durations in the docs come from measurements in the repository (bench/measurements.json)
or are labelled as the codelab's own figures; a refresh from a lab run is one command."""

from __future__ import annotations

import json
import shutil

import pytest

from labkit.cloud import paths
from labkit.course import durations

MACHINE = {"cores": 2, "memory_gib": 24, "gpu": "none"}


def _edition(place: str) -> str:
    """``en`` for README.md and notebooks/*.ipynb, else the edition's folder (``zh-CN``)."""
    parts = place.split()[0].split("/")
    return parts[1] if len(parts) == 3 and parts[0] == "notebooks" else "en"


@pytest.mark.parametrize("edition", ["en", "zh-CN"])
def test_every_stated_duration_is_measured_or_the_codelabs(edition):
    """README.md and the English notebooks' Markdown, then each translated edition's
    (notebooks/zh-CN/: a translation of an outdated English figure fails here by name)."""
    found = [p for p in durations.problems() if _edition(p.place) == edition]
    assert not found, "durations without a measurement behind them:\n" + "\n".join(map(str, found))


def test_durations_are_found_in_english_and_chinese():
    def spans(text):
        return [(d.low_s, d.high_s) for d in durations.find_durations(text)]

    assert spans("about 3.5-4.5 minutes") == [(210, 270)]
    assert spans("208 s, then 0.25 s per step") == [(208, 208), (0.25, 0.25)]
    assert spans("under a minute") == [(0, 60)]
    assert spans("a few seconds") == [(1, 10)]
    assert spans("训练作业大约需要 30-35 分钟才能完成") == [(1800, 2100)]
    assert spans("不到 1 分钟") == [(0, 60)]
    assert spans("2 epochs, 8 steps, 24 GiB, 2-core, as a Vertex AI job") == []


def _entries(**seconds_by_notebook: float) -> list[dict]:
    """Measurements of fixed figures (the committed file's change with every lab refresh),
    shaped like bench/measurements.json's: one per notebook, quotable there only."""
    template = durations.load_measurements()["measurements"][0]
    return [
        {**template, "id": f"lab.{name}", "seconds": value, "places": [name]}
        for name, value in seconds_by_notebook.items()
    ]


def test_an_unmeasured_duration_fails_and_names_the_place():
    entries = _entries(**{"00_environment_setup": 10, "04_sdk_job_submission": 94})
    text = "## Time and cost\n\n| local | about 7 minutes | nothing |\n"
    (problem,) = durations.check_text("nb 00 cell 2", "00_environment_setup", text, entries)
    assert problem.place == "nb 00 cell 2" and problem.text == "7 minutes"
    assert "bench/measurements.json" in str(problem)
    measured = "| local | about 10 s | nothing |"
    assert durations.check_text("x", "00_environment_setup", measured, entries) == []
    # a measurement backs only the places it lists: notebook 00's 10 s does not back 03
    assert durations.check_text("x", "03_mwms_trainer", measured, entries)


def test_cloud_figures_pass_only_as_the_codelabs_own():
    entries = _entries(**{"04_sdk_job_submission": 94})
    labelled = "| cloud | about 30-35 minutes, the codelab's own figure for its job |"
    assert durations.check_text("x", "04_sdk_job_submission", labelled, entries) == []
    unlabelled = "| cloud | about 30-35 minutes for the job |"
    assert durations.check_text("x", "04_sdk_job_submission", unlabelled, entries)
    invented = (
        "| cloud | building the image takes 5-10 minutes (the codelab's job: 30-35 minutes) |"
    )
    (problem,) = durations.check_text("x", "04_sdk_job_submission", invented, entries)
    assert problem.text == "5-10 minutes"


def test_measurements_name_their_machine_date_and_places():
    keys = {*durations.LAB_NOTEBOOKS, "README.md"}
    entries = durations.load_measurements()["measurements"]
    assert len({e["id"] for e in entries}) == len(entries)
    for entry in entries:
        assert {"cores", "memory_gib", "gpu"} <= set(entry["machine"]), entry["id"]
        assert entry["date"] and entry["how"] and entry["places"], entry["id"]
        assert set(entry["places"]) <= keys, entry["id"]
        low, high = durations.measured_range(entry)
        assert 0 < low <= high, entry["id"]
    for name in durations.LAB_NOTEBOOKS:
        assert any(e["id"] == f"lab.{name}" for e in entries), name


def test_readme_per_notebook_line_is_rendered_from_the_measurements():
    entries = durations.load_measurements()["measurements"]
    line = durations.per_notebook_line(entries)
    assert line in (paths.REPO_ROOT / "README.md").read_text()


def _fake_run(run_dir, times, failed=()):
    run_dir.mkdir()
    for name, seconds in times.items():
        papermill = {"duration": seconds, "exception": name in failed}
        notebook = {"cells": [], "metadata": {"papermill": papermill}, "nbformat": 4}
        (run_dir / f"{name}.ipynb").write_text(json.dumps(notebook))


def test_record_refreshes_the_measurements_and_readme_in_one_call(tmp_path):
    measurements = tmp_path / "measurements.json"
    readme = tmp_path / "README.md"
    shutil.copy(durations.MEASUREMENTS_FILE, measurements)
    shutil.copy(paths.REPO_ROOT / "README.md", readme)
    times = dict(zip(durations.LAB_NOTEBOOKS, (11.2, 13.9, 150.4, 250.0, 120.6, 6.5), strict=True))
    _fake_run(tmp_path / "20261204-120000", times)

    new = durations.record(
        tmp_path / "20261204-120000", measurements, readme, machine=MACHINE, date="2026-12-04"
    )

    assert {e["id"]: e["seconds"] for e in new} == {
        **{f"lab.{name}": round(s) for name, s in times.items()},
        "lab.total": 553,
    }
    data = json.loads(measurements.read_text())
    lab = {e["id"]: e for e in data["measurements"] if e["id"].startswith("lab.")}
    assert lab["lab.03_mwms_trainer"]["seconds"] == 250
    assert lab["lab.03_mwms_trainer"]["machine"] == MACHINE
    assert lab["lab.03_mwms_trainer"]["date"] == "2026-12-04"
    assert "lab.03_mwms_trainer.runs" in lab  # other measurements stay
    text = readme.read_text()
    assert (
        "Per notebook in the last `make lab` (2-core, 24 GiB machine without a GPU, 2026-12-04): "
        "00 11 s, 01 14 s, 02 150 s, 03 250 s, 04 121 s, 05 6 s." in text
    )
    assert text.count("Per notebook in the last `make lab`") == 1


def test_record_refuses_a_failed_run(tmp_path):
    _fake_run(tmp_path / "run", {"00_environment_setup": 9.0}, failed={"00_environment_setup"})
    with pytest.raises(ValueError, match="did not run to the end"):
        durations.notebook_times(tmp_path / "run")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="make lab"):
        durations.notebook_times(tmp_path / "empty")


def test_this_machine_is_described():
    machine = durations.this_machine()
    assert machine["cores"] >= 1 and "gpu" in machine
    assert "-core" in durations.machine_words(MACHINE)
    assert durations.machine_words(MACHINE) == "2-core, 24 GiB machine without a GPU"


def test_refresh_runs_the_lab_then_records_that_run(monkeypatch, tmp_path):
    from labkit.course import lab

    run = tmp_path / "20261204-130000"
    calls, recorded = [], []

    def fake_lab(argv, status=0):
        calls.append(argv)
        _fake_run(run, dict.fromkeys(durations.LAB_NOTEBOOKS, 5.0))
        return status

    monkeypatch.setattr(lab, "new_run_dir", lambda *args, **kwargs: run)
    monkeypatch.setattr(lab, "main", fake_lab)
    monkeypatch.setattr(durations, "record", lambda run_dir: recorded.append(run_dir) or [])
    monkeypatch.setattr(durations, "problems", lambda: [])
    assert durations.main(["refresh"]) == 0
    assert calls == [["--out", str(run)]] and recorded == [run]

    shutil.rmtree(run)
    calls.clear()
    recorded.clear()
    monkeypatch.setattr(lab, "main", lambda argv: fake_lab(argv, status=1))
    assert durations.main(["refresh"]) == 1
    assert recorded == []  # a failed lab run records nothing
