"""The trainer reads as the lab's outline: short functions, `run` calling named steps.

No TensorFlow here: these read the source with `ast`, as a reviewer would.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAINER = ROOT / "trainer"
MAX_FUNCTION_LINES = 60
# The codelab's MWMS points, each a step `run` calls by name, in this order.
RUN_STEPS = (
    "create_strategy",
    "scale_batch",
    "shard_data",
    "build_in_scope",
    "fit_with_callbacks",
    "save_where_this_task_should",
)


def _functions(path: Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_no_function_in_trainer_is_longer_than_60_lines():
    files = sorted(TRAINER.rglob("*.py"))
    assert len(files) >= 8, files
    too_long = [
        f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name} ({fn.end_lineno - fn.lineno + 1} lines)"
        for path in files
        for fn in _functions(path)
        if fn.end_lineno - fn.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not too_long, too_long


def test_run_calls_the_codelab_steps_in_order_and_stays_short():
    run = next(fn for fn in _functions(TRAINER / "train.py") if fn.name == "run")
    calls = [
        node.func.id
        for node in ast.walk(run)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    ]
    order = [calls.index(step) for step in RUN_STEPS]
    assert order == sorted(order), calls
    assert run.end_lineno - run.lineno + 1 <= 25


def test_config_imports_no_tensorflow():
    code = (
        "import sys, trainer.config, labkit.cloud.specs; "
        "print('tensorflow' in sys.modules, 'tf_keras' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "False"]
