"""Notebook 04's worker pool exercise: each mistake a learner makes gets its own hint.

The learner writes ``worker_pool_specs`` as the codelab's section 7 does; the check
(`labkit.course.exercises.pools`) passes the kit's own specs and names, for each wrong spec,
the case that fails and how to fix it. The notebook's cells themselves are run in a kernel by
tests/test_exercise_notebooks.py.
"""

from __future__ import annotations

import copy

import pytest

from labkit.cloud.settings import Settings
from labkit.course.exercises import pools

SETTINGS = Settings(mode="local", project_id="local-project", bucket="pool-exercise")
CPU_KNOBS = SETTINGS.knobs(profile="job")
GPU_KNOBS = SETTINGS.knobs(
    profile="job",
    machine_type="n1-standard-8",
    accelerator_type="NVIDIA_TESLA_T4",
    accelerator_count=1,
)


def review(specs, knobs=CPU_KNOBS):
    return pools.review(specs, pools.expected_from(pools.solution(SETTINGS, knobs)))


def kit(knobs=CPU_KNOBS):
    return copy.deepcopy(pools.solution(SETTINGS, knobs))


def failing_lines(outcome):
    return [line[2:] for line in outcome.lines if line.startswith(pools.FAIL)]


def test_the_kits_specs_pass_every_case_with_and_without_gpus():
    for knobs in (CPU_KNOBS, GPU_KNOBS):
        outcome = review(kit(knobs), knobs)
        assert outcome.passed, outcome
        assert len(outcome.lines) == len(pools.CASES)
    assert kit()[0]["container_spec"]["image_uri"] == SETTINGS.image_uri


def test_the_blank_cell_fails_every_case_and_says_to_write_pool_0():
    outcome = review([])
    assert not outcome.passed
    assert len(failing_lines(outcome)) == len(pools.CASES)
    assert "add pool 0 (the chief" in outcome.hint
    assert "hint: " in str(outcome)


def with_pools(change, knobs=CPU_KNOBS):
    specs = kit(knobs)
    for index, pool in enumerate(specs):
        change(index, pool)
    return specs


def set_chief_replicas(index, pool):
    if index == 0:
        pool["replica_count"] = 2


def add_gpu_to_chief_only(index, pool):
    if index == 1:
        pool["machine_spec"] = {"machine_type": "n1-standard-8"}


def drop_accelerator_count(index, pool):
    pool["machine_spec"].pop("accelerator_count")


def placeholder_image(index, pool):
    pool["container_spec"]["image_uri"] = "gcr.io/{YOUR-PROJECT-ID}/multiworker:cassava"


def other_image(index, pool):
    pool["container_spec"]["image_uri"] = "us-docker.pkg.dev/someone-else/repo/trainer:1"


def refused_machine(index, pool):
    pool["machine_spec"]["machine_type"] = "n1-standard4"


def other_machine(index, pool):
    pool["machine_spec"]["machine_type"] = "n1-standard-16"


def no_args(index, pool):
    pool["container_spec"].pop("args")


@pytest.mark.parametrize(
    ("change", "knobs", "case", "hint"),
    [
        (set_chief_replicas, CPU_KNOBS, "pool 0 is the chief", "must have exactly 1 replica"),
        (add_gpu_to_chief_only, GPU_KNOBS, "the same GPUs", "same number of GPUs"),
        (drop_accelerator_count, GPU_KNOBS, "machines Vertex AI accepts", "accelerator_count"),
        (placeholder_image, CPU_KNOBS, "the image built in step 3", "placeholder"),
        (other_image, CPU_KNOBS, "the image built in step 3", "IMAGE_URI"),
        (refused_machine, CPU_KNOBS, "machines Vertex AI accepts", "n1-standard4"),
        (other_machine, CPU_KNOBS, "machines Vertex AI accepts", "use MACHINE_TYPE"),
        (no_args, CPU_KNOBS, "the trainer's arguments", "TRAINER_ARGS"),
    ],
)
def test_each_mistake_fails_its_case_with_its_hint(change, knobs, case, hint):
    outcome = review(with_pools(change, knobs), knobs)
    assert not outcome.passed
    assert failing_lines(outcome)[0].startswith(case), outcome
    assert hint in outcome.hint, outcome


def test_a_missing_worker_pool_names_pool_1():
    outcome = review(kit()[:1])
    assert failing_lines(outcome) == [
        f"pool 1 holds the workers: {CPU_KNOBS['workers'] - 1} replica(s)"
    ]
    assert "there is no worker pool" in outcome.hint and "WORKERS - 1" in outcome.hint


def test_check_returns_the_learners_specs_or_with_solved_the_kits(capsys):
    wrong = with_pools(no_args)
    assert pools.check(wrong, SETTINGS, CPU_KNOBS, solved=None) is wrong
    assert "worker_pool_specs: not yet" in capsys.readouterr().out
    solved = pools.check([], SETTINGS, CPU_KNOBS, solved=True)
    assert solved == kit()
    printed = capsys.readouterr().out
    assert "SOLVED = True" in printed and "worker_pool_specs: passed (6 of 6" in printed
