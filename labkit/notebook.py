"""Old home of the notebook helpers, kept only so that callers outside the notebooks keep
working while they move to the modules by subject (issue 20):

- `labkit.results`: the run folder and results.json (`run_folder`, `record`, `load_results`,
  `require_result`);
- `labkit.views`: tables, source, files, trees (`Table`, `Code`, `show_source`, `show_file`,
  `show_settings`, `tree`, `matching_lines`, `find_leftovers`);
- `labkit.readiness`: set-up checks (`package_versions`, `Check`, `readiness`,
  `assert_ready`); `labkit.pins`: the pins (`pinned_versions`);
- `labkit.dataviews`, `labkit.models`, `labkit.clusterviews`, `labkit.jobs`: data, models,
  the multi-worker views, Vertex AI jobs.

Nothing here has logic of its own; import from the modules above. This module goes when the
last importer has moved (the list is in the issue 20 hand-over).
"""

from __future__ import annotations

from typing import Any

from labkit import setup_checks
from labkit.pins import pinned_versions
from labkit.readiness import SHOWN_PACKAGES, Check, package_versions, readiness
from labkit.results import RESULTS_FILE, load_results, record, require_result, run_folder
from labkit.settings import Settings
from labkit.views import (
    Code,
    Table,
    find_leftovers,
    matching_lines,
    show_file,
    show_settings,
    show_source,
    tree,
)

__all__ = [
    "RESULTS_FILE",
    "SHOWN_PACKAGES",
    "Check",
    "Code",
    "Table",
    "enable_apis_command",
    "find_leftovers",
    "job_model_dir",
    "load_results",
    "matching_lines",
    "package_versions",
    "pinned_versions",
    "readiness",
    "record",
    "require_result",
    "run_folder",
    "savedmodel_path",
    "show_file",
    "show_settings",
    "show_source",
    "trainer_args",
    "tree",
]


def enable_apis_command(settings: Settings) -> list[str]:
    """`labkit.setup_checks.enable_apis_command` for the settings' project."""
    return setup_checks.enable_apis_command(settings.project_id)


def job_model_dir(job: Any, settings: Settings) -> str:
    """`labkit.jobs.job_model_dir` (imported on use: it loads the SDK's console client)."""
    from labkit.jobs import job_model_dir as model_dir

    return model_dir(job, settings)


def savedmodel_path(model_dir: str) -> str:
    """`labkit.models.savedmodel_path` (imported on use: `labkit.models` loads TensorFlow)."""
    from labkit.models import savedmodel_path as path

    return path(model_dir)


def trainer_args(knobs: Any) -> list[str]:
    """`trainer.config.args_for` over the knobs (the trainer's one list of options)."""
    from labkit.specs import trainer_args_from_knobs

    return trainer_args_from_knobs(knobs)
