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

HERE = Path(__file__).resolve().parent
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


# The second lab run (issue 22): the English edition, with parameters no other test uses,
# through the notebooks that state outcomes (02, 03, with 00's set-up and 01's data). More workers than the default two, one epoch,
# smaller batches and fewer steps; the claims in 02/03 must hold here too.
OTHER_PARAMETERS: dict[str, Any] = {
    "MODE": "local",
    "WORKERS": 3,
    "EPOCHS": 1,
    "BATCH_SIZE": 4,
    "STEPS_PER_EPOCH": 6,
    "SOLVED": True,  # 03's exercises run the kit's solutions, as in `make lab` and CI
}
OTHER_NOTEBOOKS = ("00", "01", "02", "03")
OTHER_TIMEOUT_S = 1500  # about 4-6 minutes on 2 quiet cores


def run_lab_with_other_parameters(home: Path, out: Path, sample: Any) -> dict[str, Any]:
    """`python -m labkit lab` on `OTHER_NOTEBOOKS` with `OTHER_PARAMETERS`, in its own LAB_HOME;
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


# The nbval run is the zh-CN edition (issue 29): it checks the zh-CN references, each edition's
# recorded from a run of its own, and its outputs are scanned for English. The English
# edition runs in `run_lab_with_other_parameters`; tests/test_i18n.py checks that both
# editions' references show the same values.
NBVAL_EDITION = "zh-CN"


def run_lab_under_nbval(home: Path, work: Path, sample: Any) -> dict[str, Any]:
    """Prepare the six notebooks of `NBVAL_EDITION` with the CI knobs and execute them in order
    under nbval; tests/nbval_outputs.py keeps what each cell printed in ``executed/``."""
    from labkit.i18n import ENV_VAR

    env = make_lab_home(home, sample)
    env[ENV_VAR] = NBVAL_EDITION  # the kit's output follows the edition, as in its folder
    env["NBVAL_EXECUTED_DIR"] = str(work / "executed")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    run_dir = work / "run"
    for path in lab.resolve_notebooks(lang=NBVAL_EDITION):
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
        "-p",
        "nbval_outputs",
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
    return {"result": result, "home": home, "run_dir": run_dir, "executed": work / "executed"}


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
    """What a learner should not see in an executed notebook: TensorFlow's C++ log lines, its
    Python logger's INFO/WARNING lines and tracebacks, one entry per line, naming the cell."""
    import re

    python_log_line = re.compile(r"(INFO|WARNING|DEBUG):tensorflow:")
    import nbformat

    from labkit.local.supervisor import TRACEBACK_LINE, is_cpp_log_line

    found = []
    nb = nbformat.read(str(executed), as_version=4)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for line in output_text(cell).splitlines():
            text = line.split("] ", 1)[1] if re_role(line) else line
            if is_cpp_log_line(text) or TRACEBACK_LINE.search(text) or python_log_line.match(text):
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


# What may stay English in a zh-CN run's outputs (issue 29): Chinese is required of every line
# the kit writes; these are the lines it did not write, or that are not prose.
_HAN = r"[\u4e00-\u9fff]"
_NOT_PROSE = (
    r"^\[trainer\] |^\[(chief|worker|ps|evaluator)-\d+\] ",  # the trainer's and replicas' lines
    r"^\s*\d+/\d+ .*(step|ETA)|^Epoch \d+/\d+$",  # Keras's progress
    r"^\s*(\|\||&&)?\s*(gcloud|docker|python -m|sh -c|pip) |^\s*--[a-z]",  # a command, options
    r"^\d{4}-\d\d-\d\dT[\d:.]+Z |^===== ",  # a job's log (Vertex's own lines are English)
    # google-cloud-aiplatform's own log lines, as on Workbench
    r"^(Creating|Deleting|Delete) \w+|^\w+ (created|deleted|resource|run completed|"
    r"projects/\S+ current state:)|^View \w+|^To use this \w+ in another session:|= aiplatform\.",
    r"^\s*[\w.-]+\s+\d+ KB$",  # a file listing: name, size
    r"^\s*[✓✗] [A-Z]+ ",  # a checked Dockerfile instruction
    r"^[A-Z_]+ = [\[{]",  # TF_CONFIG = {...}, CLUSTER_SPEC = {...}
    r"^\s*[\[{(].*[\]})],?$",  # a printed dict, list or tuple
    r"^---+ .* ---+$",  # a separator naming a replica
    r"^[a-z][a-z0-9_]*\s{2,}\S*$",  # a row of a settings table: option name, value
)
# Names, not words: products, APIs and TensorFlow's own terms, as Google's zh-CN pages write
# them.
_NAMES = (
    "Vertex AI",
    "Google Cloud",
    "Cloud Storage",
    "Artifact Registry",
    "TensorFlow",
    "Keras",
    "MultiWorkerMirroredStrategy",
    "MirroredStrategy",
    "OneDeviceStrategy",
    "SavedModel",
    "ResNet50",
    "ImageNet",
    "TFDS",
    "Docker",
    "Dockerfile",
    "JupyterLab",
    "Workbench",
    "Codelab",
    "Chromium",
    "GPU",
    "CPU",
    "USD",
    "SDK",
    "API",
    "JSON",
    "ID",
    "URI",
    "ok",
)


def is_not_prose(line: str) -> bool:
    """A line that is a path, a number, a name, code, a command, or the trainer's or Keras's
    own output: nothing left to translate once names and code-like tokens are removed."""
    import re

    if any(re.search(pattern, line) for pattern in _NOT_PROSE):
        return True
    text = re.sub(r"`[^`]*`|'[^']*'|\"[^\"]*\"", " ", line)
    for name in _NAMES:
        text = text.replace(name, " ")
    words = [w for w in text.split() if not re.search(r"[\d_./:=@<>\\-]", w)]
    return not any(re.search(r"[A-Za-z]{2,}", w) for w in words)


# In an output shown as code (a fenced listing or an HTML table of <pre> blocks: the kit's
# `show_source`, `show_file`, the side-by-side comparison), a line that reads as code.
_CODE_LINE = (
    r"^\s|^#|^(def|return|class|import|from|if|for|with|FROM|ARG|LABEL|ENV|WORKDIR|COPY|RUN|"
    r"ENTRYPOINT|CMD)\b|[=()\[\]{}]"
)


def _shown(cell: Any) -> list[tuple[str, bool]]:
    """(text, is_a_code_listing) for each output of a code cell, as `output_text` reads it."""
    shown = []
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        listing = str(data.get("text/markdown", "")).startswith("```") or "<pre" in str(
            data.get("text/html", "")
        )
        shown.append((output_text({"outputs": [output]}), listing))
    return shown


def english_lines(executed: Path, allowed: dict[str, str]) -> list[str]:
    """Output lines of an executed zh-CN notebook with no Chinese that are prose, one entry per
    line naming the notebook and cell. ``allowed``: a code pattern -> why its cell's outputs
    stay as they are (e.g. the dataset's own description)."""
    import re

    import nbformat

    found = []
    nb = nbformat.read(str(executed), as_version=4)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or any(re.search(p, cell.source) for p in allowed):
            continue
        for text, listing in _shown(cell):
            for line in text.splitlines():
                if not line.strip() or re.search(_HAN, line) or is_not_prose(line):
                    continue
                if listing and re.search(_CODE_LINE, line):
                    continue
                found.append(f"{executed.name} cell {index}: {line[:160]}")
    return found
