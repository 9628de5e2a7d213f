"""`python -m labkit lab`: run the lab's notebooks end to end, or only its training.

    python -m labkit lab                         # 00 -> 05 in local mode into runs/<timestamp>/
    python -m labkit lab --notebooks 00 01       # some of them
    python -m labkit lab --param EPOCHS=1        # papermill parameters (JSON values)
    python -m labkit lab --train-only            # just a 2-worker training on the sample
    python -m labkit lab --update-references     # re-record the nbval reference outputs
    python -m labkit lab --strip                 # strip outputs, keeping the references

Each notebook is executed by papermill (kernel ``python3``: this interpreter) with
``MODE="local"`` and ``RUN_DIR`` set to the run folder; the run folder gets the executed
notebook and an HTML export of each, plus the ``results.json`` the notebooks record. The
exit status is non-zero as soon as a cell fails; the later notebooks are then skipped and
the local Vertex AI service is stopped (its state stays for debugging).

Reference outputs for nbval: the code cells tagged ``nbval-check-output`` (nbval's own
cell tag; also tagged ``keep_output`` for nbstripout) keep their outputs and execution count
in the committed notebooks; every other cell is stored without outputs. ``--update-references`` executes the
notebooks with `CHECK_PARAMETERS` and copies the marked cells' outputs back; ``--strip``
removes every other output (run it after saving a notebook from Jupyter, or after nbstripout,
which drops the references' execution counts).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from labkit.cloud import paths
from labkit.course.results import RESULTS_FILE, load_results
from labkit.i18n.notebooks import REFERENCE_TAG as REFERENCE_TAG  # tests and nbcheck use it
from labkit.i18n.notebooks import is_reference as is_reference_cell
from trainer.config import args_for

NOTEBOOK_DIR = paths.REPO_ROOT / "notebooks"
NOTEBOOKS = (
    "00_environment_setup",
    "01_data_exploration",
    "02_single_gpu_baseline",
    "03_mwms_trainer",
    "04_sdk_job_submission",
    "05_cleanup",
)
KERNEL_NAME = "python3"
# nbval compares the outputs of the cells tagged REFERENCE_TAG (nbval 0.11 `metadata_tags`,
# the tag form of its NBVAL_CHECK_OUTPUT comment); under --nbval-lax every other cell only
# has to run.
KEEP_OUTPUT_TAG = "keep_output"
PARAMETERS_TAG = "parameters"
CELL_TIMEOUT_S = 1200
# The parameters CI runs the notebooks with (tests/test_notebooks.py) and the reference
# outputs are recorded with: the local mode's own defaults, i.e. exactly what `make lab` runs.
# SOLVED: the exercises of 03 and 04 take the kit's solutions, so an unattended run (CI, an
# instructor's `make lab`) goes through the solved path end to end; a learner's Jupyter run
# keeps the notebook's own default (None: write the exercises yourself).
CHECK_PARAMETERS: dict[str, Any] = {"MODE": "local", "SOLVED": True}
# Notebook metadata worth keeping in git; the rest (papermill's, widgets) is run noise.
KEPT_NOTEBOOK_METADATA = ("kernelspec", "language_info")
KEPT_CELL_METADATA = ("tags", "i18n")  # i18n: which English text a zh-CN cell translates


@dataclasses.dataclass
class NotebookRun:
    """What happened to one notebook of a lab run."""

    name: str
    status: str  # ok | failed | skipped
    wall_s: float = 0.0
    executed: Path | None = None
    html: Path | None = None
    error: str = ""


@dataclasses.dataclass
class LabRun:
    run_dir: Path
    notebooks: list[NotebookRun]

    @property
    def ok(self) -> bool:
        return all(run.status == "ok" for run in self.notebooks)

    @property
    def results(self) -> dict[str, Any]:
        return load_results(self.run_dir)


# --------------------------------------------------------------------------- choosing


def notebook_dir(lang: str = "en") -> Path:
    """``notebooks/`` for the English edition, ``notebooks/zh-CN/`` for the Chinese one."""
    from labkit.i18n import normalize_language

    lang = normalize_language(lang)
    return NOTEBOOK_DIR if lang == "en" else NOTEBOOK_DIR / lang


def resolve_notebooks(selection: Sequence[str] | None = None, lang: str = "en") -> list[Path]:
    """Notebook paths for names like ``00``, ``03_mwms_trainer`` or a path; all by default;
    from the edition ``lang`` (``en`` or ``zh-CN``)."""
    folder = notebook_dir(lang)
    if not selection:
        return [folder / f"{name}.ipynb" for name in NOTEBOOKS]
    found = []
    for item in selection:
        path = Path(item)
        if path.suffix == ".ipynb" and path.is_file():
            found.append(path.resolve())
            continue
        matches = [n for n in NOTEBOOKS if n == item or n.split("_", 1)[0] == item]
        if len(matches) != 1:
            raise ValueError(
                f"unknown notebook {item!r}: use a number (00-05), a name such as "
                f"{NOTEBOOKS[3]!r}, or the path of an .ipynb file"
            )
        found.append(folder / f"{matches[0]}.ipynb")
    return found


def new_run_dir(root: Path | None = None, suffix: str = "") -> Path:
    """``runs/<YYYYmmdd-HHMMSS><suffix>`` (a counter is added if it exists already)."""
    root = Path(root or paths.REPO_ROOT / "runs")
    stamp = time.strftime("%Y%m%d-%H%M%S") + suffix
    folder, n = root / stamp, 1
    while folder.exists():
        n += 1
        folder = root / f"{stamp}-{n}"
    folder.mkdir(parents=True)
    return folder.resolve()


def declared_parameters(path: Path) -> set[str]:
    """The names the notebook's ``parameters`` cell defines (papermill's own parser)."""
    import papermill

    return set(papermill.inspect_notebook(str(path)))


def parameters_for(path: Path, wanted: Mapping[str, Any]) -> dict[str, Any]:
    """The subset of ``wanted`` that this notebook declares (others would only warn)."""
    declared = declared_parameters(path)
    if not declared:
        raise ValueError(
            f"{path.name} has no cell tagged {PARAMETERS_TAG!r}: papermill cannot set its "
            "parameters. Tag the cell that defines MODE, PROJECT_ID, REGION, BUCKET."
        )
    return {k: v for k, v in wanted.items() if k in declared}


def parse_param(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` with VALUE as JSON when it parses (1, 0.5, null, true), else text."""
    name, sep, raw = text.partition("=")
    if not sep or not name.isidentifier():
        raise ValueError(f"--param {text!r}: write NAME=VALUE, e.g. EPOCHS=1 or MODE=local")
    try:
        return name, json.loads(raw)
    except json.JSONDecodeError:
        return name, raw


# --------------------------------------------------------------------------- executing


def prepare(path: Path, out: Path, parameters: Mapping[str, Any]) -> Path:
    """A copy of the notebook with its parameters injected, not executed (outputs kept)."""
    import papermill

    papermill.execute_notebook(
        str(path),
        str(out),
        parameters=parameters_for(path, parameters),
        prepare_only=True,
        kernel_name=KERNEL_NAME,
        progress_bar=False,
    )
    return out


# nbconvert's JupyterLab template drops a PNG's alternative text (only its classic template
# reads it): this one puts the ``alt`` that `labkit.course.plots` gives each chart on the <img>.
ALT_TEXT_TEMPLATE = """{%- extends 'index.html.j2' -%}
{% block data_png scoped %}
<div class="jp-RenderedImage jp-OutputArea-output {{ extra_class }}">
<img src="data:image/png;base64,{{ output.data['image/png'] | escape_html }}"
{%- set alttext = output | get_metadata('alt', 'image/png') -%}
{%- if alttext %} alt="{{ alttext | escape_html }}"{%- endif %}>
</div>
{%- endblock data_png %}
"""


def export_html(executed: Path) -> Path:
    """The executed notebook as a self-contained HTML page (charts embedded, with their
    alternative text)."""
    import jinja2
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(
        extra_loaders=[jinja2.DictLoader({"alt_index.html.j2": ALT_TEXT_TEMPLATE})],
        template_file="alt_index.html.j2",
    )
    body, _ = exporter.from_filename(str(executed))
    html = executed.with_suffix(".html")
    html.write_text(body, encoding="utf-8")
    return html


def execute(
    path: Path, run_dir: Path, parameters: Mapping[str, Any], timeout: float = CELL_TIMEOUT_S
) -> NotebookRun:
    """Execute one notebook with papermill into ``run_dir`` and export it to HTML."""
    import papermill

    from labkit.course.kernel_log import LOG_FILE, logging_kernel_manager

    out = run_dir / path.name
    started = time.perf_counter()
    status, error = "ok", ""
    try:
        papermill.execute_notebook(
            str(path),
            str(out),
            parameters=parameters_for(path, parameters),
            kernel_name=KERNEL_NAME,
            cwd=str(path.parent),
            progress_bar=False,
            execution_timeout=timeout,
            kernel_manager_class=logging_kernel_manager(run_dir / LOG_FILE),
        )
    except papermill.PapermillExecutionError as err:
        status = "failed"
        error = f"cell {err.exec_count}: {err.ename}: {str(err.evalue)[:300]}"
    except Exception as err:  # kernel died, timeout, unreadable notebook: still a failure
        status = "failed"
        error = f"{type(err).__name__}: {str(err)[:300]}"
    wall = time.perf_counter() - started
    html = export_html(out) if out.is_file() else None
    return NotebookRun(path.stem, status, wall, out if out.is_file() else None, html, error)


def _stop_local_service() -> None:
    """After a failure: no process of the lab stays behind (the state is kept)."""
    from labkit.local.emulator import control

    if control.status().running:
        control.stop()


def run_lab(
    notebooks: Sequence[Path] | None = None,
    run_dir: Path | None = None,
    parameters: Mapping[str, Any] | None = None,
    *,
    timeout: float = CELL_TIMEOUT_S,
    echo: Callable[[str], Any] = print,
) -> LabRun:
    """Execute the notebooks in order; stop at the first failure (the rest are skipped)."""
    from labkit.i18n import gettext as tr

    paths_ = list(notebooks or resolve_notebooks())
    run_dir = Path(run_dir) if run_dir else new_run_dir()
    run_dir.mkdir(parents=True, exist_ok=True)
    wanted = {**CHECK_PARAMETERS, **(parameters or {}), "RUN_DIR": str(run_dir)}
    runs: list[NotebookRun] = []
    for path in paths_:
        if runs and runs[-1].status != "ok":
            runs.append(NotebookRun(path.stem, "skipped"))
            continue
        echo(f"[lab] {path.stem} ...")
        run = execute(path, run_dir, wanted, timeout)
        done = tr("{notebook}: {status} in {wall:.1f} s").format(
            notebook=path.stem, status=tr(run.status), wall=run.wall_s
        )
        echo(f"[lab] {done} {run.error}".rstrip())
        runs.append(run)
    result = LabRun(run_dir, runs)
    write_report(result, wanted)
    if not result.ok:
        _stop_local_service()
    return result


# --------------------------------------------------------------------------- report

REPORT_FILE = "index.html"
SCALARS = (str, int, float, bool, type(None))


def _scalar_rows(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """(name, value) for the scalar fields of a recorded result; long lists are counted."""
    if isinstance(value, dict):
        rows = []
        for key, item in value.items():
            rows += _scalar_rows(item, f"{prefix}{key}.")
        return rows
    name = prefix.rstrip(".")
    if isinstance(value, list):
        if len(value) <= 8 and all(isinstance(v, SCALARS) for v in value):
            return [(name, ", ".join(map(_fmt, value)))]
        return [(name, f"{len(value)} values")]
    return [(name, _fmt(value))]


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def report_html(run: LabRun, parameters: Mapping[str, Any]) -> str:
    """The run's one-page summary: parameters, each notebook's status, time and links, what
    the run established (`labkit.course.claims`) and every recorded number."""
    import html

    from labkit.course import claims
    from labkit.i18n import current_language
    from labkit.i18n import gettext as tr

    esc = html.escape
    total = sum(nb.wall_s for nb in run.notebooks)
    rows = []
    for nb in run.notebooks:
        links = " ".join(
            f'<a href="{esc(path.name)}">{label}</a>'
            for path, label in ((nb.html, "report"), (nb.executed, "notebook"))
            if path is not None
        )
        wall = f"{nb.wall_s:.0f} s" if nb.status != "skipped" else "-"
        rows.append(
            f"<tr><td>{esc(nb.name)}</td><td>{esc(nb.status)}</td><td>{wall}</td>"
            f"<td>{links}</td><td>{esc(nb.error)}</td></tr>"
        )
    params = "".join(
        f"<tr><td>{esc(str(k))}</td><td>{esc(_fmt(v))}</td></tr>"
        for k, v in sorted(parameters.items())
    )
    results = run.results
    findings = []
    if results.get("mwms"):
        try:
            classes = len(claims.read_metrics(results["mwms"]).get("class_names") or []) or 5
            findings = claims.summary_lines(results, classes)
        except (OSError, KeyError, ValueError) as err:
            findings = [f"the multi-worker results could not be read: {err}"]
    elif results.get("baseline"):
        findings = [
            claims.accuracy_vs_chance(results["baseline"].get("val_accuracy"), 5, "baseline")
        ]
    recorded = "".join(
        f"<tr><td>{esc(name)}</td><td>{esc(value)}</td></tr>"
        for key, value in results.items()
        for name, value in _scalar_rows(value, f"{key}.")
    )
    found = "".join(f"<li>{esc(line)}</li>" for line in findings) or (
        f"<li>{tr('nothing recorded')}</li>"
    )
    from labkit.local.console.client import SCREENSHOTS  # notebook 04's console route, in Chromium

    shots = "".join(
        f'<figure><img src="{esc(name)}" alt="{esc(what)}" style="max-width:100%;'
        f'border:1px solid #bbb"><figcaption>{esc(name)}</figcaption></figure>'
        for what, name in SCREENSHOTS.items()
        if (run.run_dir / name).is_file()
    )
    shots = f"<h2>{tr('The console route')}</h2>{shots}" if shots else ""
    return f"""<!DOCTYPE html>
<html lang="{current_language()}"><head><meta charset="utf-8"><title>Lab run {esc(run.run_dir.name)}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}
table{{border-collapse:collapse}}td,th{{border:1px solid #bbb;padding:.2em .5em;text-align:left}}</style>
</head><body>
<h1>{tr("Lab run")} {esc(run.run_dir.name)}: {tr("passed") if run.ok else tr("FAILED")}</h1>
<p>{len(run.notebooks)} notebook(s), {total:.0f} s in all. Folder: {esc(str(run.run_dir))}</p>
<h2>{tr("Notebooks")}</h2>
<table><thead><tr><th>{tr("notebook")}</th><th>{tr("status")}</th><th>{tr("time")}</th>
<th>{tr("open")}</th><th>{tr("error")}</th></tr>
</thead><tbody>{"".join(rows)}</tbody></table>
<h2>{tr("What the run did")}</h2><ul>{found}</ul>
{shots}
<h2>{tr("Parameters")}</h2>
<table><thead><tr><th>{tr("name")}</th><th>{tr("value")}</th></tr></thead><tbody>{params}</tbody></table>
<h2>{tr("Recorded results")}</h2>
<p>From <a href="{RESULTS_FILE}">{RESULTS_FILE}</a>.</p>
<table><thead><tr><th>{tr("result")}</th><th>{tr("value")}</th></tr></thead><tbody>{recorded}</tbody></table>
</body></html>
"""


def write_report(run: LabRun, parameters: Mapping[str, Any]) -> Path:
    """``index.html`` in the run folder: the page to open first (see `report_html`)."""
    path = run.run_dir / REPORT_FILE
    path.write_text(report_html(run, parameters), encoding="utf-8")
    return path


def format_summary(run: LabRun) -> str:
    """Per-notebook status and wall time, then where the run's outputs are (in the edition)."""
    from labkit.i18n import gettext as tr
    from labkit.i18n import text_table

    rows: list[list[str]] = []
    errors: dict[int, str] = {}
    for nb in run.notebooks:
        wall = f"{nb.wall_s:.1f} s" if nb.status != "skipped" else "-"
        rows.append([nb.name, tr(nb.status), wall])
        if nb.error:
            errors[len(rows)] = f"    {nb.error}"
    total = sum(nb.wall_s for nb in run.notebooks)
    rows.append([tr("total"), tr("ok") if run.ok else tr("FAILED"), f"{total:.1f} s"])
    table = text_table(
        [tr("notebook"), tr("status"), tr("wall time")],
        rows,
        "<<>",
        sep=" ",
        min_widths=(26, 8, 10),
    ).splitlines()
    lines = [table[0]]
    for i, line in enumerate(table[1:], 1):
        lines.append(line)
        if i in errors:
            lines.append(errors[i])
    lines.append(
        tr("run folder: {run_dir} (executed notebooks and their HTML)").format(run_dir=run.run_dir)
    )
    from labkit.course.kernel_log import LOG_FILE

    if (run.run_dir / LOG_FILE).is_file():
        lines.append(
            tr("log: {path} (the kernels' and TensorFlow's own messages)").format(
                path=run.run_dir / LOG_FILE
            )
        )
    if (run.run_dir / REPORT_FILE).is_file():
        lines.append(
            tr("report: {report} (a one-page summary, links to each)").format(
                report=run.run_dir / REPORT_FILE
            )
        )
    results = run.results
    for key, what in (
        ("mwms", tr("multi-worker run, notebook 03")),
        ("baseline", tr("notebook 02")),
    ):
        if key in results:
            lines.append(
                tr("model ({what}): {model_dir}").format(
                    what=what, model_dir=results[key]["model_dir"]
                )
            )
            lines.append(tr("metrics: {path}").format(path=results[key]["metrics_file"]))
            break
    if results:
        lines.append(tr("results: {path}").format(path=run.run_dir / RESULTS_FILE))
    return "\n".join(lines)


# --------------------------------------------------------------------------- training only


def train_only(
    run_dir: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    timeout: float | None = 1800,
) -> tuple[Any, Path]:
    """A 2-worker training (chief + worker) on the sample through `labkit cluster`.

    Returns the cluster result and the base output folder (``model/``, ``checkpoints/``,
    ``logs/`` under it, as Vertex lays them out).
    """
    from labkit.cloud.settings import load_settings
    from labkit.course.sample import ensure_sample
    from labkit.local.cluster import run_cluster

    ensure_sample()
    settings = load_settings("local")
    knobs = settings.knobs(profile="cluster", **(overrides or {}))
    run_dir = Path(run_dir) if run_dir else new_run_dir(suffix="-train")
    run_dir.mkdir(parents=True, exist_ok=True)
    result = run_cluster(
        ["python", "-m", "trainer.task", *args_for(**knobs)],
        workers=int(knobs["workers"]),
        chief=True,
        logs_dir=run_dir / "logs",
        timeout=timeout,
        base_output_dir=str(run_dir),
    )
    return result, run_dir


# --------------------------------------------------------------------------- references


def strip_notebook(nb: Any) -> Any:
    """Outputs, counts and run metadata removed, except the reference cells' outputs (which
    keep an execution count: nbval skips a reference cell without one)."""
    nb = copy.deepcopy(nb)
    nb.metadata = {k: v for k, v in nb.metadata.items() if k in KEPT_NOTEBOOK_METADATA}
    for cell in nb.cells:
        cell.metadata = {k: v for k, v in cell.metadata.items() if k in KEPT_CELL_METADATA}
        if cell.cell_type != "code":
            continue
        if is_reference_cell(cell):
            tags = cell.metadata.setdefault("tags", [])
            if KEEP_OUTPUT_TAG not in tags:
                tags.append(KEEP_OUTPUT_TAG)
            if cell.outputs and cell.execution_count is None:
                cell.execution_count = 1
        else:
            cell.outputs = []
            cell.execution_count = None
    return nb


def copy_references(source: Any, executed: Any) -> tuple[Any, int]:
    """The source notebook with its reference cells' outputs taken from an executed copy
    (cells matched by their code); returns it and how many were updated."""
    by_code: dict[str, list[Any]] = {}
    for cell in executed.cells:
        if cell.cell_type == "code":
            by_code.setdefault("".join(cell.source), []).append(cell)
    updated = copy.deepcopy(source)
    count = 0
    for cell in updated.cells:
        if not is_reference_cell(cell):
            continue
        matches = by_code.get("".join(cell.source))
        if not matches:
            raise ValueError(
                f"reference cell not found in the executed notebook: {''.join(cell.source)[:80]!r}"
            )
        ran = matches.pop(0)
        cell.outputs = copy.deepcopy(ran.outputs)
        cell.execution_count = ran.execution_count
        count += 1
    return strip_notebook(updated), count


def write_notebook(nb: Any, path: Path) -> None:
    import nbformat

    nbformat.write(nb, str(path))


def read_notebook(path: Path) -> Any:
    import nbformat

    return nbformat.read(str(path), as_version=4)


def update_references(run: LabRun, lang: str = "en") -> dict[str, int]:
    """Write the reference outputs of a successful run back into the edition's notebooks
    (notebooks/ or notebooks/zh-CN/): each edition's references come from a run of its own,
    so a zh-CN learner reads Chinese before running too."""
    if not run.ok:
        raise RuntimeError("the run failed: references are only taken from a run that passed")
    counts = {}
    for nb_run in run.notebooks:
        source_path = notebook_dir(lang) / f"{nb_run.name}.ipynb"
        assert nb_run.executed is not None
        updated, count = copy_references(read_notebook(source_path), read_notebook(nb_run.executed))
        write_notebook(updated, source_path)
        counts[nb_run.name] = count
    return counts


# --------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m labkit lab",
        description="Execute the lab's notebooks (00-05) with papermill in local mode.",
    )
    parser.add_argument("--notebooks", nargs="+", metavar="NB", help="e.g. 00 01 (default: all)")
    parser.add_argument("--out", type=Path, help="the run folder (default: runs/<timestamp>)")
    parser.add_argument(
        "--lang",
        default="en",
        help="the edition: en (notebooks/) or zh-CN (notebooks/zh-CN/, Chinese prose and output)",
    )
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a papermill parameter, e.g. EPOCHS=1 (repeatable)",
    )
    parser.add_argument(
        "--timeout", type=float, default=CELL_TIMEOUT_S, help="seconds allowed per cell"
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument(
        "--train-only",
        action="store_true",
        help="only a 2-worker training on the sample through labkit cluster",
    )
    what.add_argument(
        "--update-references",
        action="store_true",
        help="run with the CI knobs and store the outputs of the cells tagged nbval-check-output",
    )
    what.add_argument(
        "--strip",
        action="store_true",
        help="strip outputs from notebooks/ except the reference cells, then exit",
    )
    return parser


def _main_train_only(args: argparse.Namespace, overrides: dict[str, Any]) -> int:
    knob_overrides = {k.lower(): v for k, v in overrides.items() if k not in ("MODE", "RUN_DIR")}
    result, run_dir = train_only(args.out, knob_overrides)
    # Here, not at the top: trainer.export imports TensorFlow, which the rest of the lab
    # runner (the parent of papermill's kernels) never needs.
    from labkit.i18n import gettext as tr
    from trainer.export import SAVEDMODEL_DIR

    model_dir = run_dir / "model"
    if not result.ok:
        print("[lab]", tr("training failed: {why}").format(why=result.message), file=sys.stderr)
        return 1
    seconds = f"{result.wall_seconds:.1f}"
    print("[lab]", tr("2-worker training succeeded in {seconds} s").format(seconds=seconds))
    places = [
        (tr("model:"), model_dir / SAVEDMODEL_DIR),
        (tr("metrics:"), model_dir / "metrics.json"),
        (tr("logs:"), run_dir / "logs"),
    ]
    width = max(len(label) for label, _ in places) + 1
    for label, path in places:
        print(f"{label.ljust(width)}{path}")
    return 0


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    # TensorFlow's C++ INFO/WARNING start-up lines (CUDA probing, CPU flags) from this process,
    # the kernels and the replicas they start would bury the lab's own summary lines.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        overrides = dict(parse_param(p) for p in args.param)
        notebooks = resolve_notebooks(args.notebooks, args.lang)
    except ValueError as err:
        print(f"lab: {err}", file=sys.stderr)
        return 2
    if args.strip:
        for path in notebooks:
            write_notebook(strip_notebook(read_notebook(path)), path)
            print(f"stripped {path}")
        return 0
    if args.train_only:
        from labkit.i18n import set_language

        set_language(args.lang)  # the summary lines in the edition's language
        return _main_train_only(args, overrides)
    parameters = {**CHECK_PARAMETERS, **overrides}
    if args.update_references and overrides:
        print("lab: --update-references records with CHECK_PARAMETERS only", file=sys.stderr)
        return 2
    from labkit.i18n import ENV_VAR, normalize_language
    from labkit.i18n import gettext as tr

    # the kernels inherit it: the kit's summaries and charts follow the edition being run
    os.environ[ENV_VAR] = normalize_language(args.lang)
    from labkit.cloud import tflogs
    from labkit.course.sample import ensure_sample

    # Making the sample imports TensorFlow, whose C++ start-up lines (the absl pre-init notice,
    # cudart_stub) go straight to descriptor 2: to the log file, not the learner's screen.
    with tflogs.stderr_to(tflogs.kernel_log_path()):
        sample = ensure_sample()
    print("[lab]", tr("sample data: {path}").format(path=sample.tfds_data_dir))
    run = run_lab(notebooks, args.out, parameters, timeout=args.timeout)
    print(format_summary(run))
    if args.update_references and run.ok:
        for name, count in update_references(run, normalize_language(args.lang)).items():
            print(
                "[lab]",
                tr("{name}: {count} reference cell(s) updated").format(name=name, count=count),
            )
    return 0 if run.ok else 1
