"""Measuring in child processes: one process per timed run, its peak RSS reported with it.

Why child processes: peak RSS is a per-process high-water mark (`ru_maxrss`), so comparing
two pipelines' memory needs each in its own process; and a fresh process per run keeps
one variant's TensorFlow caches and thread pools from helping or hurting the next.

A child runs ``python -m bench.measure MODULE:FUNCTION JSON_KWARGS``; the function returns
a dict of numbers, and the child prints it (plus ``peak_rss_mb`` and ``baseline_rss_mb``)
as the last stdout line after ``RESULT_MARKER``.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from labkit.cloud.paths import REPO_ROOT

RESULT_MARKER = "BENCH_RESULT "
QUIET_TF_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}


class BenchError(RuntimeError):
    """A benchmark run failed; the message carries the child's last output lines."""


@dataclasses.dataclass
class BenchContext:
    """What every section gets: the size of the run and where the shared inputs are."""

    quick: bool
    repeats: int | None  # runs per variant; None: each section's own default (1 when quick)
    tfds_data_dir: Path  # the cached JPEG set, prepared as TFDS `cassava`
    images_dir: Path  # the same JPEGs in the zip layout
    train_images: int
    scratch: Path  # per-run outputs (models, logs), under bench_home()
    deadline: float | None = None  # time.monotonic() by which the whole bench should end

    def repeats_for(self, section_default: int) -> int:
        """``--repeats`` when given, else 1 for a quick run, else the section's default."""
        if self.repeats is not None:
            return self.repeats
        return 1 if self.quick else section_default

    def seconds_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def current_rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def median(values: Sequence[float | None]) -> float | None:
    """Median of the runs that produced a number (None when none did)."""
    numbers = [v for v in values if v is not None]
    return statistics.median(numbers) if numbers else None


def spread(values: Sequence[float | None]) -> dict[str, float | int | None]:
    """How far the runs of one figure lie apart: ``{"min", "max", "n"}`` over the runs with a
    number (issue 21: a figure is its median and its spread, so a run near a target's line
    shows whether it is a coin toss)."""
    numbers = [v for v in values if v is not None]
    if not numbers:
        return {"min": None, "max": None, "n": 0}
    return {"min": min(numbers), "max": max(numbers), "n": len(numbers)}


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def check(name: str, value: float | None, target: str, met: bool | None) -> dict[str, Any]:
    """One target line of the report: the measured value, the target in words, met or not."""
    return {"name": name, "value": value, "target": target, "met": met}


def section(
    status: str = "ok",
    *,
    params: Mapping[str, Any] | None = None,
    summary: Mapping[str, Any] | None = None,
    checks: Sequence[Mapping[str, Any]] = (),
    runs: Sequence[Mapping[str, Any]] = (),
    notes: Sequence[str] = (),
    wall_s: float | None = None,
    spreads: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The JSON shape every section returns (`status` is "ok", "skipped: ..." or "error: ...").

    ``spread`` has, per summary figure measured more than once, its runs' ``min``/``max``/``n``
    (a ratio's spread is over the ratios of runs taken side by side, repeat by repeat).
    """
    return {
        "status": status,
        "params": dict(params or {}),
        "summary": dict(summary or {}),
        "spread": {k: dict(v) for k, v in (spreads or {}).items()},
        "checks": [dict(c) for c in checks],
        "runs": [dict(r) for r in runs],
        "notes": list(notes),
        "wall_s": wall_s,
    }


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment, the repo on PYTHONPATH (bench is not an installed package), TF quiet."""
    env = dict(os.environ)
    env.pop("TF_CONFIG", None)
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = f"{REPO_ROOT}{os.pathsep}{path}" if path else str(REPO_ROOT)
    env.update(QUIET_TF_ENV)
    env.update(extra or {})
    return env


def run_child(
    target: str,
    kwargs: Mapping[str, Any],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> dict[str, Any]:
    """Run ``target`` ("module:function") with ``kwargs`` in a fresh Python; return its dict.

    The result also has ``peak_rss_mb`` (the child's high-water mark), ``baseline_rss_mb``
    (its RSS after imports, before the function ran) and ``process_wall_s``.
    """
    command = [sys.executable, "-m", "bench.measure", target, json.dumps(dict(kwargs))]
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command,
            cwd=REPO_ROOT,
            env=child_env(env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise BenchError(f"{target} did not finish within {timeout:.0f} s") from None
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_MARKER)]
    if done.returncode != 0 or not lines:
        tail = "\n".join((done.stdout + "\n" + done.stderr).strip().splitlines()[-15:])
        raise BenchError(f"{target} exited with {done.returncode}:\n{tail}")
    result = json.loads(lines[-1][len(RESULT_MARKER) :])
    result["process_wall_s"] = time.perf_counter() - started
    return result


def _child_main(argv: Sequence[str]) -> int:
    if len(argv) != 2 or ":" not in argv[0]:
        print("usage: python -m bench.measure MODULE:FUNCTION JSON_KWARGS", file=sys.stderr)
        return 2
    module_name, function_name = argv[0].split(":", 1)
    kwargs = json.loads(argv[1])
    function = getattr(importlib.import_module(module_name), function_name)
    baseline = current_rss_mb()
    result = dict(function(**kwargs))
    result["peak_rss_mb"] = peak_rss_mb()
    result.setdefault("baseline_rss_mb", baseline)
    print(RESULT_MARKER + json.dumps(result), flush=True)
    return 0


def ensure_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
