"""The preemption demo's plan and checks, the sentences printed from results, chart alt text.

Fast and without TensorFlow processes: the notebooks' own runs (tests/test_notebooks.py)
check the same functions against real results.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path

import pytest

from labkit.course import claims, faultdemo, lab, plots


def knobs(**changed):
    return {"workers": 2, "epochs": 2, "batch_size": 8, "steps_per_epoch": None, **changed}


@pytest.mark.parametrize(
    ("changed", "fault", "resume"),
    [
        ({}, 16, (1, 17)),  # the local default: 2 epochs of 32 steps
        ({"epochs": 1}, 16, (1, 17)),  # one epoch still resumes mid-way
        ({"epochs": 3, "steps_per_epoch": 5}, 7, (2, 3)),  # the middle epoch
        ({"epochs": 2, "steps_per_epoch": 1}, 1, (2, 1)),  # one step per epoch: between epochs
        ({"epochs": 1, "steps_per_epoch": 2}, 1, (1, 2)),
        ({"workers": 3, "batch_size": 4, "epochs": 1, "steps_per_epoch": 6}, 3, (1, 4)),
    ],
)
def test_the_fault_lands_mid_training(changed, fault, resume):
    plan = faultdemo.plan_preemption(knobs(**changed), train_examples=500)
    assert plan.fault_step == fault
    assert 1 <= plan.fault_step < plan.total_steps
    assert (plan.resume_epoch, plan.resume_step_in_epoch) == resume
    assert plan.env == {"LAB_FAIL_AT_STEP": str(fault), "LAB_FAIL_TASK": "worker:0"}
    assert plan.trainer_args == ["--backup-every-steps", str(fault)]
    assert f"exits after step {fault} " in plan.describe()


@pytest.mark.parametrize(
    ("changed", "message"),
    [
        ({"workers": 1}, "WORKERS=1: .* set WORKERS to 2 or more"),
        ({"epochs": 1, "steps_per_epoch": 1}, "Set STEPS_PER_EPOCH to 2 or more, or EPOCHS"),
    ],
)
def test_impossible_demos_are_refused_with_the_fix(changed, message):
    with pytest.raises(ValueError, match=message):
        faultdemo.plan_preemption(knobs(**changed), train_examples=500)


def test_steps_per_epoch_follow_the_global_batch():
    assert faultdemo.steps_per_epoch(knobs(workers=3, batch_size=4), 500) == 42
    assert faultdemo.steps_per_epoch(knobs(steps_per_epoch=6), 500) == 6


@dataclasses.dataclass
class FakeCluster:
    outcome: str
    failed_role: str | None
    exit_codes: dict
    logs: dict
    message: str = ""

    @property
    def ok(self):
        return self.outcome == "succeeded"

    def log_text(self, role):
        return Path(self.logs[role]).read_text()

    def account(self):
        return "account"


def fake_cluster(tmp_path, worker_log, outcome="failed", code=3):
    chief, worker = tmp_path / "chief-0.log", tmp_path / "worker-0.log"
    chief.write_text("[trainer] task=chief:0 chief=True workers=2 replicas=2 strategy=X\n")
    worker.write_text(worker_log)
    return FakeCluster(
        outcome,
        "worker-0" if outcome == "failed" else None,
        {"chief-0": -15, "worker-0": code},
        {"chief-0": chief, "worker-0": worker},
    )


def test_checks_pass_when_the_demo_happened_and_fail_clearly_when_not(tmp_path):
    plan = faultdemo.plan_preemption(knobs(epochs=1), train_examples=500)
    good = fake_cluster(
        tmp_path,
        "[trainer] task=worker:0 chief=False workers=2 replicas=2 strategy=X\n"
        "[trainer] task=worker:0 FAULT INJECTED: exiting after step 16 (epoch 1, step 16)\n",
    )
    assert "all 2 replicas trained in sync" in faultdemo.check_replicas(good, 2)
    assert "after step 16 of 32" in faultdemo.check_preempted(good, plan)
    with pytest.raises(RuntimeError, match="expected every replica to train with replicas=3"):
        faultdemo.check_replicas(good, 3)
    finished = fake_cluster(tmp_path, "", outcome="succeeded", code=0)
    with pytest.raises(RuntimeError, match="expected worker-0 to exit with code 3"):
        faultdemo.check_preempted(finished, plan)

    resumed = {"resumed_from_step": 16, "steps_run": 16}
    assert "resumed from the backup at epoch 1, step 17/32" in faultdemo.check_resumed(
        resumed, plan
    )
    with pytest.raises(RuntimeError, match="but it started afresh"):
        faultdemo.check_resumed({"resumed_from_step": None, "steps_run": 32}, plan)
    with pytest.raises(RuntimeError, match="ran 20 steps"):
        faultdemo.check_resumed({"resumed_from_step": 16, "steps_run": 20}, plan)


def test_accuracy_is_stated_against_chance():
    assert claims.chance(5) == 0.2
    assert "2.5x chance" in claims.accuracy_vs_chance(0.5, 5)
    assert "below chance: the model has not learned yet" in claims.accuracy_vs_chance(0.1, 5)
    assert "no validation accuracy" in claims.accuracy_vs_chance(None, 5)


def test_summary_states_what_was_recorded(tmp_path):
    model = tmp_path / "model"
    (model / "savedmodel").mkdir(parents=True)
    (model / "savedmodel" / "saved_model.pb").write_bytes(b"x")
    results = {
        "baseline": {"images_per_sec": 10.0, "replicas": 1},
        "mwms": {
            "workers": 3,
            "replicas": 3,
            "epochs_run": [0],
            "val_accuracy": 0.4,
            "images_per_sec": 9.0,
            "model_dir": str(model),
        },
        "preemption": {
            "failed_replica": "worker-0",
            "fault_step": 3,
            "total_steps": 6,
            "resumed_from_step": 3,
            "resumed_epoch": 1,
            "resumed_step_in_epoch": 4,
            "steps_run": 3,
        },
    }
    lines = claims.summary_lines(results, 5)
    assert lines[0].startswith("trained on 3 workers (3 replicas in sync), epochs 1")
    assert "resumed from the backup at epoch 1, step 4 and ran the other 3 steps" in lines[1]
    assert lines[2] == f"model: {model / 'savedmodel'}"
    assert "2.0x chance" in lines[3] and "0.90x (not faster)" in lines[4]
    results["preemption"]["resumed_from_step"] = None
    assert "did NOT resume" in claims.summary_lines(results, 5)[1]
    (model / "savedmodel" / "saved_model.pb").unlink()
    with pytest.raises(FileNotFoundError, match="the save did not happen"):
        claims.summary_lines(results, 5)


def test_charts_carry_alt_text_into_the_notebook_output():
    figure = plots.learning_curves({"loss": [2, 1], "accuracy": [0.3, 0.6]}, "baseline")
    data, metadata = figure._repr_mimebundle_()
    assert base64.b64decode(data["image/png"])[:4] == b"\x89PNG"
    alt = metadata["image/png"]["alt"]
    assert alt == figure.alt_text and alt.startswith("Chart with 2 panel(s): baseline loss")
    assert "series: accuracy" in alt


def test_report_page_summarises_the_run(tmp_path):
    (tmp_path / "a.html").write_text("<p>a</p>")
    (tmp_path / "results.json").write_text(
        json.dumps(
            {
                "baseline": {
                    "val_accuracy": 0.5,
                    "epochs_run": [0, 1],
                    "x": list(range(99)),
                    "model_dir": "m",
                    "metrics_file": "m/metrics.json",
                }
            }
        )
    )
    run = lab.LabRun(
        tmp_path,
        [
            lab.NotebookRun("a", "ok", 12.3, tmp_path / "a.ipynb", tmp_path / "a.html"),
            lab.NotebookRun("b", "skipped"),
        ],
    )
    page = lab.write_report(run, {"EPOCHS": 1, "MODE": "local"}).read_text()
    assert '<a href="a.html">report</a>' in page and "<td>12 s</td>" in page
    assert "<td>EPOCHS</td><td>1</td>" in page
    assert "<td>baseline.epochs_run</td><td>0, 1</td>" in page
    assert "<td>baseline.x</td><td>99 values</td>" in page
    assert "baseline accuracy 0.500: 2.5x chance" in page
    assert f"report: {tmp_path / 'index.html'}" in lab.format_summary(run)


def test_exported_report_keeps_the_charts_alt_text(tmp_path, caplog):
    import nbformat

    figure = plots.compare_runs({"baseline": {"images_per_sec": 10}, "2 workers": {}})
    data, metadata = figure._repr_mimebundle_()
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("plots.compare_runs(...)")
    cell.outputs = [nbformat.v4.new_output("execute_result", data, metadata=metadata)]
    cell.execution_count = 1
    nb.cells = [cell]
    path = tmp_path / "chart.ipynb"
    nbformat.write(nb, str(path))
    page = lab.export_html(path).read_text()
    assert f'alt="{figure.alt_text}"' in page
    assert "No description has been provided" not in page
    assert "Alternative text is missing" not in caplog.text


def test_kernel_stderr_goes_to_a_file_while_tensorflow_starts(tmp_path, capfd):
    """What TensorFlow's C++ code writes to descriptor 2 lands in the log file, not the cell."""
    import os

    from labkit.cloud import tflogs

    log = tmp_path / "tf.log"
    with tflogs.stderr_to(log):
        os.write(2, b"E0000 00:00:1.5 1 cuda_platform.cc:52] failed call to cuInit\n")
    os.write(2, b"after\n")
    assert "cuInit" in log.read_text()
    captured = capfd.readouterr().err
    assert "cuInit" not in captured and "after" in captured
