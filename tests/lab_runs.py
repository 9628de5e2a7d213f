"""The whole lab executed once under nbval, shared by the notebook tests and the model checks.

papermill injects the CI knobs (`labkit.lab.CHECK_PARAMETERS`) into copies of the notebooks,
nbval executes them in order and compares the cells marked ``# NBVAL_CHECK_OUTPUT`` with the
reference outputs committed in notebooks/. Everything runs in a temporary LAB_HOME (a copy of
the sample, a local Vertex AI service on a free port), so it neither uses nor deletes the
developer's `.lab/`. The run folder (results.json, the baseline's and the 2-worker models)
outlives the lab: notebook 05 deletes only what is in LAB_HOME.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from labkit import lab
from labkit.settings import load_settings
from labkit.vertex_env import free_ports

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
    from labkit.emulator import control

    return control.status(home / "vertex").running


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
        from labkit.emulator import control

        control.stop(home / "vertex")  # whatever happened, no service outlives the test
    return {"result": result, "home": home, "run_dir": run_dir}
