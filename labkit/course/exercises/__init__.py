"""Exercises: the learner writes the MWMS trainer (notebook 03), its Dockerfile and the
job's ``worker_pool_specs`` (04, `labkit.course.exercises.pools`).

One source for every edition of the notebooks: an exercise cell holds the learner's code
(blank at first), the check cell after it calls `check`, which runs that code on the cases
a real cluster produces and prints a pass or a hint. The notebooks' ``SOLVED`` parameter
(False for a learner; True in CI and `make lab`) makes `check` use the kit's solution
(`labkit.course.exercises.solutions`, checked the same way) instead, so the solved path runs end
to end. A stuck learner reads one solution with `show_solution`.

    _is_chief = exercises.check(_is_chief, solved=SOLVED)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from labkit.course.exercises import checks, dockerfile, pools
from labkit.course.exercises.checks import Outcome
from labkit.course.exercises.compare import side_by_side
from labkit.course.exercises.trainer import check_run, run_trainer, write_trainer
from labkit.i18n import gettext

__all__ = [
    "Outcome",
    "check",
    "check_run",
    "dockerfile",
    "names",
    "pools",
    "run_trainer",
    "show_kit",
    "show_solution",
    "side_by_side",
    "solution",
    "solutions",
    "template_task",
    "write_trainer",
]


def __getattr__(name: str) -> Any:
    """`solutions` and `template_task` import TensorFlow: loaded on first use only."""
    if name in ("solutions", "template_task"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def names() -> list[str]:
    """The exercises of notebook 03, in the order the notebook asks for them."""
    return list(checks.CHECKS)


def solution(name: str) -> Callable:
    """The kit's solution of one exercise (a function of `labkit.course.exercises.solutions`)."""
    if name not in checks.CHECKS:
        raise KeyError(f"no exercise {name!r}; the exercises are {names()}")
    return getattr(importlib.import_module(f"{__name__}.solutions"), name)


def show_solution(name: str) -> Any:
    """The solution's source, to read when stuck (what `SOLVED = True` runs)."""
    from labkit.course.exercises.trainer import function_source
    from labkit.course.views import Code

    return Code(function_source(solution(name)))


def show_kit(*functions: Callable) -> Any:
    """The kit's own trainer functions, each whole with its file and line, one after another.

    Notebook 03 shows the kit's step beside each exercise this way (`trainer.train.run`'s
    outline, then the step), read from the package itself, never a copy.
    """
    from labkit.course.views import Code, show_source

    return Code("\n\n".join(show_source(fn).text for fn in functions))


def check(fn: Any, *, solved: bool = False, quiet: bool = False) -> Any:
    """Check the learner's function and return the one to use from here on.

    ``solved=False``: the learner's own function is checked and returned, pass or not; a
    failure prints a hint, never raises. ``solved=True``: the kit's solution of the same
    exercise is checked and returned instead; it must pass (CI fails otherwise).
    """
    name = getattr(fn, "__name__", None)
    if name not in checks.CHECKS:
        print(
            gettext(
                "{name} is not one of the exercises ({names}): keep the def's name as given"
            ).format(name=name or repr(fn), names=", ".join(names()))
        )
        return fn
    if solved:
        fn = solution(name)
    outcome = checks.CHECKS[name](fn)
    if not quiet:
        if solved:
            print(
                gettext("SOLVED = True: checking the kit's solution (read it: {how})").format(
                    how=f"exercises.show_solution({name!r})"
                )
            )
        print(outcome)
    if solved and not outcome.passed:
        raise AssertionError(f"the kit's solution of {name} fails its own check:\n{outcome}")
    return fn
