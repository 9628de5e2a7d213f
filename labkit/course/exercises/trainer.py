"""The learner's own trainer: assembled from their functions, run as 2 workers, checked.

`write_trainer` puts the codelab's code (`template_task.py`) and the learner's functions
(their source, read with `inspect.getsource`) into ``<folder>/trainer/task.py``: the
codelab's layout, a folder that notebook 04's Dockerfile copies into the image.
`run_trainer` starts it through `labkit.local.cluster.run_cluster` as a chief and a worker, with
the TF_CONFIG and AIP_MODEL_DIR Vertex AI would give them; `check_run` proves the chief's
model is in the model folder and loads, every worker saved, and no temporary copy is left.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from labkit.course.exercises import checks
from labkit.i18n import gettext

# Read as text (importing it would import TensorFlow): the codelab's code around the marker.
TEMPLATE_FILE = Path(__file__).with_name("template_task.py")
MARKER = "# ==== YOUR FUNCTIONS (written in notebook 03) ===="
# The template's first lines speak to the kit's linter and its readers, not to the learner.
TEMPLATE_PREAMBLE_LINES = 4
# The learner's run: tiny on purpose (the machine is shared, the lab has a time budget).
# Without these variables the trainer uses the codelab's values (300x300, 64 per replica).
SMALL_RUN_ENV: dict[str, str] = {
    "LAB_IMAGE_SIZE": "32",
    "LAB_BATCH_SIZE": "8",
    "LAB_EPOCHS": "1",
    "LAB_STEPS_PER_EPOCH": "2",
    "LAB_WEIGHTS": "none",
}
SAVED_LINE = "[my trainer]"


def function_source(fn: Callable) -> str:
    """A function's source as written (a notebook cell's or a module's), without decorators."""
    source = textwrap.dedent(inspect.getsource(fn))
    lines = source.splitlines()
    while lines and lines[0].lstrip().startswith("@"):
        lines.pop(0)
    return "\n".join(lines).rstrip() + "\n"


def assemble(functions: Sequence[Callable]) -> str:
    """The text of the learner's task.py: the template with their functions at the marker."""
    template = TEMPLATE_FILE.read_text().splitlines()[TEMPLATE_PREAMBLE_LINES:]
    text = "\n".join(template) + "\n"
    if MARKER not in text:
        raise RuntimeError(f"{TEMPLATE_FILE} lost its marker line {MARKER!r}")
    body = "\n\n".join(function_source(fn) for fn in functions)
    text = text.replace(MARKER, MARKER + "\n\n\n" + body.rstrip(), 1)
    compile(text, "trainer/task.py", "exec")  # a SyntaxError now, not in the workers
    return text


def write_trainer(folder: str | Path, functions: Sequence[Callable]) -> Path | None:
    """``folder/trainer/task.py`` (and an empty ``__init__.py``) from the learner's functions.

    Every function is checked first; while one fails, nothing is written and the names of
    the exercises still to do are printed (no traceback), so a learner who skipped one
    sees what is missing.
    """
    by_name = {getattr(fn, "__name__", repr(fn)): fn for fn in functions}
    missing = [name for name in checks.CHECKS if name not in by_name]
    failing = [
        name
        for name, fn in by_name.items()
        if name in checks.CHECKS and not checks.CHECKS[name](fn).passed
    ]
    if missing or failing:
        print(
            gettext(
                "not written yet: finish {todo} first (the check under each exercise says what "
                "is missing)"
            ).format(todo=gettext(", ").join(missing + failing))
        )
        return None
    ordered = [by_name[name] for name in checks.CHECKS]
    package = Path(folder) / "trainer"
    package.mkdir(parents=True, exist_ok=True)
    # With __init__.py the folder is a regular package, found before the kit's own `trainer`.
    (package / "__init__.py").write_text("")
    task = package / "task.py"
    task.write_text(assemble(ordered))
    lines = len(task.read_text().splitlines())
    print(gettext("wrote {path} ({lines} lines)").format(path=task, lines=lines))
    return task


def run_trainer(
    task_file: Path | None,
    out_dir: str | Path,
    data_dir: str | None = None,
    *,
    workers: int = 2,
    env: Mapping[str, str] | None = None,
    timeout: float | None = 900,
) -> Any:
    """Run ``python -m trainer.task`` from the learner's folder as a chief and workers.

    ``out_dir`` stands for the job's output folder: the model goes to ``out_dir/model``
    (AIP_MODEL_DIR). ``data_dir`` is the TFDS data dir holding the prepared cassava.
    Returns `labkit.local.cluster.ClusterResult`, or None when there is no trainer yet.
    """
    from labkit.local.cluster import outcome_words, run_cluster

    if task_file is None:
        print(
            gettext(
                "no trainer to run yet: finish the exercises above, then run write_trainer again"
            )
        )
        return None
    folder = Path(task_file).parent.parent
    out = Path(out_dir)
    variables = {**SMALL_RUN_ENV, **(env or {})}
    if data_dir:
        variables["TFDS_DATA_DIR"] = str(data_dir)
    result = run_cluster(
        ["python", "-m", "trainer.task"],
        workers=workers,
        chief=True,
        logs_dir=out / "replica-logs",
        timeout=timeout,
        env=variables,
        cwd=folder,
        base_output_dir=str(out),
    )
    print(
        gettext("{workers} workers: {outcome} in {seconds:.0f} s").format(
            workers=workers, outcome=outcome_words(result.outcome), seconds=result.wall_seconds
        )
    )
    return result


def check_saved_model(
    model_dir: str | Path, out_dir: str | Path, logs: Mapping[str, str]
) -> checks.Outcome:
    """The chief's SavedModel in ``model_dir`` loads, no workertemp folder is left under
    ``out_dir``, and every replica's log says it saved (``logs``: role -> log text)."""
    lines, hint = [], ""
    model_dir = Path(model_dir)
    pb = model_dir / "saved_model.pb"
    if pb.is_file():
        import tensorflow as tf

        try:
            loaded = tf.saved_model.load(str(model_dir))
            signatures = sorted(loaded.signatures.keys())
            loads = gettext("the chief's model is in {path} and loads (signatures {signatures})")
            lines.append(f"{checks.PASS} " + loads.format(path=model_dir, signatures=signatures))
        except Exception as err:  # a model that does not load fails the check
            error = f"{type(err).__name__}: {err}"
            fails = gettext("{path} does not load: {error}").format(path=model_dir, error=error)
            lines.append(f"{checks.FAIL} {fails}")
            hint = hint or gettext("the chief's SavedModel does not load; see the chief's log")
    else:
        missing = gettext("no SavedModel in {path}").format(path=model_dir)
        lines.append(f"{checks.FAIL} {missing}")
        hint = hint or gettext(
            "nothing at {path}: the chief must save to the model path itself "
            "(write_filepath for the chief returns filepath)"
        ).format(path=model_dir)
    leftovers = sorted(str(p) for p in Path(out_dir).rglob("*workertemp*"))
    if leftovers:
        left = gettext("temporary copies left: {paths}").format(paths=leftovers)
        lines.append(f"{checks.FAIL} {left}")
        hint = hint or gettext(
            "a worker's temporary copy is still there: main() removes "
            "os.path.dirname(write_model_path) on non-chiefs"
        )
    else:
        lines.append(f"{checks.PASS} " + gettext("no worker's temporary copy is left"))
    for role, text in logs.items():
        saved = [
            line for line in text.splitlines() if SAVED_LINE in line and "saved the model" in line
        ]
        if saved:
            said = saved[-1].split(SAVED_LINE, 1)[1].strip()
            lines.append(
                f"{checks.PASS} " + gettext("{role} saved: {line}").format(role=role, line=said)
            )
        else:
            lines.append(f"{checks.FAIL} " + gettext("{role} never saved").format(role=role))
            hint = hint or gettext(
                "{role} did not save: every worker must call model.save (it has collective ops)"
            ).format(role=role)
    return checks.Outcome(gettext("your trainer on 2 workers"), not hint, lines, hint, "checks")


def check_run(result: Any, out_dir: str | Path, *, solved: bool = False) -> checks.Outcome | None:
    """`check_saved_model` for a `run_trainer` result (None: nothing ran, nothing to check).

    With ``solved`` (the kit's solutions ran) a failure raises, so CI cannot miss it.
    """
    from labkit.local.cluster import outcome_words

    if result is None:
        if solved:
            raise AssertionError("SOLVED = True but the solved trainer did not run")
        print(gettext("nothing ran: finish the exercises and write the trainer first"))
        return None
    if not result.ok:
        role = result.failed_role or next(iter(result.logs))
        tail = "\n".join(result.log_text(role).splitlines()[-15:])
        outcome = checks.Outcome(
            gettext("your trainer on 2 workers"),
            False,
            [f"{checks.FAIL} {outcome_words(result.outcome)}: {result.message}"],
            gettext("{role} failed; the end of its log ({log}):").format(
                role=role, log=result.logs[role]
            )
            + f"\n{tail}",
            "checks",
        )
    else:
        logs = {role: result.log_text(role) for role in result.logs}
        outcome = check_saved_model(Path(out_dir) / "model", out_dir, logs)
    print(outcome)
    if solved and not outcome.passed:
        raise AssertionError(f"the solved trainer's run fails its check:\n{outcome}")
    return outcome
