"""Every duration the docs state comes from a measurement in the repository, or is the codelab's.

A learner plans an afternoon from "about N minutes". So the figures in the notebooks'
Markdown (English and every translated edition) and in README.md are checked against
``bench/measurements.json``: each entry there is one measurement (or range of runs) with the
machine it was measured on, the date, how, and the places allowed to quote it. A duration
in a paragraph or table row is backed when

- the paragraph/row labels it as the codelab's own figure (it says "codelab") and it is one
  of the codelab's figures (`CODELAB_FIGURES`: the job's 30-35 minutes, the 60 minutes of
  idle shutdown, the "few minutes" an instance takes to provision), or
- a measurement listed for that place matches it: the stated value or range, widened by 20%
  and half a unit (208 s backs "about 3.5 minutes"), overlaps the measured one.

`problems` lists every duration without such backing, naming the file, cell and text;
tests/test_durations.py fails on any.

Refreshing after the notebooks change (the local lab's times move with them), one command::

    python -m labkit durations refresh        # = python -m labkit lab, then record its run

or in steps, after a `make lab` that already ran::

    python -m labkit durations record         # newest runs/<stamp>/: per-notebook times
    python -m labkit durations check          # what the docs now state wrongly, if anything

``record`` reads each executed notebook's wall time (papermill's ``duration``) from the run
folder, writes them into ``bench/measurements.json`` with this machine's cores, memory and
GPU and today's date, and rewrites README.md's "Per notebook in the last `make lab`" line
from them; ``check`` then names any prose figure the new times no longer back.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from labkit.cloud import paths
from labkit.course import lab

MEASUREMENTS_FILE = paths.REPO_ROOT / "bench" / "measurements.json"
README = paths.REPO_ROOT / "README.md"
NOTEBOOK_DIR = lab.NOTEBOOK_DIR
LAB_NOTEBOOKS = lab.NOTEBOOKS  # one list of the lab's notebooks, the lab runner's
PER_NOTEBOOK_LINE = re.compile(r"^Per notebook in the last `make lab`[^\n]*$", re.M)

# The codelab's own figures (seed text, zh-CN): (low s, high s, what, its words).
CODELAB_FIGURES: tuple[tuple[float, float, str, str], ...] = (
    (30 * 60, 35 * 60, "the training job (section 6)", "训练作业大约需要 30-35 分钟才能完成"),
    (60 * 60, 60 * 60, "idle shutdown of the Workbench instance", "将分钟数设置为 60"),
    (60, 10 * 60, "provisioning the Workbench instance", "预配实例需要几分钟时间"),
)
CODELAB_LABELS = ("codelab", "代码实验室")

UNIT_SECONDS = {"s": 1, "min": 60, "h": 3600}
_UNITS = {
    "s": "s",
    "sec": "s",
    "secs": "s",
    "second": "s",
    "seconds": "s",
    "秒": "s",
    "min": "min",
    "mins": "min",
    "minute": "min",
    "minutes": "min",
    "分钟": "min",
    "h": "h",
    "hr": "h",
    "hrs": "h",
    "hour": "h",
    "hours": "h",
    "小时": "h",
}
_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "ten": 10,
    "half an": 0.5,
    "half a": 0.5,
    "一": 1,
    "两": 2,
    "二": 2,
    "三": 3,
}
_VAGUE = {"a few": (1, 10), "几": (1, 10), "several": (2, 10), "a couple of": (2, 3)}
_NUMBER = r"\d+(?:\.\d+)?"
_WORD = "|".join(sorted(map(re.escape, _WORDS), key=len, reverse=True))
_VAGUE_RE = "|".join(sorted(map(re.escape, _VAGUE), key=len, reverse=True))
_LONG_UNIT = r"seconds?|secs?|minutes?|mins?|hours?|hrs?|秒|分钟|小时"
DURATION = re.compile(
    rf"(?P<lead>under|less than|within|up to|over|more than|不到|少于)?\s*"
    rf"(?:(?P<lo>{_NUMBER})(?:\s*(?:-|–|to|至)\s*(?P<hi>{_NUMBER}))?\s*"
    rf"(?P<unit>{_LONG_UNIT}|s|min|h)(?![A-Za-z0-9_])"
    rf"|(?<![A-Za-z0-9_])(?P<word>{_WORD})\s*(?P<wunit>{_LONG_UNIT})(?![A-Za-z0-9_])"
    rf"|(?<![A-Za-z0-9_])(?P<vague>{_VAGUE_RE})\s*(?:个)?\s*(?P<vunit>{_LONG_UNIT})(?![A-Za-z0-9_]))",
    re.I,
)


@dataclasses.dataclass(frozen=True)
class Duration:
    """A duration as stated: its words and the range of seconds they claim."""

    text: str
    low_s: float
    high_s: float
    unit_s: float


@dataclasses.dataclass(frozen=True)
class Problem:
    place: str  # file, cell
    text: str  # the duration as written
    context: str  # the paragraph or table row
    reason: str

    def __str__(self) -> str:
        return f"{self.place}: {self.text!r} {self.reason} -- in: {self.context[:160]!r}"


# --------------------------------------------------------------------------- reading text


def find_durations(text: str) -> list[Duration]:
    """Durations in prose: "208 s", "about 3-4 minutes", "under a minute", "30-35 分钟"."""
    found = []
    for m in DURATION.finditer(text):
        lead = (m.group("lead") or "").lower()
        if m.group("lo"):
            unit = UNIT_SECONDS[_UNITS[m.group("unit").lower()]]
            low = float(m.group("lo")) * unit
            high = float(m.group("hi") or m.group("lo")) * unit
        elif m.group("word"):
            unit = UNIT_SECONDS[_UNITS[m.group("wunit").lower()]]
            low = high = _WORDS[m.group("word").lower()] * unit
        else:
            unit = UNIT_SECONDS[_UNITS[m.group("vunit").lower()]]
            a, b = _VAGUE[m.group("vague").lower()]
            low, high = a * unit, b * unit
        if lead in {"under", "less than", "within", "up to", "不到", "少于"}:
            low = 0.0
        elif lead in {"over", "more than"}:
            high = float("inf")
        found.append(Duration(m.group(0).strip(), low, high, unit))
    return found


def _strip_code(markdown: str) -> str:
    """Fenced blocks and inline code are commands, not claims."""
    without_fences = re.sub(r"```.*?```", "", markdown, flags=re.S)
    return re.sub(r"`[^`\n]*`", "", without_fences)


def blocks(markdown: str) -> Iterator[str]:
    """Paragraphs and table rows (a row is its own block: each row states its own figures)."""
    paragraph: list[str] = []
    for line in _strip_code(markdown).splitlines():
        if line.lstrip().startswith("|"):
            if paragraph:
                yield " ".join(paragraph)
                paragraph = []
            yield line
        elif not line.strip() or line.lstrip().startswith("#"):
            if paragraph:
                yield " ".join(paragraph)
                paragraph = []
        else:
            paragraph.append(line.strip())
    if paragraph:
        yield " ".join(paragraph)


# --------------------------------------------------------------------------- measurements


def load_measurements(path: Path = MEASUREMENTS_FILE) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def measured_range(entry: Mapping[str, Any]) -> tuple[float, float]:
    seconds = entry["seconds"]
    if isinstance(seconds, (list, tuple)):
        return float(seconds[0]), float(seconds[1])
    return float(seconds), float(seconds)


def _widened(duration: Duration) -> tuple[float, float]:
    slack = duration.unit_s / 2
    return duration.low_s * 0.8 - slack, duration.high_s * 1.2 + slack


def backs(entry: Mapping[str, Any], duration: Duration) -> bool:
    low, high = _widened(duration)
    m_low, m_high = measured_range(entry)
    return m_low <= high and m_high >= low


def is_codelab_figure(duration: Duration) -> bool:
    """The stated figure is one of the codelab's: both ends within 20% and half a unit
    ("0.55 hours" is the job's 30-35 minutes; "5-10 minutes" is none of them)."""

    def close(a: float, b: float) -> bool:
        return abs(a - b) <= 0.2 * max(a, b) + duration.unit_s / 2

    return any(
        close(duration.low_s, c_low) and close(duration.high_s, c_high)
        for c_low, c_high, _, _ in CODELAB_FIGURES
    )


def place_key(path: Path) -> str:
    """What a measurement's ``places`` lists: a notebook's stem (all editions) or a file name."""
    return path.stem if path.suffix == ".ipynb" else path.name


def check_text(
    place: str, key: str, markdown: str, measurements: Sequence[Mapping[str, Any]]
) -> list[Problem]:
    """Every duration in ``markdown`` without a measurement for ``key`` or a codelab label."""
    mine = [m for m in measurements if key in m.get("places", ())]
    problems = []
    for block in blocks(markdown):
        labelled = any(label in block.lower() for label in CODELAB_LABELS)
        for duration in find_durations(block):
            if labelled and is_codelab_figure(duration):
                continue
            if any(backs(m, duration) for m in mine):
                continue
            reason = (
                "matches no measurement listed for "
                f"{key!r} in {MEASUREMENTS_FILE.relative_to(paths.REPO_ROOT)}"
                + (" and is not one of the codelab's figures" if labelled else "")
                + ": measure it (and add it there with the machine), or label it as the "
                "codelab's own figure"
            )
            problems.append(Problem(place, duration.text, block.strip(), reason))
    return problems


def doc_sources(root: Path = paths.REPO_ROOT) -> Iterator[tuple[str, str, str]]:
    """(place, key, markdown) for README.md and each Markdown cell of every notebook edition."""
    readme = root / "README.md"
    yield "README.md", "README.md", readme.read_text(encoding="utf-8")
    notebooks = sorted((root / "notebooks").glob("*.ipynb"))
    notebooks += sorted((root / "notebooks").glob("*/*.ipynb"))
    for path in notebooks:
        if ".ipynb_checkpoints" in path.parts:
            continue
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for cell in cells:
            if cell["cell_type"] == "markdown":
                where = f"{path.relative_to(root)} cell {cell.get('id', '?')}"
                yield where, place_key(path), "".join(cell["source"])


def time_cost_machine_problems(
    measurements: Sequence[Mapping[str, Any]], root: Path = paths.REPO_ROOT
) -> list[Problem]:
    """Each English notebook's "## Time and cost" cell names the machine its local time was
    measured on, as the current ``lab.<notebook>`` measurement records it (a refresh on
    another machine makes the cell say so)."""
    by_id = {m["id"]: m for m in measurements}
    found = []
    for name in LAB_NOTEBOOKS:
        path = root / "notebooks" / f"{name}.ipynb"
        entry = by_id.get(f"lab.{name}")
        if not path.is_file() or entry is None:
            continue
        words = machine_words(entry["machine"])
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            source = "".join(cell["source"])
            is_time_cost = cell["cell_type"] == "markdown" and source.startswith("## Time and cost")
            if is_time_cost and words not in " ".join(source.split()):
                found.append(
                    Problem(
                        f"{path.relative_to(root)} cell {cell.get('id', '?')}",
                        words,
                        source,
                        "is missing: name the machine the local time was measured on",
                    )
                )
    return found


def problems(root: Path = paths.REPO_ROOT, measurements_file: Path | None = None) -> list[Problem]:
    entries = load_measurements(measurements_file or root / "bench" / "measurements.json")
    found = []
    for place, key, markdown in doc_sources(root):
        found += check_text(place, key, markdown, entries["measurements"])
    return found + time_cost_machine_problems(entries["measurements"], root)


# --------------------------------------------------------------------------- recording


def this_machine() -> dict[str, Any]:
    """Cores, memory, GPU and platform: what a measurement needs beside its figure."""
    memory_gib = None
    try:
        import psutil

        memory_gib = round(psutil.virtual_memory().total / 2**30)
    except ImportError:  # psutil is pinned, but a bare interpreter can still record
        pass
    gpu = "none"
    if shutil.which("nvidia-smi"):
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        gpu = ", ".join(out.splitlines()) or "none"
    return {
        "cores": os.cpu_count(),
        "memory_gib": memory_gib,
        "gpu": gpu,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def machine_words(machine: Mapping[str, Any]) -> str:
    gpu = "without a GPU" if machine.get("gpu") in (None, "none") else f"with {machine['gpu']}"
    return f"{machine.get('cores')}-core, {machine.get('memory_gib')} GiB machine {gpu}"


def notebook_times(run_dir: Path) -> dict[str, float]:
    """Each executed notebook's wall time in a lab run folder (papermill's ``duration``)."""
    times = {}
    for name in LAB_NOTEBOOKS:
        path = run_dir / f"{name}.ipynb"
        if not path.is_file():
            continue
        meta = json.loads(path.read_text(encoding="utf-8"))["metadata"].get("papermill", {})
        if meta.get("exception") or meta.get("duration") is None:
            raise ValueError(f"{path} did not run to the end: record a run that passed")
        times[name] = float(meta["duration"])
    if not times:
        raise FileNotFoundError(f"no executed notebooks in {run_dir}: run `make lab` first")
    return times


def newest_run(runs: Path = paths.REPO_ROOT / "runs") -> Path:
    folders = sorted(p for p in runs.glob("*") if (p / f"{LAB_NOTEBOOKS[0]}.ipynb").is_file())
    if not folders:
        raise FileNotFoundError(f"no lab run under {runs}: run `make lab` first")
    return folders[-1]


def lab_entries(
    times: Mapping[str, float], machine: Mapping[str, Any], date: str, how: str
) -> list[dict[str, Any]]:
    """One measurement per notebook (quotable in that notebook and README) and the total."""
    entries = [
        {
            "id": f"lab.{name}",
            "seconds": round(seconds),
            "machine": dict(machine),
            "date": date,
            "how": how,
            "places": [name, "README.md"],
        }
        for name, seconds in times.items()
    ]
    if set(times) == set(LAB_NOTEBOOKS):
        entries.append(
            {
                "id": "lab.total",
                "seconds": round(sum(times.values())),
                "machine": dict(machine),
                "date": date,
                "how": how,
                "places": ["README.md"],
            }
        )
    return entries


def per_notebook_line(entries: Iterable[Mapping[str, Any]]) -> str:
    """README's one line of per-notebook times, from the measurements."""
    by_id = {e["id"]: e for e in entries}
    measured = [(n, by_id[f"lab.{n}"]) for n in LAB_NOTEBOOKS if f"lab.{n}" in by_id]
    parts = [f"{name[:2]} {entry['seconds']} s" for name, entry in measured]
    machines = sorted({machine_words(entry["machine"]) for _, entry in measured})
    dates = sorted({entry["date"] for _, entry in measured})
    span = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    where = f" ({'; '.join(machines)}, {span})" if measured else ""
    return f"Per notebook in the last `make lab`{where}: " + ", ".join(parts) + "."


def record(
    run_dir: Path,
    measurements_file: Path = MEASUREMENTS_FILE,
    readme: Path = README,
    *,
    machine: Mapping[str, Any] | None = None,
    date: str | None = None,
) -> list[dict[str, Any]]:
    """Store a lab run's per-notebook times as the current ``lab.*`` measurements and
    rewrite README's per-notebook line from them."""
    times = notebook_times(run_dir)
    machine = dict(machine or this_machine())
    date = date or datetime.date.today().isoformat()
    how = f"python -m labkit lab (make lab): papermill wall time of each notebook, {run_dir.name}"
    new = lab_entries(times, machine, date, how)
    data = load_measurements(measurements_file)
    replaced = {e["id"] for e in new}
    data["measurements"] = [e for e in data["measurements"] if e["id"] not in replaced] + new
    measurements_file.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    text = readme.read_text(encoding="utf-8")
    if PER_NOTEBOOK_LINE.search(text):
        line = per_notebook_line(data["measurements"])
        readme.write_text(PER_NOTEBOOK_LINE.sub(line, text, count=1), encoding="utf-8")
    return new


# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labkit durations",
        description="Check the durations the docs state against bench/measurements.json, "
        "or record a lab run's per-notebook times there.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="store a `make lab` run's per-notebook times")
    rec.add_argument("run_dir", nargs="?", type=Path, help="default: the newest runs/<stamp>/")
    sub.add_parser("check", help="list every stated duration no measurement backs")
    sub.add_parser("refresh", help="run the lab (python -m labkit lab), then record that run")
    args = parser.parse_args(argv)
    run_dir: Path | None = None
    if args.command == "refresh":
        from labkit.course import lab

        run_dir = lab.new_run_dir()
        status = lab.main(["--out", str(run_dir)])
        if status != 0:
            print(f"durations: the lab run failed; nothing recorded ({run_dir})", file=sys.stderr)
            return status
    elif args.command == "record":
        run_dir = args.run_dir or newest_run()
    if run_dir is not None:
        for entry in record(run_dir):
            print(f"recorded {entry['id']}: {entry['seconds']} s")
        print(f"on a {machine_words(this_machine())}; README's per-notebook line rewritten")
    found = problems()
    for problem in found:
        print(problem)
    print(f"{len(found)} duration(s) without a measurement or codelab label")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
