"""The one table `python -m bench` prints, and the run's metadata (machine, load, versions).

The load average is recorded at the start and end of a run because these timings are only
comparable between runs on a quiet machine; the ratios (measured side by side) hold better.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
from collections.abc import Mapping
from typing import Any

from labkit.cloud.paths import REPO_ROOT

PACKAGES = ("tensorflow", "tf-keras", "tensorflow-datasets", "numpy", "pillow")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def machine_info() -> dict[str, Any]:
    """What the figures were measured on (cores, memory, load now, versions, commit)."""
    import psutil

    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "packages": {p: _version(p) for p in PACKAGES},
        "git_commit": _git_commit(),
    }


def format_value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        magnitude = abs(value)
        if magnitude >= 100:
            return f"{value:.0f}"
        if magnitude >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)


def format_spread(spread: Mapping[str, Any] | None) -> str:
    """``min-max (n)`` of a figure measured in several runs; "" for one run or none."""
    if not spread or (spread.get("n") or 0) < 2:
        return ""
    low, high = format_value(spread.get("min")), format_value(spread.get("max"))
    return f"{low} to {high} (n={spread['n']})"


Row = tuple[str, str, str, str, str, str]
HEADER: Row = ("section", "figure", "median", "spread", "target", "met")


def table_rows(sections: Mapping[str, Mapping[str, Any]]) -> list[Row]:
    """(section, figure, median, spread, target, met) rows: every summary figure, its runs'
    min-max, and targets beside theirs (judged on the median)."""
    rows: list[Row] = []
    for name, result in sections.items():
        checks = {c["name"].split(".", 1)[-1]: c for c in result.get("checks", [])}
        spreads = result.get("spread", {})
        if result.get("status") != "ok":
            rows.append((name, "status", str(result.get("status"))[:70], "", "", ""))
        for figure, value in result.get("summary", {}).items():
            target = checks.pop(figure, None)
            rows.append(
                (
                    name,
                    figure,
                    format_value(value),
                    format_spread(spreads.get(figure)),
                    target["target"] if target else "",
                    _met(target["met"]) if target else "",
                )
            )
        for figure, target in checks.items():  # a target whose figure is not in the summary
            rows.append(
                (
                    name,
                    figure,
                    format_value(target["value"]),
                    format_spread(spreads.get(figure)),
                    target["target"],
                    _met(target["met"]),
                )
            )
    return rows


def _met(met: bool | None) -> str:
    return "n/a" if met is None else ("MET" if met else "NOT MET")


def format_table(sections: Mapping[str, Mapping[str, Any]]) -> str:
    header = HEADER
    rows = [header, *table_rows(sections)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# Figures bench/README.md's "Measured" table shows besides the targets (section, figure).
README_FIGURES = (
    ("pipeline", "codelab.peak_rss_mb"),
    ("pipeline", "kit.peak_rss_mb"),
    ("pipeline", "rss_growth_ratio"),
    ("pipeline", "codelab.rss.import_floor_mb"),
    ("pipeline", "codelab.rss.shuffle_buffer_mb"),
    ("pipeline", "codelab.rss.decode_prefetch_other_mb"),
    ("pipeline", "kit.rss.shuffle_buffer_mb"),
    ("pipeline", "kit.rss.cache_mb"),
    ("pipeline", "kit.rss.decode_prefetch_other_mb"),
    ("pipeline", "codelab.epoch1_images_per_s"),
    ("pipeline", "codelab.epoch2_images_per_s"),
    ("pipeline", "kit.epoch1_images_per_s"),
    ("pipeline", "kit.epoch2_images_per_s"),
    ("pipeline", "decode_ceiling.images_per_s"),
    ("pipeline", "throughput_ceiling_ratio"),
    ("pipeline", "kit_nocache.throughput_ratio"),
    ("pipeline", "replay_ceiling.images_per_s"),
    ("pipeline", "cached_epoch_ceiling_ratio"),
    ("pipeline", "kit_disk.peak_rss_ratio"),
    ("pipeline", "kit_disk.cached_epoch_ratio"),
    ("pipeline", "kit_nocache.peak_rss_ratio"),
    ("pipeline", "kit_nocache.cached_epoch_ratio"),
    ("scaling", "allreduce_s_per_step_est"),
)


def markdown_table(payload: Mapping[str, Any]) -> str:
    """bench/README.md's table of a results file: every target, then `README_FIGURES`, each
    with its median and spread (`python -m bench.report FILE` prints it; a test keeps the
    README's copy equal to the committed latest.json's)."""
    rows = table_rows(payload.get("sections", {}))
    targets = [row for row in rows if row[4]]
    wanted = set(README_FIGURES)
    others = sorted(
        (row for row in rows if (row[0], row[1]) in wanted and not row[4]),
        key=lambda row: README_FIGURES.index((row[0], row[1])),
    )
    lines = [
        "| section | figure | median | spread | target | met |",
        "|---|---|---|---|---|---|",
    ]
    for section_name, figure, median, spread, target, met in [*targets, *others]:
        lines.append(
            f"| {section_name} | `{figure}` | {median} | {spread} | {target or 'reported'} "
            f"| {met} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    import json
    import sys
    from pathlib import Path

    print(markdown_table(json.loads(Path(sys.argv[1]).read_text())))
