"""The exercise cells of notebooks 03 and 04 (the trainer, the Dockerfile, the worker pool
specs), executed in a real kernel as a learner runs them.

Unsolved (``SOLVED = None``, the learner's default): every check cell prints its hint and the
later cells say what is missing, with no traceback. Solved (``SOLVED = True``, what CI and
`make lab` run): every check passes and the trainer file is written; the 2-worker run and the
container job are left to the lab run and tests/test_exercises.py (they train).

The cells are taken from the English notebooks by their ids (``ex-*``) and tags
(``exercise``, ``exercise-check``, ``exercise-run``); the zh-CN edition copies their
code (it translates comments and docstrings only), so the same cells run there.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from labkit.course import exercises
from labkit.course.lab import KERNEL_NAME, NOTEBOOK_DIR

NB03 = NOTEBOOK_DIR / "03_mwms_trainer.ipynb"
NB04 = NOTEBOOK_DIR / "04_sdk_job_submission.ipynb"
TRAINING_CELLS = {"ex-run-cluster", "ex-run-check", "ex-docker-run", "ex-docker-run-check"}


def exercise_cells(path: Path) -> list:
    return [
        cell
        for cell in nbformat.read(str(path), as_version=4).cells
        if cell.cell_type == "code" and str(cell.get("id", "")).startswith("ex-")
    ]


def run_cells(cells: list, prelude: str, cwd: Path) -> dict[str, str]:
    """Execute ``prelude`` then ``cells`` in one fresh kernel; cell id -> its printed text."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(prelude), *(nbformat.from_dict(c) for c in cells)]
    NotebookClient(
        nb, kernel_name=KERNEL_NAME, timeout=600, resources={"metadata": {"path": str(cwd)}}
    ).execute()
    printed = {}
    for cell in nb.cells[1:]:
        texts = []
        for output in cell.outputs:
            if output.output_type == "stream":
                texts.append(output.text)
            elif output.output_type in ("execute_result", "display_data"):
                texts.append(output.data.get("text/plain", ""))
        printed[cell.id] = "".join(texts)
    return printed


def prelude(solved: bool | None, run_dir: Path) -> str:
    """What the cells before the exercises define: 03's imports, 04's settings and knobs (a
    local project; the worker pool check compares with the kit's specs for them)."""
    return (
        f"SOLVED = {solved!r}\n"
        "from pathlib import Path\n"
        "from labkit.cloud.settings import Settings\n"
        "from labkit.course import views\n"
        "from trainer import data, distribution\n"
        f"run_dir = Path({str(run_dir)!r})\n"
        "settings = Settings(mode='local', project_id='local-project', bucket='exercise-test')\n"
        "knobs = settings.knobs(profile='job')\n"
    )


def test_the_notebooks_hold_one_exercise_and_one_check_per_function():
    cells = exercise_cells(NB03)
    tagged = {
        tag: [c for c in cells if tag in c.metadata.get("tags", [])]
        for tag in ("exercise", "exercise-check")
    }
    defined = [c.source.split("def ", 1)[1].split("(", 1)[0] for c in tagged["exercise"]]
    assert sorted(defined) == sorted(exercises.names())
    checked = [c.source.split(" = ", 1)[0] for c in tagged["exercise-check"]]
    assert sorted(checked) == sorted(exercises.names())
    assert any("exercise" in c.metadata.get("tags", []) for c in exercise_cells(NB04))
    for path in (NB03, NB04):
        nb = nbformat.read(str(path), as_version=4)
        (params,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert "SOLVED = None" in params.source, path.name


@pytest.mark.timeout(600)
def test_unsolved_exercises_print_their_hints_not_tracebacks(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    printed = run_cells(exercise_cells(NB03), prelude(None, run_dir), tmp_path)
    checks = [c.id for c in exercise_cells(NB03) if "exercise-check" in c.metadata.get("tags", [])]
    assert len(checks) == len(exercises.names())
    for cell_id in checks:
        assert ": not yet (" in printed[cell_id] and "\nhint: " in printed[cell_id], (
            cell_id,
            printed[cell_id],
        )
    assert "not written yet: finish" in printed["ex-write"]
    assert "no trainer to run yet" in printed["ex-run-cluster"]
    assert "nothing ran" in printed["ex-run-check"]
    assert "not written yet" in printed["ex-side-by-side"]

    # 04 after a 03 whose trainer exists: the blank Dockerfile gets its hint.
    exercises.write_trainer(run_dir / "cassava", [exercises.solution(n) for n in exercises.names()])
    printed = run_cells(exercise_cells(NB04), prelude(None, run_dir), tmp_path)
    assert "Dockerfile: not yet" in printed["ex-docker-check"]
    assert "hint: write the four steps" in printed["ex-docker-check"]
    assert "no image to run yet" in printed["ex-docker-run"]
    assert "no job ran" in printed["ex-docker-run-check"]
    assert "worker_pool_specs: not yet (0 of 6" in printed["ex-pools-check"]
    assert "hint: worker_pool_specs: has no pools" in printed["ex-pools-check"]


@pytest.mark.timeout(600)
def test_solved_exercises_pass_and_write_the_trainer(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    cells = [c for c in exercise_cells(NB03) if c.id not in TRAINING_CELLS]
    printed = run_cells(cells, prelude(True, run_dir), tmp_path)
    for cell in cells:
        if "exercise-check" in cell.metadata.get("tags", []):
            assert "SOLVED = True" in printed[cell.id] and ": passed (" in printed[cell.id], (
                printed[cell.id]
            )
    assert (run_dir / "cassava" / "trainer" / "task.py").is_file()
    assert "=== who is the chief ===" in printed["ex-side-by-side"]
    cells = [c for c in exercise_cells(NB04) if c.id not in TRAINING_CELLS]
    printed = run_cells(cells, prelude(True, run_dir), tmp_path)
    assert "Dockerfile: passed" in printed["ex-docker-check"]
    assert "worker_pool_specs: passed (6 of 6" in printed["ex-pools-check"]


@pytest.mark.parametrize("name", [NB03.name, NB04.name])
def test_every_edition_carries_the_same_exercise_cells(name):
    """Other editions (zh-CN) translate only the comments and docstrings of code cells: the
    same exercises, checks and SOLVED parameter run there, so the tests above hold for them."""
    from labkit.i18n.notebooks import code_fingerprint

    def code_of(path: Path) -> dict[str, tuple[str, list[str]]]:
        return {
            c.id: (code_fingerprint(c.source), c.metadata.get("tags", []))
            for c in exercise_cells(path)
        }

    english = code_of(NOTEBOOK_DIR / name)
    editions = [d for d in sorted(NOTEBOOK_DIR.iterdir()) if d.is_dir() and (d / name).is_file()]
    for folder in editions:
        cells = code_of(folder / name)
        if not cells:
            pytest.skip(
                f"{folder.name}/{name} has no exercise cells yet: python -m labkit i18n sync"
            )
        differ = sorted(k for k in english.keys() | cells.keys() if english.get(k) != cells.get(k))
        assert not differ, f"{folder.name}/{name}: exercise cells {differ} differ from the English"
