"""The trainer's fault hook by step (notebook 03's preemption demo), on one process.

A run of one epoch is preempted mid-epoch right after a step backup and resumes from that
step: the case the epoch-level hook could not show (it had no later epoch to resume at).
"""

from __future__ import annotations

import pytest
from trainer_runs import read_metrics, run_trainer, small_args

pytestmark = pytest.mark.slow


def test_one_epoch_preempted_mid_way_resumes_from_the_step_backup(sample_for_jobs, tmp_path):
    args = small_args(
        sample_for_jobs.tfds_data_dir,
        tmp_path,
        **{
            "--epochs": 1,
            "--steps-per-epoch": 4,
            "--validation-steps": 1,
            "--backup-every-steps": 2,
        },
    )
    fault = {"LAB_FAIL_AT_STEP": "2", "LAB_FAIL_TASK": "local"}
    first = run_trainer(args, env=fault)
    assert first.returncode == 3, first.stdout[-2000:] + first.stderr[-2000:]
    assert "FAULT INJECTED: exiting after step 2 (epoch 1, step 2)" in first.stdout
    assert "no backup appeared" not in first.stdout
    assert list((tmp_path / "checkpoints").rglob("*.index")), "step 2 should have been backed up"

    second = run_trainer(args, env=fault)  # the same job restarted: the fault fires only once
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    assert "resumed from backup at epoch 1, step 3/4 (2 steps done before)" in second.stdout
    metrics = read_metrics(tmp_path / "model")
    assert metrics["resumed_from_step"] == 2 and metrics["steps_run"] == 2
    assert metrics["epochs_run"] == [0] and metrics["steps_per_epoch"] == 4
