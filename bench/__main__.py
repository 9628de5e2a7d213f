"""`python -m bench [--only pipeline,training,...] [--quick]`: run the sections, print one table.

Results go to `bench/results/latest.json` (`quick.json` with --quick, so a smoke run never
replaces a full one), rewritten after every section so an interrupted run keeps what it
measured. The exit status is 1 when a section failed to run; an unmet target is a
result, not a failure.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import RESULTS_DIR, SECTIONS, bench_home
from bench.dataset import ensure_bench_data
from bench.measure import BenchContext, ensure_dir, section
from bench.report import format_table, machine_info

# Issue 21: every variant 3 times takes 25-45 minutes on 2 shared cores; no section starts
# after the budget (the lab is not in the default run: `--only lab`, about 15 minutes).
DEFAULT_BUDGET_S = 60 * 60
# `python -m bench` without --only: the measured sections; the lab's notebooks (one run,
# 10-15 minutes) only when named.
DEFAULT_SECTIONS = tuple(name for name in SECTIONS if name != "lab")
# Issue 6: the ratios (kit / baseline, from medians) results JSON carries at its top level.
RATIO_KEYS = {
    "pipeline": ("throughput_ratio", "peak_rss_ratio", "cached_epoch_ratio"),
    "training": ("ratio_64", "ratio_128"),
    "scaling": ("ratio",),
    "service": ("ratio_to_http_server",),  # bench/service.py: the local service's start
}
SHARED_MACHINE_NOTE = (
    "Absolute times depend on what else the machine runs (see meta.load_average); "
    "ratios are measured side by side, variants alternating, and are the figures to compare."
)


def parse_sections(text: str | None) -> list[str]:
    """`--only a,b` -> those sections in the bench's order; unknown names are an error."""
    if not text:
        return list(DEFAULT_SECTIONS)
    wanted = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in SECTIONS]
    if unknown:
        raise ValueError(
            f"unknown section(s) {unknown} in --only: choose from {', '.join(SECTIONS)}"
        )
    return [name for name in SECTIONS if name in wanted]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmarks of the kit against the codelab's own code: input pipeline, "
        "training, 1 vs 2 local workers, and the notebooks' wall time.",
    )
    parser.add_argument(
        "--only",
        help=f"comma-separated sections of {', '.join(SECTIONS)} "
        f"(default: {', '.join(DEFAULT_SECTIONS)})",
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes and one repeat: a smoke run in ~2 minutes"
    )
    parser.add_argument(
        "--repeats",
        type=int,
        help="runs per variant for every section (default: 3 for pipeline, training and "
        "scaling, 5 service starts; 1 with --quick)",
    )
    parser.add_argument("--out", type=Path, help="results JSON (default bench/results/latest.json)")
    parser.add_argument(
        "--budget-s",
        type=float,
        default=DEFAULT_BUDGET_S,
        help="time budget of the whole run: no section starts after it, the lab gets what is left",
    )
    return parser


def run_section(name: str, ctx: BenchContext) -> dict[str, Any]:
    """One section; an exception becomes an "error: ..." section, not a crash of the bench.

    A section is not started once the time budget is spent: on a machine too busy to finish
    in time, the table says which sections were skipped rather than the run overrunning.
    """
    left = ctx.seconds_left()
    if left is not None and left <= 0:
        return section(f"skipped: time budget spent ({-left:.0f} s over)", wall_s=0.0)
    module = importlib.import_module(f"bench.{name}")
    started = time.perf_counter()
    try:
        result = module.run(ctx)
    except Exception as err:
        trace = traceback.format_exc(limit=3)
        result = section(f"error: {type(err).__name__}: {err}", notes=[trace])
    if result.get("wall_s") is None:
        result["wall_s"] = time.perf_counter() - started
    return result


def collect_ratios(sections: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """``{"pipeline.throughput_ratio": ..., ...}`` for the sections that ran (None: no figure)."""
    ratios: dict[str, float | None] = {}
    for name, keys in RATIO_KEYS.items():
        if name in sections:
            summary = sections[name].get("summary", {})
            ratios.update({f"{name}.{key}": summary.get(key) for key in keys})
    return ratios


def collect_targets(sections: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every section's targets in one list: name, value, target, met."""
    return [dict(c) for result in sections.values() for c in result.get("checks", [])]


def write_results(path: Path, payload: dict[str, Any]) -> None:
    ensure_dir(path.parent)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    tmp.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        names = parse_sections(args.only)
    except ValueError as err:
        parser.error(str(err))
    repeats = args.repeats
    if repeats is not None and repeats < 1:
        parser.error(f"--repeats must be at least 1, got {repeats}")
    out = args.out or RESULTS_DIR / ("quick.json" if args.quick else "latest.json")
    started = time.monotonic()
    started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")

    print(f"[bench] preparing the JPEG set under {bench_home()} (cached after the first run)")
    data = ensure_bench_data(quick=args.quick)
    ctx = BenchContext(
        quick=args.quick,
        repeats=repeats,
        tfds_data_dir=data.tfds_data_dir,
        images_dir=data.images_dir,
        train_images=data.split_sizes["train"],
        scratch=ensure_dir(bench_home() / "scratch"),
        deadline=started + args.budget_s,
    )
    payload: dict[str, Any] = {
        "meta": {
            "started": started_at,
            "quick": args.quick,
            "repeats": repeats,  # --repeats (None: each section's default, in repeats_by_section)
            "repeats_by_section": {},
            "command": " ".join(["python -m bench", *(argv if argv is not None else sys.argv[1:])]),
            "sections": names,
            "train_images": ctx.train_images,
            "machine": machine_info(),
            "note": SHARED_MACHINE_NOTE,
        },
        "ratios": {},
        "targets": [],
        "sections": {},
    }
    for name in names:
        print(f"[bench] {name} ...", flush=True)
        result = run_section(name, ctx)
        payload["sections"][name] = result
        params = result.get("params", {})
        payload["meta"]["repeats_by_section"][name] = params.get("repeats", params.get("runs"))
        payload["ratios"] = collect_ratios(payload["sections"])
        payload["targets"] = collect_targets(payload["sections"])
        print(f"[bench] {name}: {result['status']} in {result['wall_s']:.0f} s", flush=True)
        write_results(out, payload)
    payload["meta"]["wall_s"] = time.monotonic() - started
    payload["meta"]["load_average_end"] = machine_info()["load_average"]
    write_results(out, payload)
    print()
    print(format_table(payload["sections"]))
    print(
        f"\n[bench] {payload['meta']['wall_s']:.0f} s in all; load average "
        f"{payload['meta']['machine']['load_average']} -> {payload['meta']['load_average_end']}; "
        f"results in {out}"
    )
    failed = [n for n, r in payload["sections"].items() if r["status"].startswith("error")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
