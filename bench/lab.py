"""The lab: wall time of the notebooks in local mode, per notebook and in total.

Through `python -m labkit lab` (what `make lab` runs) when `labkit.course.lab` exists, else
papermill directly; per-notebook times come from papermill's own record in each executed
notebook (``metadata.papermill.duration``), so they do not depend on either's printout.
No notebooks yet -> "skipped: no notebooks", not a failure; with --quick the repo's
notebooks are skipped too. The run gets what is left of the bench's time budget; running
out is status "timeout: ..." with the notebooks finished so far, and the target not met.

The notebooks run with a LAB_HOME of their own (`.lab/bench/lab-home`): notebook 05 deletes
the local state it finds there, and a bench must not touch the learner's `.lab/` (their
sample, settings or local bucket). It does not isolate the local Vertex AI service's port
(8765 unless the settings say otherwise): do not time the lab while another lab runs.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import bench_home
from bench.measure import BenchContext, check, child_env, section
from labkit.cloud.paths import REPO_ROOT

NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
# The notebooks' own budget (issue 5): the whole lab in local mode within 10 minutes on 2 cores.
TARGET_TOTAL_S = 600.0
TARGET_TEXT = f"<= {TARGET_TOTAL_S:.0f} s, every notebook passing"
DEFAULT_TIMEOUT_S = 900.0
MIN_USEFUL_S = 300.0  # the notebooks need minutes: do not start them with less left


def find_notebooks(notebooks_dir: Path) -> list[Path]:
    """The lab's notebooks in run order (file names start with their number)."""
    return sorted(p for p in notebooks_dir.glob("*.ipynb") if not p.name.startswith("."))


def papermill_durations(folder: Path) -> dict[str, float]:
    """``{notebook name: seconds}`` from the executed notebooks under ``folder``."""
    durations: dict[str, float] = {}
    for path in sorted(folder.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        try:
            meta = json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
        except (OSError, json.JSONDecodeError):
            continue
        seconds = (meta.get("papermill") or {}).get("duration")
        if isinstance(seconds, (int, float)):
            durations[path.name] = float(seconds)
    return durations


def bench_lab_home() -> Path:
    """The LAB_HOME the timed notebooks use, away from the learner's own `.lab/` state."""
    return bench_home() / "lab-home"


@contextlib.contextmanager
def lab_home_set(path: Path) -> Iterator[None]:
    """Point ``CASSAVA_LAB_HOME`` at ``path`` for kernels started meanwhile (they inherit it)."""
    previous = os.environ.get("CASSAVA_LAB_HOME")
    os.environ["CASSAVA_LAB_HOME"] = str(path)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("CASSAVA_LAB_HOME", None)
        else:
            os.environ["CASSAVA_LAB_HOME"] = previous


def run_with_labkit(out_dir: Path, timeout: float) -> tuple[int | None, str]:
    """`python -m labkit lab --out OUT`; returns (exit status or None on timeout, output tail).

    It runs in a session of its own, so that on timeout the whole process group it started
    (kernels, their jobs) is stopped: TERM first, so it can clean up, then KILL.
    """
    command = [sys.executable, "-m", "labkit", "lab", "--out", str(out_dir)]
    process = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env=child_env({"CASSAVA_LAB_HOME": str(bench_lab_home())}),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        output = _stop_group(process)
        return None, output[-2000:]
    return process.returncode, output[-2000:]


def _stop_group(process: subprocess.Popen[str], grace_s: float = 15.0) -> str:
    """TERM the process group `process` leads, KILL it after `grace_s`; its output so far."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            output, _ = process.communicate(timeout=grace_s)
            return output or ""
        except subprocess.TimeoutExpired:
            continue
    return ""


def run_with_papermill(
    notebooks: list[Path], out_dir: Path, timeout: float
) -> tuple[int | None, str]:
    """Each notebook in order with papermill, in local mode, stopping at the first failure."""
    import papermill

    deadline = time.monotonic() + timeout
    with lab_home_set(bench_lab_home()):
        return _execute_in_order(papermill, notebooks, out_dir, deadline)


def _execute_in_order(
    papermill: Any, notebooks: list[Path], out_dir: Path, deadline: float
) -> tuple[int | None, str]:
    for notebook in notebooks:
        left = deadline - time.monotonic()
        if left <= 0:
            return None, f"out of time before {notebook.name}"
        try:
            papermill.execute_notebook(
                str(notebook),
                str(out_dir / notebook.name),
                parameters={"MODE": "local"},
                cwd=str(notebook.parent),
                kernel_name="python3",
                execution_timeout=int(left),
                progress_bar=False,
                log_output=False,
            )
        except Exception as err:  # papermill raises its own error types per failing cell
            return 1, f"{notebook.name}: {type(err).__name__}: {str(err)[-1500:]}"
    return 0, ""


def run(ctx: BenchContext, notebooks_dir: Path | None = None) -> dict[str, Any]:
    """Time the notebooks; bounded by what is left of the bench's time budget."""
    started = time.perf_counter()
    folder = NOTEBOOKS_DIR if notebooks_dir is None else Path(notebooks_dir)
    notebooks = find_notebooks(folder) if folder.is_dir() else []
    if not notebooks:
        return section("skipped: no notebooks", params={"notebooks_dir": str(folder)})
    if ctx.quick and notebooks_dir is None:
        return section(
            "skipped: --quick (the lab's notebooks take minutes; run without --quick)",
            params={"notebooks_dir": str(folder)},
        )
    left = ctx.seconds_left()
    timeout = DEFAULT_TIMEOUT_S if left is None else min(DEFAULT_TIMEOUT_S, left)
    if timeout < MIN_USEFUL_S:
        return section(
            f"skipped: only {max(left or 0, 0):.0f} s left of the bench's time budget",
            params={"notebooks_dir": str(folder)},
            checks=[check("lab.total_s", None, TARGET_TEXT + " (not run)", None)],
        )
    out_dir = ctx.scratch / "lab" / time.strftime("%Y%m%d-%H%M%S")
    out_dir.mkdir(parents=True, exist_ok=True)
    use_labkit = (
        folder == NOTEBOOKS_DIR and importlib.util.find_spec("labkit.course.lab") is not None
    )
    via = "python -m labkit lab" if use_labkit else "papermill"
    begin = time.perf_counter()
    if use_labkit:
        status_code, tail = run_with_labkit(out_dir, timeout)
    else:
        status_code, tail = run_with_papermill(notebooks, out_dir, timeout)
    total_s = time.perf_counter() - begin
    durations = papermill_durations(out_dir)
    params = {"notebooks_dir": str(folder), "via": via, "timeout_s": timeout}
    summary: dict[str, Any] = {"total_s": total_s, "notebooks_run": len(durations)}
    summary.update({f"{name}.s": seconds for name, seconds in durations.items()})
    if status_code is None:  # the budget ran out: a result (target not met), not a crash
        status = f"timeout: stopped after {timeout:.0f} s"
    elif status_code != 0:
        status = f"error: exit status {status_code}"
    else:
        status = "ok"
    met = status == "ok" and total_s <= TARGET_TOTAL_S
    checks = [check("lab.total_s", total_s, TARGET_TEXT, met)]
    notes = [tail.strip()[-800:]] if status != "ok" and tail.strip() else []
    return section(
        status,
        params=params,
        summary=summary,
        checks=checks,
        notes=notes,
        wall_s=time.perf_counter() - started,
    )
