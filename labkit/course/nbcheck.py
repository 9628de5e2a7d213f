"""`python -m labkit.course.nbcheck`: the committed notebooks follow the course's template.

What `make lint` checks besides ruff (`nbqa ruff`) and nbstripout's ``--verify``:

- no outputs or execution counts, except the nbval reference cells (tagged
  ``nbval-check-output``), which must keep theirs (nbval skips a reference without a count);
- exactly one cell tagged ``parameters`` (papermill injects the run's values after it) that
  sets ``MODE``, ``PROJECT_ID``, ``REGION`` and ``BUCKET``;
- the template's sections as ``##`` headings, in order: what you will learn (objectives),
  time and cost, before you begin, and the summary with what comes next. The zh-CN edition's
  headings are its translations, so its sections are checked by `labkit.i18n`'s sync
  (every English text cell has its translation); here it gets the other checks.

Exit status 1 with one line per problem, naming the notebook and the cell.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from pathlib import Path

import nbformat

from labkit.course.lab import KEEP_OUTPUT_TAG, NOTEBOOK_DIR, PARAMETERS_TAG, is_reference_cell

SECTIONS = (
    "What you will learn",
    "Time and cost",
    "Before you begin",
    "Summary and what comes next",
)
REQUIRED_PARAMETERS = ("MODE", "PROJECT_ID", "REGION", "BUCKET")


def h2_headings(nb: nbformat.NotebookNode) -> list[str]:
    """The notebook's section headings (``## ...`` lines of its markdown cells), in order."""
    return [
        line[3:].strip()
        for cell in nb.cells
        if cell.cell_type == "markdown"
        for line in cell.source.splitlines()
        if line.startswith("## ")
    ]


def output_problems(nb: nbformat.NotebookNode, name: str) -> list[str]:
    """Outputs and counts only on the reference cells, and there both."""
    problems = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        where = f"{name} cell {cell.get('id')}"
        if is_reference_cell(cell):
            if not cell.outputs or cell.execution_count is None:
                problems.append(
                    f"{where}: a reference cell needs its outputs and an execution count "
                    "(python -m labkit lab --update-references)"
                )
            if KEEP_OUTPUT_TAG not in cell.metadata.get("tags", []):
                problems.append(f"{where}: a reference cell needs the {KEEP_OUTPUT_TAG} tag")
        elif cell.outputs or cell.execution_count is not None:
            problems.append(f"{where}: has outputs; run `python -m labkit lab --strip`")
    return problems


def parameter_problems(nb: nbformat.NotebookNode, name: str) -> list[str]:
    """One ``parameters`` cell of plain assignments naming the required parameters."""
    tagged = [c for c in nb.cells if PARAMETERS_TAG in c.metadata.get("tags", [])]
    if len(tagged) != 1:
        return [f"{name}: {len(tagged)} cells tagged {PARAMETERS_TAG!r}, want exactly one"]
    try:
        body = ast.parse(tagged[0].source).body
    except SyntaxError as err:
        return [f"{name}: the parameters cell does not parse: {err}"]
    assigned = {t.id for node in body if isinstance(node, ast.Assign) for t in node.targets}
    missing = [p for p in REQUIRED_PARAMETERS if p not in assigned]
    return [f"{name}: the parameters cell does not set {', '.join(missing)}"] if missing else []


def section_problems(nb: nbformat.NotebookNode, name: str) -> list[str]:
    """The template's sections, in order."""
    headings = h2_headings(nb)
    found = [s for s in headings if s in SECTIONS]
    if found != list(SECTIONS):
        missing = [s for s in SECTIONS if s not in headings]
        return [
            f"{name}: the template's sections are ## {' / ## '.join(SECTIONS)} in this order"
            + (f"; missing: {', '.join(missing)}" if missing else f"; found {found}")
        ]
    return []


def check(paths: Iterable[Path]) -> list[str]:
    """Every problem of these notebooks (English ones get the section check too)."""
    problems = []
    for path in paths:
        nb = nbformat.read(str(path), as_version=4)
        inside = path.is_relative_to(NOTEBOOK_DIR.parent)
        name = str(path.relative_to(NOTEBOOK_DIR.parent)) if inside else str(path)
        problems += output_problems(nb, name) + parameter_problems(nb, name)
        if path.parent == NOTEBOOK_DIR:
            problems += section_problems(nb, name)
    return problems


def main(argv: list[str] | None = None) -> int:
    paths = [Path(a).resolve() for a in argv] if argv else sorted(NOTEBOOK_DIR.glob("0*.ipynb"))
    if not argv:
        paths += sorted((NOTEBOOK_DIR / "zh-CN").glob("0*.ipynb"))
    problems = check(paths)
    for line in problems:
        print(line)
    print(f"{len(paths)} notebooks: {len(problems) or 'no'} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
