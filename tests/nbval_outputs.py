"""A pytest plugin for the nbval lab run (tests/lab_runs.py): it writes each notebook nbval
executed, with the outputs of this run, to ``$NBVAL_EXECUTED_DIR/NAME.ipynb``.

nbval compares the reference cells and keeps nothing; the tests that read what a learner sees
(the zh-CN output scan, the log-noise check) need every cell's outputs of that same run, so
the lab is not run a second time to get them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

_executed: dict[str, Any] = {}


def pytest_runtest_teardown(item: Any) -> None:
    cell, outputs = getattr(item, "cell", None), getattr(item, "test_outputs", None)
    if cell is None or not hasattr(item, "cell_num"):
        return  # not an nbval cell
    cell.outputs = list(outputs or [])
    _executed[str(item.parent.path)] = item.parent.nb


def pytest_sessionfinish(session: Any) -> None:
    import nbformat

    folder = Path(os.environ["NBVAL_EXECUTED_DIR"])
    folder.mkdir(parents=True, exist_ok=True)
    for path, nb in _executed.items():
        nbformat.write(nb, str(folder / Path(path).name))
