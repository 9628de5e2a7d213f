"""Notebook 03's preemption demo: where the fault lands, and checks that it taught its point.

A worker is made to exit in the middle of training, by step (the trainer's fault hook,
`trainer.callbacks.FaultInjection`), right after a step the trainer backs up
(`--backup-every-steps`), so the restarted job resumes from that backup whatever
`EPOCHS` and `STEPS_PER_EPOCH` are, one epoch included. Parameters that leave no "middle"
(a single training step, a single worker) are refused when the plan is made, before any
process starts, with what to change. After the run, `check_preempted` and
`check_resumed` fail the cell with a clear message when the demo did not happen as planned,
so the notebook never tells the learner something its own output contradicts.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any

from labkit.i18n import gettext

FAILING_TASK = "worker:0"  # the TF_CONFIG task the fault hook stops
FAILING_ROLE = "worker-0"  # the same replica as `labkit cluster` names it
FAULT_EXIT_CODE = 3  # trainer.callbacks.FAULT_EXIT_CODE (not imported: it loads TensorFlow)


@dataclasses.dataclass(frozen=True)
class FaultPlan:
    """When the simulated preemption happens, and what the restart should resume from."""

    workers: int
    epochs: int
    steps_per_epoch: int
    fault_step: int  # the worker exits right after this training step (1-based, all epochs)

    @property
    def total_steps(self) -> int:
        return self.epochs * self.steps_per_epoch

    @property
    def fault_epoch(self) -> int:
        """The epoch (1-based) of the fault step."""
        return (self.fault_step - 1) // self.steps_per_epoch + 1

    @property
    def fault_step_in_epoch(self) -> int:
        return (self.fault_step - 1) % self.steps_per_epoch + 1

    @property
    def resume_epoch(self) -> int:
        """The epoch (1-based) the restarted job starts in."""
        return self.fault_step // self.steps_per_epoch + 1

    @property
    def resume_step_in_epoch(self) -> int:
        return self.fault_step % self.steps_per_epoch + 1

    @property
    def env(self) -> dict[str, str]:
        """The replicas' environment for the fault hook."""
        return {"LAB_FAIL_AT_STEP": str(self.fault_step), "LAB_FAIL_TASK": FAILING_TASK}

    @property
    def trainer_args(self) -> list[str]:
        """Back up every ``fault_step`` steps: the fault step's backup is the one resumed."""
        return ["--backup-every-steps", str(self.fault_step)]

    def describe(self) -> str:
        return gettext(
            "{workers} workers train {epochs} epoch(s) of {steps_per_epoch} steps ({total} "
            "steps). The trainer backs up every {fault_step} steps; {role} exits after step "
            "{fault_step} (epoch {fault_epoch}, step {fault_step_in_epoch}), just after the "
            "first backup. The restarted job should resume at epoch {resume_epoch}, step "
            "{resume_step}."
        ).format(
            workers=self.workers,
            epochs=self.epochs,
            steps_per_epoch=self.steps_per_epoch,
            total=self.total_steps,
            fault_step=self.fault_step,
            role=FAILING_ROLE,
            fault_epoch=self.fault_epoch,
            fault_step_in_epoch=self.fault_step_in_epoch,
            resume_epoch=self.resume_epoch,
            resume_step=self.resume_step_in_epoch,
        )


def steps_per_epoch(knobs: Mapping[str, Any], train_examples: int | None = None) -> int:
    """What the trainer will use: ``STEPS_PER_EPOCH``, else one pass over the training
    split at the global batch (per-replica batch x workers, one replica per worker here).
    ``train_examples``: the split's size, read from the dataset's metadata when not given."""
    if knobs.get("steps_per_epoch"):
        return int(knobs["steps_per_epoch"])
    if train_examples is None:
        train_examples = count_train_examples(knobs)
    global_batch = int(knobs["batch_size"]) * int(knobs["workers"])
    return math.ceil(train_examples / global_batch)


def plan_preemption(knobs: Mapping[str, Any], train_examples: int | None = None) -> FaultPlan:
    """Where the fault lands for these knobs, or a ValueError saying which to change.

    The fault step is the middle of the middle epoch (epoch 1 of 1, step 16 of 32), or the
    middle of training when epochs have one step; both attempts then have steps to run.
    """
    workers = int(knobs["workers"])
    epochs = int(knobs["epochs"])
    if workers < 2:
        raise ValueError(
            f"WORKERS={workers}: the preemption demo stops {FAILING_ROLE} while the chief "
            "trains on, so it needs a chief and at least one worker: set WORKERS to 2 or more."
        )
    if epochs < 1:
        raise ValueError(f"EPOCHS={epochs}: set EPOCHS to 1 or more.")
    steps = steps_per_epoch(knobs, train_examples)
    if epochs * steps < 2:
        raise ValueError(
            f"EPOCHS={epochs} with {steps} step(s) per epoch is {epochs * steps} training "
            "step: a preemption needs a step before it (to back up) and one after it (to "
            "resume). Set STEPS_PER_EPOCH to 2 or more, or EPOCHS to 2 or more."
        )
    middle_epoch = (epochs - 1) // 2
    fault = middle_epoch * steps + steps // 2 if steps >= 2 else epochs * steps // 2
    return FaultPlan(workers=workers, epochs=epochs, steps_per_epoch=steps, fault_step=fault)


def count_train_examples(knobs: Mapping[str, Any]) -> int:
    """Examples in the training split the knobs point at (reads the TFDS metadata)."""
    from trainer import data

    return data.load_split(knobs["data"], "train", data_dir=knobs.get("data_dir")).num_examples


def check_replicas(cluster: Any, workers: int) -> str:
    """Every replica's trainer saw ``workers`` replicas in sync, else a RuntimeError."""
    seen = {}
    for role in cluster.logs:
        found = re.findall(r"\] task=\S+ .*? replicas=(\d+)", cluster.log_text(role))
        seen[role] = int(found[0]) if found else None
    wrong = {role: n for role, n in seen.items() if n != workers}
    if wrong:
        raise RuntimeError(
            f"expected every replica to train with replicas={workers}, got {seen}: see the "
            f"logs in {next(iter(cluster.logs.values())).parent}"
        )
    return gettext(
        "all {n} replicas trained in sync: num_replicas_in_sync = {workers} on each"
    ).format(n=len(seen), workers=workers)


def check_preempted(cluster: Any, plan: FaultPlan) -> str:
    """The first attempt failed because the planned worker exited at the planned step."""
    code = cluster.exit_codes.get(FAILING_ROLE)
    if cluster.outcome != "failed" or cluster.failed_role != FAILING_ROLE or code != 3:
        raise RuntimeError(
            f"the preemption demo expected {FAILING_ROLE} to exit with code {FAULT_EXIT_CODE} "
            f"after step {plan.fault_step}; the run {cluster.outcome} (failed replica: "
            f"{cluster.failed_role}, exit codes {cluster.exit_codes}). {cluster.message[:300]}"
        )
    if f"after step {plan.fault_step} " not in cluster.log_text(FAILING_ROLE):
        raise RuntimeError(
            f"{FAILING_ROLE} exited, but its log has no fault at step {plan.fault_step}: "
            f"see {cluster.logs[FAILING_ROLE]}"
        )
    return gettext(
        "{role} was preempted after step {fault_step} of {total} (epoch {epoch}, step "
        "{step}/{steps_per_epoch})"
    ).format(
        role=FAILING_ROLE,
        fault_step=plan.fault_step,
        total=plan.total_steps,
        epoch=plan.fault_epoch,
        step=plan.fault_step_in_epoch,
        steps_per_epoch=plan.steps_per_epoch,
    )


def check_resumed(metrics: Mapping[str, Any], plan: FaultPlan) -> str:
    """The restarted job resumed from the fault step's backup and ran only the rest."""
    resumed = metrics.get("resumed_from_step")
    ran = metrics.get("steps_run")
    if resumed != plan.fault_step:
        raise RuntimeError(
            f"the restarted job should have resumed from the backup of step {plan.fault_step}, "
            f"but it {'started afresh' if not resumed else f'resumed from step {resumed}'}: "
            f"see {metrics.get('metrics_file')} and the replica logs"
        )
    if ran is not None and ran != plan.total_steps - plan.fault_step:
        raise RuntimeError(
            f"the restarted job ran {ran} steps; after a resume from step {plan.fault_step} "
            f"it should run {plan.total_steps - plan.fault_step}"
        )
    return gettext(
        "the restarted job resumed from the backup at epoch {epoch}, step "
        "{step}/{steps_per_epoch}: {fault_step} of {total} steps were not repeated, {ran} were run"
    ).format(
        epoch=plan.resume_epoch,
        step=plan.resume_step_in_epoch,
        steps_per_epoch=plan.steps_per_epoch,
        fault_step=plan.fault_step,
        total=plan.total_steps,
        ran=ran,
    )


def check_succeeded(cluster: Any) -> None:
    """The restarted job finished on every replica, else a RuntimeError with its account."""
    if not cluster.ok:
        raise RuntimeError("the restarted job did not finish:\n" + cluster.account())


def check_saved(mwms_dir: Any, cluster: Any) -> str:
    """Only the chief's model is left: the SavedModel, the Keras file and metrics.json are
    in ``model/``, and no worker's temporary folder remains."""
    from pathlib import Path

    model = Path(mwms_dir) / "model"
    missing = [n for n in ("savedmodel", "model.keras", "metrics.json") if not (model / n).exists()]
    leftovers = sorted(str(p) for p in Path(mwms_dir).rglob("*workertemp*"))
    if missing or leftovers:
        raise RuntimeError(
            f"after the save: missing in {model}: {missing or 'nothing'}; temporary worker "
            f"folders left: {leftovers or 'none'}. See the logs in "
            f"{next(iter(cluster.logs.values())).parent}"
        )
    workers = len(cluster.logs) - 1
    return gettext(
        "the chief's model is in {model} (savedmodel/, model.keras, metrics.json); "
        "the {workers} other replica(s) saved to temporary folders and removed them"
    ).format(model=model, workers=workers)


def outcome(plan: FaultPlan, first: Any, second: Any, metrics: Mapping[str, Any]) -> dict:
    """What the demo did, for results.json (the tests and the summary read it)."""
    return {
        "workers": plan.workers,
        "first_attempt": first.outcome,
        "failed_replica": first.failed_role,
        "failed_exit_code": first.exit_codes.get(first.failed_role),
        "fault_step": plan.fault_step,
        "total_steps": plan.total_steps,
        "steps_per_epoch": plan.steps_per_epoch,
        "second_attempt": second.outcome,
        "resumed_from_step": metrics.get("resumed_from_step"),
        "resumed_epoch": plan.resume_epoch,
        "resumed_step_in_epoch": plan.resume_step_in_epoch,
        "steps_run": metrics.get("steps_run"),
        "epochs_run": metrics.get("epochs_run"),
    }
