"""`python -m labkit.course.nbcheck` (make lint): it passes the committed notebooks and names
each kind of problem it exists to catch."""

from __future__ import annotations

import nbformat

from labkit.course import nbcheck
from labkit.course.lab import NOTEBOOK_DIR, REFERENCE_TAG


def test_the_committed_notebooks_pass():
    assert nbcheck.main([]) == 0


def test_each_problem_is_named(tmp_path):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('MODE = "auto"\nREGION = None')
    params.metadata["tags"] = ["parameters"]
    noisy = nbformat.v4.new_code_cell("print(1)")
    noisy.outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    noisy.execution_count = 3
    unrun = nbformat.v4.new_code_cell("print(2)")
    unrun.metadata["tags"] = [REFERENCE_TAG]
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Title\n## Time and cost\n## What you will learn"),
        params,
        noisy,
        unrun,
    ]
    path = tmp_path / "bad.ipynb"
    nbformat.write(nb, str(path))
    name = "bad.ipynb"
    problems = (
        nbcheck.output_problems(nb, name)
        + nbcheck.parameter_problems(nb, name)
        + nbcheck.section_problems(nb, name)
    )
    text = "\n".join(problems)
    assert f"cell {noisy.id}: has outputs" in text
    assert f"cell {unrun.id}: a reference cell needs its outputs" in text
    assert "keep_output tag" in text
    assert "does not set PROJECT_ID, BUCKET" in text
    assert "missing: Before you begin, Summary and what comes next" in text
    assert nbcheck.main([str(path)]) == 1


def test_sections_out_of_order_are_named():
    nb = nbformat.read(str(NOTEBOOK_DIR / "05_cleanup.ipynb"), as_version=4)
    first = next(c for c in nb.cells if "## What you will learn" in c.source)
    nb.cells.remove(first)
    nb.cells.append(first)
    (problem,) = nbcheck.section_problems(nb, "05")
    assert "in this order; found" in problem


def test_make_lints_nbqa_ruff_passes_on_both_editions():
    """CI runs `make test`, not `make lint`: this is make lint's nbqa step, so CI runs it too."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "nbqa", "ruff", "notebooks"],  # options: pyproject.toml
        capture_output=True,
        text=True,
        cwd=NOTEBOOK_DIR.parent,
    )
    assert result.returncode == 0, result.stdout + result.stderr
