"""Benchmarks of the kit against the codelab's own code (`python -m bench`).

Each section module (`pipeline`, `training`, `scaling`, `lab`) exposes
``run(ctx: BenchContext) -> dict`` returning one section of `bench/results/latest.json`;
`bench.gpu` is a separate script for a machine with a GPU. Timings run in child
processes (`bench.measure`) so each figure carries its own peak memory and no section
pays for another's TensorFlow state.
"""

from __future__ import annotations

from pathlib import Path

from labkit.cloud.paths import REPO_ROOT, lab_home

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
SECTIONS = ("pipeline", "training", "scaling", "service", "lab")


def bench_home() -> Path:
    """Cached JPEG sets and scratch outputs: ``LAB_HOME/bench`` (gitignored with `.lab/`)."""
    return lab_home() / "bench"


__all__ = ["BENCH_DIR", "REPO_ROOT", "RESULTS_DIR", "SECTIONS", "bench_home"]
