"""The codelab's own trainer (codelab/trainer/task.py) on two real workers through
`labkit cluster`: the kit's cluster runs code written for Vertex AI unchanged.

The kit's trainer on two workers is tested through `labkit lab --train-only`
(tests/test_notebooks.py), the path `make train` takes.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from labkit.cloud.paths import REPO_ROOT
from labkit.local.cluster import run_cluster

pytestmark = pytest.mark.slow


def test_the_codelabs_own_trainer_runs_unchanged_on_the_local_cluster(tmp_path):
    from labkit.course.sample import ensure_sample

    sample = ensure_sample(
        tmp_path / "sample", scale=0.003
    )  # 17 training images: the codelab trains at 300x300, batch 64
    env = {
        "TF_USE_LEGACY_KERAS": "1",  # the codelab's tf.keras must be tf-keras under MWMS
        "TFDS_DATA_DIR": str(sample.tfds_data_dir),
        "CODELAB_BUCKET": str(tmp_path / "bucket" / "mwms"),
        "CODELAB_WEIGHTS": "None",
    }
    script = REPO_ROOT / "codelab" / "trainer"
    result = run_cluster(
        [sys.executable, "-m", "trainer.task"],
        workers=2,
        chief=True,
        logs_dir=tmp_path / "logs",
        timeout=900,
        env=env,
        cwd=script.parent,
    )
    assert result.ok, result.message
    assert (tmp_path / "bucket" / "mwms" / "saved_model.pb").exists()
    # The codelab leaves the worker's copy behind (its temp dir is never removed):
    assert (tmp_path / "bucket" / "workertemp_0" / "mwms" / "saved_model.pb").exists()
    tf_config = json.loads(result.tf_configs["worker-0"])
    assert tf_config["task"] == {"type": "worker", "index": 0} and "chief" in tf_config["cluster"]
    assert os.environ.get("TF_CONFIG") is None
