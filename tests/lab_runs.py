"""The whole lab executed once under nbval, shared by the notebook tests and the model checks.

papermill injects the CI knobs (`labkit.course.lab.CHECK_PARAMETERS`) into copies of the notebooks,
nbval executes them in order and compares the cells tagged ``nbval-check-output`` with the
reference outputs committed in notebooks/. Everything runs in a temporary LAB_HOME (a copy of
the sample, a local Vertex AI service on a free port), so it neither uses nor deletes the
developer's `.lab/`. The run folder (results.json, the baseline's and the 2-worker models)
outlives the lab: notebook 05 deletes only what is in LAB_HOME.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from labkit.cloud.settings import load_settings
from labkit.course import lab
from labkit.local.vertex_env import free_ports

LAB_TIMEOUT_S = 3000  # about 9 minutes on 2 quiet cores; far more on a busy machine


def make_lab_home(root: Path, sample: Any) -> dict[str, str]:
    """A LAB_HOME with a copy of the sample (notebook 05 deletes it) and a free port for the
    local Vertex AI service; returns the environment that selects it."""
    shutil.copytree(sample.root, root / "sample", ignore=shutil.ignore_patterns(".lock"))
    load_settings(
        "local",
        path=root / "settings.json",
        save=True,
        emulator_port=free_ports(1)[0],
    )
    return {**os.environ, "CASSAVA_LAB_HOME": str(root), "PYTHONUNBUFFERED": "1"}


def service_running(home: Path) -> bool:
    from labkit.local.emulator import control

    return control.status(home / "vertex").running


# The second lab run (issue 22): parameters no other test uses, through the notebooks that
# state outcomes (02, 03, with 00's set-up). More workers than the default two, one epoch,
# smaller batches and fewer steps; the claims in 02/03 must hold here too.
OTHER_PARAMETERS: dict[str, Any] = {
    "MODE": "local",
    "WORKERS": 3,
    "EPOCHS": 1,
    "BATCH_SIZE": 4,
    "STEPS_PER_EPOCH": 6,
    "SOLVED": True,  # 03's exercises run the kit's solutions, as in `make lab` and CI
}
OTHER_NOTEBOOKS = ("00", "02", "03")
OTHER_TIMEOUT_S = 1500  # about 4-6 minutes on 2 quiet cores


def run_lab_with_other_parameters(home: Path, out: Path, sample: Any) -> dict[str, Any]:
    """`python -m labkit lab` on 00, 02 and 03 with `OTHER_PARAMETERS`, in its own LAB_HOME;
    the local services 00 starts are stopped afterwards (05, which would, is not run)."""
    env = make_lab_home(home, sample)
    params = [f"--param={k}={json.dumps(v)}" for k, v in OTHER_PARAMETERS.items()]
    command = [sys.executable, "-m", "labkit", "lab", "--notebooks", *OTHER_NOTEBOOKS]
    try:
        result = subprocess.run(
            [*command, "--out", str(out), *params],
            env=env,
            capture_output=True,
            text=True,
            timeout=OTHER_TIMEOUT_S,
        )
    finally:
        from labkit.local.emulator import control

        control.stop(home / "vertex")
    return {"result": result, "home": home, "run_dir": out}


def run_lab_under_nbval(home: Path, work: Path, sample: Any) -> dict[str, Any]:
    """Prepare the six notebooks with the CI knobs and execute them in order under nbval."""
    env = make_lab_home(home, sample)
    run_dir = work / "run"
    for path in lab.resolve_notebooks():
        lab.prepare(path, work / path.name, {**lab.CHECK_PARAMETERS, "RUN_DIR": str(run_dir)})
    (work / "pytest.ini").write_text("[pytest]\naddopts =\n")
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        str(work / "pytest.ini"),
        "--rootdir",
        str(work),
        "-p",
        "no:cacheprovider",
        "--nbval-lax",
        "--nbval-current-env",
        f"--nbval-cell-timeout={lab.CELL_TIMEOUT_S}",
        "-q",
        *(str(work / f"{name}.ipynb") for name in lab.NOTEBOOKS),
    ]
    try:
        result = subprocess.run(
            command, cwd=work, env=env, capture_output=True, text=True, timeout=LAB_TIMEOUT_S
        )
    finally:
        from labkit.local.emulator import control

        control.stop(home / "vertex")  # whatever happened, no service outlives the test
    return {"result": result, "home": home, "run_dir": run_dir}


def output_text(cell: Any) -> str:
    """The text a code cell shows: its streams, plain-text results and error tracebacks."""
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(output.get("text", ""))
        elif output.get("output_type") == "error":
            parts.append("\n".join(output.get("traceback", [])))
        else:
            parts.append(output.get("data", {}).get("text/plain", ""))
    return "".join(p if p.endswith("\n") or not p else p + "\n" for p in parts)


def noise(executed: Path) -> list[str]:
    """What a learner should not see in an executed notebook: TensorFlow C++ log lines and
    tracebacks, one entry per offending line, naming the cell."""
    import nbformat

    from labkit.local.supervisor import TRACEBACK_LINE, is_cpp_log_line

    found = []
    nb = nbformat.read(str(executed), as_version=4)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for line in output_text(cell).splitlines():
            text = line.split("] ", 1)[1] if re_role(line) else line
            if is_cpp_log_line(text) or TRACEBACK_LINE.search(text):
                found.append(f"{executed.name} cell {index}: {line[:160]}")
    return found


def re_role(line: str) -> bool:
    """Whether a line carries a replica prefix such as ``[worker-0] ``."""
    import re

    return bool(re.match(r"^\[(chief|worker|ps|evaluator)-\d+\] ", line))


def training_cells(executed: Path) -> dict[int, int]:
    """Cell index -> number of output lines, for the cells that run a cluster or trainer."""
    import nbformat

    nb = nbformat.read(str(executed), as_version=4)
    return {
        index: len(output_text(cell).splitlines())
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        and ("run_cluster(" in cell.source or "trainer.run(" in cell.source)
    }
