"""Notebook 04's exercise: the learner writes ``worker_pool_specs`` as the codelab does.

The codelab's section 7 has the learner type a list of two dicts (``replica_count``,
``machine_spec``, ``container_spec.image_uri``); the kit's builder
(`labkit.cloud.specs.build_worker_pool_specs`) is the solution and the yardstick, and the
job-spec validator (`labkit.cloud.specs.validate_worker_pool_specs`, what the local Vertex AI
service and the console page refuse with) finds what Vertex would refuse. The check sorts
what it finds into the six things a learner gets wrong, one line each, and gives the hint of
the first that fails: the chief's pool, the workers' pool, machines Vertex accepts, the
same GPUs everywhere, the image built in step 3, the trainer's arguments. Lines and hints
are in the active edition; the validator's own problems and fixes (`labkit.cloud.specs`)
are still English inside them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from labkit.cloud import specs
from labkit.cloud.settings import Settings
from labkit.course.exercises.checks import FAIL, PASS, Outcome
from labkit.i18n import gettext
from trainer.config import args_for

NAME = "worker_pool_specs"


@dataclasses.dataclass(frozen=True)
class Expected:
    """What the pools must hold, from the notebook's settings and size knobs."""

    image_uri: str
    workers: int  # replicas of pool 1 (the machines but the chief)
    machine_spec: dict[str, Any]
    args: list[str]


def solution(settings: Settings, knobs: dict[str, Any]) -> list[dict[str, Any]]:
    """The kit's ``worker_pool_specs`` for these settings and knobs (what ``SOLVED`` runs)."""
    return specs.build_job(
        settings,
        args=args_for(**knobs),
        workers=knobs["workers"] - 1,
        machine_type=knobs["machine_type"],
        accelerator_type=knobs["accelerator_type"],
        accelerator_count=knobs["accelerator_count"] or 0,
    ).worker_pool_specs


def expected_from(solution_specs: list[dict[str, Any]]) -> Expected:
    chief = solution_specs[0]
    workers = solution_specs[1]["replica_count"] if len(solution_specs) > 1 else 0
    container = chief["container_spec"]
    return Expected(
        container["image_uri"], workers, chief["machine_spec"], list(container.get("args", []))
    )


def _pools(value: Any) -> list[dict[str, Any]]:
    """The dict pools of the learner's list (an empty pool, ``{}``, as Vertex skips it)."""
    if not isinstance(value, list):
        return []
    return [pool for pool in value if isinstance(pool, dict) and pool]


def _part(pool: dict[str, Any], key: str) -> dict[str, Any]:
    part = pool.get(key)
    return part if isinstance(part, dict) else {}


Case = Callable[[Any, list[specs.Problem], Expected], tuple[str, str]]


def _first(problems: Sequence[specs.Problem], keep: Callable[[specs.Problem], bool]) -> str:
    """The first matching problem as a hint (message and fix), or "" when there is none."""
    found = [p for p in problems if keep(p)]
    return found[0].text() if found else ""


def _is_gpu_mismatch(problem: specs.Problem) -> bool:
    return problem.field.endswith("].machine_spec.accelerator_count") and not problem.vertex_rejects


def _chief(value: Any, problems: list[specs.Problem], expected: Expected) -> tuple[str, str]:
    label = gettext("pool 0 is the chief: one replica")
    hint = _first(problems, lambda p: p.field in (NAME, f"{NAME}[0]", f"{NAME}[0].replica_count"))
    if not hint and not _pools(value):
        hint = gettext(
            "worker_pool_specs is empty: write pool 0, the chief, as a dict with "
            '"replica_count": 1, a "machine_spec" and a "container_spec".'
        )
    return label, hint


def _workers(value: Any, problems: list[specs.Problem], expected: Expected) -> tuple[str, str]:
    label = gettext("pool 1 holds the workers: {n} replica(s)").format(n=expected.workers)
    pools = _pools(value)
    got = pools[1].get("replica_count") if len(pools) > 1 else None
    if expected.workers and len(pools) < 2:
        return label, gettext(
            "there is no worker pool: MultiWorkerMirroredStrategy trains on the chief and the "
            'workers, so add pool 1 with "replica_count": WORKERS - 1 and the same '
            "machine_spec and container_spec as the chief."
        )
    if expected.workers and got != expected.workers:
        return label, gettext(
            "pool 1 has replica_count {got}: the cluster is WORKERS = {machines} machines, the "
            "chief and {workers} worker(s), so use WORKERS - 1."
        ).format(got=repr(got), machines=expected.workers + 1, workers=expected.workers)
    return label, ""


def _machines(value: Any, problems: list[specs.Problem], expected: Expected) -> tuple[str, str]:
    label = gettext("machines Vertex AI accepts, the ones you chose")
    hint = _first(problems, lambda p: ".machine_spec" in p.field and not _is_gpu_mismatch(p))
    if hint:
        return label, hint
    wanted = expected.machine_spec
    for index, pool in enumerate(_pools(value)):
        got = _part(pool, "machine_spec")
        if got.get("machine_type") != wanted["machine_type"]:
            return label, gettext(
                "pool {index} asks for {got}: use MACHINE_TYPE ({wanted}), the machine this "
                "lab's cost and time are for."
            ).format(
                index=index, got=repr(got.get("machine_type")), wanted=repr(wanted["machine_type"])
            )
        if got.get("accelerator_type") != wanted.get("accelerator_type"):
            return label, gettext(
                "pool {index} has accelerator_type {got}: use ACCELERATOR_TYPE ({wanted}); with "
                "no GPU, leave accelerator_type and accelerator_count out."
            ).format(
                index=index,
                got=repr(got.get("accelerator_type")),
                wanted=repr(wanted.get("accelerator_type")),
            )
    return label, ""


def _gpus(value: Any, problems: list[specs.Problem], expected: Expected) -> tuple[str, str]:
    return gettext("the same GPUs on every machine"), _first(problems, _is_gpu_mismatch)


def _image(value: Any, problems: list[specs.Problem], expected: Expected) -> tuple[str, str]:
    label = gettext("the image built in step 3")
    hint = _first(problems, lambda p: p.field.endswith("container_spec.image_uri"))
    if hint:
        return label, hint
    for index, pool in enumerate(_pools(value)):
        got = _part(pool, "container_spec").get("image_uri")
        if got != expected.image_uri:
            return label, gettext(
                "pool {index} runs {got}, not the image of step 3: set "
                '"container_spec": {{"image_uri": IMAGE_URI, ...}} in every pool.'
            ).format(index=index, got=repr(got))
    return label, ""


def _args(value: Any, problems: list[specs.Problem], expected: Expected) -> tuple[str, str]:
    label = gettext("the trainer's arguments in every pool")
    for index, pool in enumerate(_pools(value)):
        got = _part(pool, "container_spec").get("args")
        if got != expected.args:
            return label, gettext(
                "pool {index} passes args {got}: give every container_spec "
                '"args": TRAINER_ARGS, the options the trainer reads (every replica must '
                "train the same way)."
            ).format(index=index, got=repr(got))
    return label, ""


# GPUs before machines: pools that differ get the MWMS hint, not "use ACCELERATOR_TYPE"
CASES: tuple[Case, ...] = (_chief, _workers, _gpus, _machines, _image, _args)


def review(value: Any, expected: Expected) -> Outcome:
    """One line per case (the first case's hint when it fails, else the next failing one)."""
    problems = specs.validate_worker_pool_specs(value)
    lines, hint = [], ""
    for case in CASES:
        label, problem = case(value, problems, expected)
        # no pool written yet: nothing below the chief's line can be right either
        failed = bool(problem) or not _pools(value)
        lines.append(f"{FAIL if failed else PASS} {label}")
        hint = hint or problem
    return Outcome(NAME, not hint, lines, hint, unit="checks")


def check(
    value: Any, settings: Settings, knobs: dict[str, Any], *, solved: bool | None = False
) -> Any:
    """Check the learner's ``worker_pool_specs`` (or, with ``solved``, the kit's) and return
    the list to submit from here on; a failure prints the hint and returns the learner's."""
    kit = solution(settings, knobs)
    if solved:
        value = kit
        print(
            gettext("SOLVED = True: checking the kit's solution (read it: {how})").format(
                how="exercises.pools.solution(settings, knobs)"
            )
        )
    outcome = review(value, expected_from(kit))
    print(outcome)
    if solved and not outcome.passed:
        raise AssertionError(f"the kit's worker_pool_specs fail their own check:\n{outcome}")
    return value
