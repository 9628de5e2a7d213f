"""The run folder and what each notebook found, in ``results.json``.

Each notebook's kit calls record what they measured (`record`) into ``results.json`` in the
run folder; the next notebook (02 -> 03 -> 04), the lab runner's report and the tests read
it back (`load_results`). Plain JSON, readable without papermill or scrapbook. Notebooks
never call `record` themselves: the functions that produce a result take ``run_dir`` and
record it, so a notebook shows the lab's steps, not its book-keeping.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from labkit.cloud import paths
from labkit.cloud.settings import Settings
from labkit.i18n import gettext

RESULTS_FILE = "results.json"


def run_folder(settings: Settings, run_dir: str | Path | None = None) -> Path:
    """Where this lab run keeps its results: ``run_dir``, else ``<repo>/runs/<run id>``.

    `make lab` passes its timestamped folder; in Jupyter every notebook of one run (same
    saved settings, same run id) lands in the same folder.
    """
    folder = Path(run_dir) if run_dir else paths.REPO_ROOT / "runs" / settings.run_id
    folder.mkdir(parents=True, exist_ok=True)
    return folder.resolve()


def jsonable(value: Any) -> Any:
    """numpy scalars and arrays, dataclasses, paths and tuples -> plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return jsonable(value.tolist())
    if hasattr(value, "numpy"):  # tf EagerTensors
        return jsonable(value.numpy())
    return value


def record(run_dir: str | Path, name: str, value: Any) -> None:
    """Store ``value`` under ``name`` in the run folder's results.json (merged, atomic)."""
    path = Path(run_dir) / RESULTS_FILE
    results = load_results(run_dir)
    results[name] = jsonable(value)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
    print(gettext("recorded {name!r} in {path}").format(name=name, path=path))


def load_results(run_dir: str | Path) -> dict[str, Any]:
    """Everything recorded so far in this run folder (empty when nothing was)."""
    path = Path(run_dir) / RESULTS_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def require_result(run_dir: str | Path, name: str, notebook: str) -> dict[str, Any]:
    """A result an earlier notebook recorded, or an error saying which notebook to run."""
    results = load_results(run_dir)
    if name not in results:
        raise LookupError(
            f"no {name!r} result in {Path(run_dir) / RESULTS_FILE}: run notebook {notebook} "
            "first, with the same RUN_DIR (or the same saved settings)."
        )
    return results[name]
