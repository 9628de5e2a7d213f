"""Notebook 04's SDK cells are cells a learner can keep: they run in a bare kernel.

The cells tagged ``sdk-job`` (``aiplatform.init(...)``, ``aiplatform.CustomJob(...)`` and
``job.run(...)``) are taken from the English notebook and executed in a fresh kernel that has
nothing but what a learner's own project would have: ``google.cloud.aiplatform``, the values
of 04's step 1 as literals, their ``worker_pool_specs`` and the local endpoint's keyword
arguments (the local service's address, REST and its session token, built in the kernel from
``google.oauth2``). No labkit, no trainer import. The job must succeed on the local Vertex AI
service and its chief's model must load and predict.
"""

from __future__ import annotations

import ast
import builtins

import nbformat
import pytest

from labkit.course.exercises import pools
from labkit.course.lab import KERNEL_NAME, NOTEBOOK_DIR

NB04 = NOTEBOOK_DIR / "04_sdk_job_submission.ipynb"
SDK_TAG = "sdk-job"
STEP_1_VALUES = {"PROJECT_ID", "REGION", "BUCKET_URI", "LABELS", "LOCAL_ENDPOINT"}


def sdk_cells(path=NB04) -> list:
    return [
        c
        for c in nbformat.read(str(path), as_version=4).cells
        if c.cell_type == "code" and SDK_TAG in c.metadata.get("tags", [])
    ]


def test_the_sdk_cells_import_only_the_sdk_and_use_only_04s_own_values():
    cells = sdk_cells()
    assert [c.id for c in cells] == ["sdk-init", "24"]
    defined = {"aiplatform", "job"}
    for cell in cells:
        tree = ast.parse(cell.source)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                assert module == "google.cloud", (cell.id, ast.unparse(node))
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        unknown = used - defined - STEP_1_VALUES - {"worker_pool_specs"} - set(dir(builtins))
        assert not unknown, (cell.id, unknown)
    source = "\n".join(c.source for c in cells)
    for call in (
        "aiplatform.init(",
        "aiplatform.CustomJob(",
        "job.run(restart_job_on_worker_restart=True)",
    ):
        assert call in source


def literal_prelude(local_vertex, worker_pool_specs) -> str:
    """The learner's own values as literals, and the local endpoint built from google.oauth2."""
    settings = local_vertex.settings
    return "\n".join(
        [
            "from google.oauth2.credentials import Credentials",
            f"PROJECT_ID = {settings.project_id!r}",
            f"REGION = {settings.region!r}",
            f"BUCKET_URI = {settings.bucket_uri!r}",
            f"LABELS = {dict(settings.labels)!r}",
            f"worker_pool_specs = {worker_pool_specs!r}",
            "LOCAL_ENDPOINT = {",
            f"    'api_endpoint': {settings.api_endpoint!r},",
            "    'api_transport': 'rest',",
            f"    'credentials': Credentials({local_vertex.token!r}),",
            "}",
        ]
    )


@pytest.mark.timeout(900)
def test_the_sdk_cells_run_a_job_in_a_bare_kernel(local_vertex, sample_for_jobs, tmp_path):
    from google.cloud import aiplatform
    from nbclient import NotebookClient

    from labkit.course import dataviews, jobs, models

    settings = local_vertex.settings
    knobs = settings.knobs(
        profile="job", steps_per_epoch=2, data_dir=str(sample_for_jobs.tfds_data_dir)
    )
    specs = pools.solution(settings, knobs)
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(literal_prelude(local_vertex, specs)),
        *sdk_cells(),
        nbformat.v4.new_code_cell("print(job.resource_name, job.state.name)"),
    ]
    NotebookClient(
        nb, kernel_name=KERNEL_NAME, timeout=840, resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    name, state = nb.cells[-1].outputs[0]["text"].split()
    assert state == "JOB_STATE_SUCCEEDED"

    job = aiplatform.CustomJob.get(name)
    assert job.labels == dict(settings.labels)
    model_dir = jobs.job_model_dir(job, settings)
    encoded, labels, _ = dataviews.encoded_examples(knobs, "test", 4)
    predicted = models.predict_encoded(models.savedmodel_path(model_dir), encoded, labels=labels)
    assert len(predicted["class_id"]) == 4
