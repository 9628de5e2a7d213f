"""The model is never silently lost (issue 16 item 4).

Vertex sets AIP_MODEL_DIR only when the job has a model output directory
(``baseOutputDirectory``). A console job started as the codelab describes has none, so a trainer
that falls back to a local path saves inside the container, which is deleted with the replica.
The kit's trainer refuses to start in that case, naming the field to fill; the codelab's own
trainer never reads AIP_MODEL_DIR and always writes to its hard-coded bucket.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from labkit.cloud.paths import REPO_ROOT
from trainer.config import ConfigError, parse_config

CLUSTER_SPEC = json.dumps(
    {
        "cluster": {"workerpool0": ["cmle-training-workerpool0-0:2222"]},
        "task": {"type": "workerpool0", "index": 0},
    }
)


def _clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AIP_") and k not in ("TF_CONFIG", "CLUSTER_SPEC")
    }
    return {**env, **extra}


def test_kit_trainer_fails_at_start_inside_vertex_without_a_model_dir(tmp_path):
    started = subprocess.run(
        [sys.executable, "-m", "trainer.task", "--epochs", "1"],
        cwd=tmp_path,
        env=_clean_env(CLUSTER_SPEC=CLUSTER_SPEC, PYTHONPATH=str(REPO_ROOT)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 2, started.stderr
    assert "Model output directory" in started.stderr
    assert "AIP_MODEL_DIR" in started.stderr and "--model-dir" in started.stderr
    assert "Traceback" not in started.stderr
    assert not (tmp_path / "outputs").exists(), "nothing may be written inside the container"


@pytest.mark.parametrize(
    "argv, env, expected",
    [
        (
            [],
            {"CLUSTER_SPEC": CLUSTER_SPEC, "AIP_MODEL_DIR": "gs://b/job/model/"},
            "gs://b/job/model/",
        ),
        (["--model-dir", "gs://b/explicit"], {"CLUSTER_SPEC": CLUSTER_SPEC}, "gs://b/explicit"),
        (
            [],
            {},
            "outputs/model",
        ),  # outside Vertex (a laptop, notebook 02): a local folder is right
    ],
)
def test_model_dir_sources(argv, env, expected):
    assert parse_config(argv, env=env).model_dir == expected


def test_inside_vertex_without_model_dir_is_a_config_error():
    with pytest.raises(ConfigError, match="baseOutputDirectory.outputUriPrefix"):
        parse_config([], env={"CLUSTER_SPEC": CLUSTER_SPEC})


def test_codelabs_own_trainer_ignores_the_model_output_directory(tmp_path):
    """The codelab's trainer in the same Vertex environment, even with the field filled: it
    writes to its hard-coded bucket, so with the TODO left in place the save fails only
    after the half-hour of training."""
    probe = (
        "import importlib.util, json\n"
        f"spec = importlib.util.spec_from_file_location('codelab_task', {str(REPO_ROOT / 'codelab/trainer/task.py')!r})\n"
        "task = importlib.util.module_from_spec(spec); spec.loader.exec_module(task)\n"
        "print(json.dumps({'bucket': task.BUCKET, 'chief': task.write_filepath(task.BUCKET, 'chief', 0)}))\n"
    )
    model_dir = f"{tmp_path}/job/model/"
    answer = subprocess.run(
        [sys.executable, "-c", probe],
        env=_clean_env(
            CLUSTER_SPEC=CLUSTER_SPEC, AIP_MODEL_DIR=model_dir, TF_CPP_MIN_LOG_LEVEL="3"
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert answer.returncode == 0, answer.stderr
    paths = json.loads(answer.stdout.strip().splitlines()[-1])
    assert paths == {
        "bucket": "gs://{your-gcs-bucket}/mwms",
        "chief": "gs://{your-gcs-bucket}/mwms",
    }
    assert model_dir not in answer.stdout
