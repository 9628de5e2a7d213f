"""What a run did, in words printed from what it recorded: never from what it was meant to do.

Markdown in the notebooks explains; the sentences that state an outcome (how many workers
trained, from where a job resumed, where the model is, accuracy against chance, the
speed-up) come from here, built from ``results.json`` and the chief's ``metrics.json``, so
they stay true under any parameters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from labkit.i18n import N_, gettext


def chance(classes: int) -> float:
    """Accuracy of guessing uniformly among ``classes`` classes."""
    return 1.0 / max(int(classes), 1)


def accuracy_vs_chance(accuracy: float | None, classes: int, what: str = "validation") -> str:
    """E.g. ``validation accuracy 0.625: above chance (0.200, 5 classes)``, or below it."""
    level = chance(classes)
    if accuracy is None:
        return gettext(
            "no {what} accuracy was recorded (chance: {level:.3f}, {classes} classes)"
        ).format(what=gettext(what), level=level, classes=classes)
    if accuracy > level:
        verdict = gettext("{ratio:.1f}x chance").format(ratio=accuracy / level)
    elif accuracy == level:
        verdict = gettext("exactly chance: the model has not learned yet")
    else:
        verdict = gettext("below chance: the model has not learned yet (train longer or larger)")
    return gettext(
        "{what} accuracy {accuracy:.3f}: {verdict} (chance {level:.3f} with {classes} classes)"
    ).format(what=gettext(what), accuracy=accuracy, verdict=verdict, level=level, classes=classes)


def read_metrics(record: Mapping[str, Any]) -> dict[str, Any]:
    """The chief's ``metrics.json`` of a recorded run (its ``metrics_file``)."""
    path = record.get("metrics_file")
    if not path or not Path(path).is_file():
        raise FileNotFoundError(f"the run's metrics file {path!r} is missing: rerun its notebook")
    return json.loads(Path(path).read_text())


def global_batch(metrics: Mapping[str, Any]) -> int:
    return int(metrics["config"]["batch_size"]) * int(metrics["replicas"])


def speedup(baseline: Mapping[str, Any], run: Mapping[str, Any]) -> str:
    """The multi-worker run's training images/s against the baseline's, as a ratio."""
    base, mine = baseline.get("images_per_sec"), run.get("images_per_sec")
    if not base or not mine:
        return gettext("images/s: not measured for both runs")
    ratio = mine / base
    return gettext(
        "images/s: {mine:.1f} with {replicas} replicas vs {base:.1f} for the baseline: "
        "{ratio:.2f}x ({verdict})"
    ).format(
        mine=mine,
        replicas=run.get("replicas"),
        base=base,
        ratio=ratio,
        verdict=gettext("faster") if ratio > 1 else gettext("not faster"),
    )


def batch_comparison(baseline_metrics: Mapping[str, Any], run_metrics: Mapping[str, Any]) -> str:
    """Global batch and steps per epoch of both runs: same updates per epoch, or not."""
    gb_base, gb_run = global_batch(baseline_metrics), global_batch(run_metrics)
    steps_base = baseline_metrics.get("steps_per_epoch")
    steps_run = run_metrics.get("steps_per_epoch")
    same = gb_base == gb_run
    return gettext(
        "global batch: baseline {gb_base} (1 replica x {batch_base}), multi-worker {gb_run} "
        "({replicas} replicas x {batch_run}); steps per epoch: {steps_base} vs {steps_run}"
    ).format(
        gb_base=gb_base,
        batch_base=baseline_metrics["config"]["batch_size"],
        gb_run=gb_run,
        replicas=run_metrics["replicas"],
        batch_run=run_metrics["config"]["batch_size"],
        steps_base=steps_base,
        steps_run=steps_run,
    ) + (
        gettext(": both runs make the same updates per epoch")
        if same and steps_base == steps_run
        else gettext(": the runs make different updates per epoch, so compare accuracy with care")
    )


def model_location(record: Mapping[str, Any]) -> str:
    """Where the run's SavedModel is, after checking it is there."""
    savedmodel = Path(str(record["model_dir"])) / "savedmodel"
    if (
        not str(record["model_dir"]).startswith("gs://")
        and not (savedmodel / "saved_model.pb").is_file()
    ):
        raise FileNotFoundError(f"no SavedModel at {savedmodel}: the save did not happen")
    return gettext("model: {path}").format(path=savedmodel)


def summary_lines(results: Mapping[str, Any], classes: int) -> list[str]:
    """What notebook 03 did, from the run's recorded results."""
    lines = []
    mwms, preemption = results.get("mwms"), results.get("preemption")
    if mwms:
        epochs = mwms.get("epochs_run") or []
        template = (
            N_(
                "trained on {workers} workers ({replicas} replicas in sync), epochs {epochs} in "
                "the restarted job"
            )
            if epochs
            else N_(
                "trained on {workers} workers ({replicas} replicas in sync); the restarted job "
                "ran no epoch"
            )
        )
        lines.append(
            gettext(template).format(
                workers=mwms.get("workers", mwms.get("replicas")),
                replicas=mwms.get("replicas"),
                epochs=_epochs(epochs),
            )
        )
    if preemption:
        if preemption.get("resumed_from_step"):
            lines.append(
                gettext(
                    "{replica} was preempted after step {fault_step} of {total_steps}; the "
                    "restarted job resumed from the backup at epoch {epoch}, step {step} and ran "
                    "the other {steps_run} steps"
                ).format(
                    replica=preemption["failed_replica"],
                    fault_step=preemption["fault_step"],
                    total_steps=preemption["total_steps"],
                    epoch=preemption["resumed_epoch"],
                    step=preemption["resumed_step_in_epoch"],
                    steps_run=preemption["steps_run"],
                )
            )
        else:
            lines.append(
                gettext("the restarted job did NOT resume from a backup: it started afresh")
            )
    if mwms:
        lines.append(model_location(mwms))
        lines.append(accuracy_vs_chance(mwms.get("val_accuracy"), classes))
        if results.get("baseline"):
            lines.append(speedup(results["baseline"], mwms))
    return lines


def _epochs(epochs: Sequence[int]) -> str:
    """1-based epoch numbers joined by the edition's list separator (zh-CN: 、)."""
    # TRANSLATORS: the separator between the items of a list of numbers
    return gettext(", ").join(str(e + 1) for e in epochs)


def print_lines(lines: Sequence[str]) -> None:
    for line in lines:
        print(f"- {line}")
