"""Config: the codelab's defaults, argv, Vertex's AIP_* environment, and early errors."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from trainer.config import ConfigError, TrainConfig, find_placeholder, parse_config


def test_defaults_are_the_codelab_values():
    c = parse_config([], env={})
    assert (c.batch_size, c.epochs, c.image_size, c.learning_rate) == (64, 2, 300, 1e-4)
    assert (c.weights, c.dense_units, c.data) == ("imagenet", 1016, "tfds:cassava")
    assert c.validation and not c.freeze_base and c.fine_tune_epochs == 0


def test_argv_overrides_defaults():
    c = parse_config(
        [
            "--batch-size",
            "8",
            "--epochs",
            "3",
            "--image-size",
            "64",
            "--weights",
            "none",
            "--freeze-base",
            "--fine-tune-epochs",
            "1",
            "--steps-per-epoch",
            "5",
            "--no-validation",
            "--seed",
            "7",
        ],
        env={},
    )
    assert (c.batch_size, c.epochs, c.image_size, c.weights) == (8, 3, 64, "none")
    assert c.freeze_base and c.fine_tune_epochs == 1 and c.steps_per_epoch == 5
    assert not c.validation and c.seed == 7


def test_directories_default_to_what_vertex_sets():
    env = {
        "AIP_MODEL_DIR": "gs://b/job/model/",
        "AIP_CHECKPOINT_DIR": "gs://b/job/checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": "gs://b/job/logs/",
    }
    c = parse_config([], env=env)
    assert (c.model_dir, c.checkpoint_dir, c.tensorboard_dir) == tuple(env.values())
    assert parse_config(["--model-dir", "/tmp/m"], env=env).model_dir == "/tmp/m"


def test_without_vertex_the_outputs_go_to_a_local_folder():
    c = parse_config([], env={})
    assert c.model_dir == "outputs/model" and c.checkpoint_dir == "outputs/checkpoints"


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--model-dir", "gs://{your-gcs-bucket}/mwms"], "{your-gcs-bucket}"),
        (["--model-dir", "gs://your-cloud-project-bucket/m"], "your-cloud-project"),
        (["--checkpoint-dir", "gs://YOUR_BUCKET/c"], "YOUR_BUCKET"),
    ],
)
def test_placeholders_left_in_paths_are_rejected(argv, fragment):
    with pytest.raises(ConfigError, match="placeholder") as err:
        parse_config(argv, env={})
    assert fragment in str(err.value)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"batch_size": 0}, "--batch-size"),
        ({"epochs": 0}, "--epochs"),
        ({"fine_tune_epochs": 1}, "--freeze-base"),
        ({"learning_rate": -1.0}, "--learning-rate"),
        ({"data": ""}, "--data"),
    ],
)
def test_bad_values_fail_early_naming_the_option(kwargs, fragment):
    with pytest.raises(ConfigError, match=fragment):
        TrainConfig(**kwargs)


def test_find_placeholder_ignores_real_names():
    assert find_placeholder("gs://my-real-bucket-123/mwms") is None
    assert find_placeholder("gs://{your-gcs-bucket}/mwms") == "{your-gcs-bucket}"


def test_help_lists_every_option_with_its_default():
    env = {**os.environ, "COLUMNS": "200"}
    out = subprocess.run(
        [sys.executable, "-m", "trainer.task", "--help"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    for option in (
        "--data",
        "--data-dir",
        "--try-gcs",
        "--image-size",
        "--batch-size",
        "--epochs",
        "--steps-per-epoch",
        "--learning-rate",
        "--weights",
        "--freeze-base",
        "--fine-tune-epochs",
        "--no-validation",
        "--seed",
        "--model-dir",
        "--checkpoint-dir",
        "--tensorboard-dir",
        "--backup-every-steps",
    ):
        assert option in out
    assert "(default: 64)" in out and "(default: imagenet)" in out and "(default: 300)" in out
