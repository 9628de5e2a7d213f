"""The committed notebooks: stripped of outputs except the nbval references, parameters
cell intact, no package logic, and the fixed shape every notebook follows."""

from __future__ import annotations

import ast
import re
import subprocess
import sys

import nbformat
import pytest

from labkit.course.lab import (
    KEEP_OUTPUT_TAG,
    NOTEBOOK_DIR,
    NOTEBOOKS,
    PARAMETERS_TAG,
    REFERENCE_TAG,
    is_reference_cell,
    strip_notebook,
)
from labkit.course.nbcheck import h2_headings

PATHS = [NOTEBOOK_DIR / f"{name}.ipynb" for name in NOTEBOOKS]
SHAPE = ("What you will learn", "Time and cost", "Before you begin")
LAST_HEADING = "Summary and what comes next"
REQUIRED_PARAMETERS = {"MODE": "auto", "PROJECT_ID": None, "REGION": None, "BUCKET": None}
# Notebooks whose deterministic cells nbval compares (tests/test_notebooks.py).
NOTEBOOKS_WITH_REFERENCES = {"01_data_exploration", "03_mwms_trainer", "04_sdk_job_submission"}


def load(path):
    return nbformat.read(str(path), as_version=4)


def code_cells(nb):
    return [cell for cell in nb.cells if cell.cell_type == "code"]


@pytest.fixture(params=PATHS, ids=[p.stem for p in PATHS])
def notebook_path(request):
    return request.param


def test_all_six_notebooks_exist_and_are_valid():
    assert [p.name for p in sorted(NOTEBOOK_DIR.glob("*.ipynb"))] == [p.name for p in PATHS]
    for path in PATHS:
        nb = load(path)
        nbformat.validate(nb)


def test_every_notebook_opens_in_the_kits_kernel():
    """JupyterLab and Workbench start a notebook in the kernel its metadata names: the one
    `make venv` and the README register, under the conda environment's name."""
    from labkit.cloud.setup_checks import KIT_ENV_NAME

    makefile = (NOTEBOOK_DIR.parent / "Makefile").read_text()
    assert re.search(rf"^KERNEL := {KIT_ENV_NAME}$", makefile, re.M)
    for path in [*PATHS, *sorted((NOTEBOOK_DIR / "zh-CN").glob("*.ipynb"))]:
        spec = load(path).metadata["kernelspec"]
        assert spec == {
            "name": KIT_ENV_NAME,
            "display_name": f"Python ({KIT_ENV_NAME})",
            "language": "python",
        }, path


def test_only_reference_cells_keep_outputs(notebook_path):
    nb = load(notebook_path)
    for index, cell in enumerate(code_cells(nb)):
        where = f"{notebook_path.name} code cell {index}: {cell.source[:60]!r}"
        if is_reference_cell(cell):
            assert cell.outputs, f"{where}: reference cell without outputs; run --update-references"
            assert cell.execution_count is not None, (
                f"{where}: nbval skips a reference without an execution count; "
                "run `python -m labkit lab --strip`"
            )
            assert KEEP_OUTPUT_TAG in cell.metadata.get("tags", []), where
            for output in cell.outputs:
                assert output.output_type != "error", where
                assert output.get("name") != "stderr", f"{where}: stderr is not deterministic"
        else:
            assert cell.outputs == [], f"{where}: has outputs; run `python -m labkit lab --strip`"
            assert cell.execution_count is None, f"{where}: has an execution count"


def test_references_exist_where_nbval_compares_them():
    with_refs = {p.stem for p in PATHS if any(is_reference_cell(c) for c in load(p).cells)}
    assert with_refs == NOTEBOOKS_WITH_REFERENCES


def test_nbstripout_finds_nothing_to_strip():
    """nbstripout (keeping ids and the references' counts) would not change a file."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "nbstripout",
            "--verify",
            "--keep-count",
            "--keep-id",
            *map(str, PATHS),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_strip_notebook_is_a_no_op_on_committed_notebooks(notebook_path):
    nb = load(notebook_path)
    assert strip_notebook(nb) == nb


def test_strip_notebook_removes_outputs_but_keeps_references():
    nb = load(NOTEBOOK_DIR / "03_mwms_trainer.ipynb")
    plain = next(c for c in code_cells(nb) if not is_reference_cell(c))
    plain.outputs = [nbformat.v4.new_output("stream", name="stdout", text="noise\n")]
    plain.execution_count = 7
    plain.metadata["papermill"] = {"duration": 1.0}
    reference = nbformat.v4.new_code_cell("print(1)")
    reference.metadata["tags"] = [REFERENCE_TAG]
    reference.outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    reference.execution_count = None  # as nbstripout leaves it
    nb.cells.append(reference)
    stripped = strip_notebook(nb)
    plain_after = next(c for c in code_cells(stripped) if c.id == plain.id)
    reference_after = next(c for c in code_cells(stripped) if c.id == reference.id)
    assert plain_after.outputs == [] and plain_after.execution_count is None
    assert "papermill" not in plain_after.metadata
    assert reference_after.outputs == reference.outputs
    assert reference_after.execution_count is not None


def test_parameters_cell(notebook_path):
    nb = load(notebook_path)
    tagged = [c for c in nb.cells if PARAMETERS_TAG in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{notebook_path.name}: exactly one cell tagged 'parameters'"
    values = {}
    for node in ast.parse(tagged[0].source).body:
        assert isinstance(node, ast.Assign), f"only plain assignments: {ast.unparse(node)}"
        (target,) = node.targets
        values[target.id] = ast.literal_eval(node.value)
    for name, default in REQUIRED_PARAMETERS.items():
        assert values.get(name, "missing") == default, f"{notebook_path.name}: {name}"
    knobs = {k: v for k, v in values.items() if k not in REQUIRED_PARAMETERS}
    assert all(v is None for v in knobs.values()), f"knobs default to None (the mode's): {knobs}"
    assert "RUN_DIR" in knobs


def test_no_package_logic_in_cells(notebook_path):
    from labkit.course.exercises import names as exercise_names

    for cell in code_cells(load(notebook_path)):
        assert "%%writefile" not in cell.source and "%writefile" not in cell.source
        tree = ast.parse(cell.source)
        defined = [
            node
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            # The learner's own code: a cell tagged `exercise` defines one exercise function.
            and not (
                "exercise" in cell.metadata.get("tags", [])
                and isinstance(node, ast.FunctionDef)
                and node.name in exercise_names()
            )
        ]
        assert not defined, (
            f"{notebook_path.name}: define code in labkit/trainer: {cell.source[:80]!r}"
        )


def test_fixed_shape(notebook_path):
    nb = load(notebook_path)
    number = notebook_path.stem[:2]
    first = nb.cells[0]
    assert first.cell_type == "markdown"
    assert re.match(rf"^# {number} · \S", first.source), "title: '# NN · Title'"
    headings = h2_headings(nb)
    assert tuple(headings[: len(SHAPE)]) == SHAPE, headings
    assert headings[-1] == LAST_HEADING, headings
    steps = [h for h in headings if h.startswith("Step ")]
    assert steps, "the notebook has no steps"
    numbers = [int(re.match(r"Step (\d+): \S", h).group(1)) for h in steps]
    assert numbers == list(range(1, len(steps) + 1)), steps

    time_cost = next(c.source for c in nb.cells if c.source.startswith("## Time and cost"))
    assert "| local" in time_cost and "| cloud" in time_cost, "time and cost for each mode"

    # The parameters cell sits under "Before you begin", before the first step.
    kinds = []
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## "):
            kinds.append(cell.source.splitlines()[0][3:])
        elif PARAMETERS_TAG in cell.metadata.get("tags", []):
            kinds.append("parameters")
    assert kinds.index("parameters") == kinds.index("Before you begin") + 1


def test_every_step_shows_something(notebook_path):
    """Each step heading is followed by at least one code cell before the next heading."""
    nb = load(notebook_path)
    current, has_code = None, True
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## "):
            assert has_code, f"{notebook_path.name}: {current!r} runs nothing"
            current = cell.source.splitlines()[0]
            has_code = not current.startswith("## Step ")
        elif cell.cell_type == "code":
            has_code = True


def test_notebooks_pass_ruff():
    for args in (["check"], ["format", "--check"]):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *args, *map(str, PATHS)],
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stdout + result.stderr
