"""Config: the codelab's defaults, argv, Vertex's AIP_* environment, and early errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.config import ConfigError, TrainConfig, find_placeholder, parse_config

ROOT = Path(__file__).resolve().parents[1]


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


# ---- one TrainConfig: CLI, environment, job args and knobs all derived from its fields


def _non_default(field):
    """A valid value other than the field's default, for the round trip."""
    from trainer.config import CHOICES

    if field.name in CHOICES:
        return next(c for c in CHOICES[field.name] if c != field.default)
    special = {"data": "gs://b/cassava-folder", "weights": "none", "bn_momentum": 0.5}
    if field.name in special:
        return special[field.name]
    if field.type == "bool":
        return not field.default
    if field.type.startswith("int"):
        return (field.default or 0) + 37 if field.name != "image_size" else 128
    if field.type.startswith("float"):
        return 0.25
    return f"gs://b/{field.name}"


def test_every_field_round_trips_through_the_command_line():
    import dataclasses

    from trainer.config import FIELDS

    for field in dataclasses.fields(TrainConfig):
        assert field.metadata.get("help"), f"{field.name} has no help text"
        values = {field.name: _non_default(field)}
        if field.name == "fine_tune_epochs":
            values["freeze_base"] = True
        config = TrainConfig(**values)
        args = config.to_args()
        assert parse_config(args, env={}) == config, (field.name, args)
        # ... and whatever directories Vertex sets, the args win
        aip = {"AIP_MODEL_DIR": "gs://x/m", "AIP_CHECKPOINT_DIR": "gs://x/c"}
        assert parse_config(args, env=aip | {"AIP_TENSORBOARD_LOG_DIR": "gs://x/l"}) == config
    assert set(FIELDS) == {f.name for f in dataclasses.fields(TrainConfig)}


def test_default_config_round_trips_and_none_tensorboard_is_kept():
    for config in (TrainConfig(), TrainConfig(tensorboard_dir=None, steps_per_epoch=3)):
        assert parse_config(config.to_args(), env={}) == config


def test_every_field_is_a_cli_option_and_the_env_fills_the_directories():
    from trainer.config import FIELDS, FLAGS, build_parser

    parser = build_parser(env={})
    options = {s for a in parser._actions for s in a.option_strings}
    assert set(FLAGS.values()) <= options and len(FLAGS) == len(FIELDS)
    env = {
        "TFDS_DATA_DIR": "/d",
        "AIP_MODEL_DIR": "gs://b/m/",
        "AIP_CHECKPOINT_DIR": "gs://b/c/",
        "AIP_TENSORBOARD_LOG_DIR": "gs://b/l/",
    }
    c = parse_config([], env=env)
    assert (c.data_dir, c.model_dir, c.checkpoint_dir, c.tensorboard_dir) == tuple(env.values())


def test_knobs_become_args_skipping_none_and_keys_that_are_not_options():
    from trainer.config import args_for, codelab_knobs

    knobs = {"image_size": 32, "batch_size": 8, "epochs": 2, "steps_per_epoch": None}
    knobs |= {"weights": "none", "bn_momentum": 0.9, "workers": 2, "machine_type": "n1"}
    args = args_for(**knobs)
    assert args == [
        "--image-size", "32", "--batch-size", "8", "--epochs", "2",
        "--weights", "none", "--bn-momentum", "0.9",
    ]  # fmt: skip
    assert parse_config(args_for(**codelab_knobs()), env={}) == TrainConfig()
    assert args_for(validation=False, freeze_base=True) == ["--no-validation", "--freeze-base"]
    assert args_for(validation=True, freeze_base=False) == []


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--image-size", "100000"], "--image-size must be between 32 and 1024"),
        (["--image-size", "8"], "--image-size must be between 32 and 1024"),
        (["--shuffle-buffer", "-1"], "--shuffle-buffer must be at least 1"),
        (["--shuffle-buffer", "0"], "--shuffle-buffer must be at least 1"),
        (["--fine-tune-learning-rate", "0"], "--fine-tune-learning-rate must be positive"),
        (["--validation-steps", "0"], "--validation-steps must be at least 1 or unset"),
    ],
)
def test_out_of_range_values_name_the_flag_and_the_range(argv, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_config(argv, env={})


@pytest.mark.parametrize(
    "argv, fragments",
    [
        (["--epoch", "3"], ["unrecognized arguments: --epoch 3", "did you mean --epochs"]),
        (["--batchsize=8"], ["unrecognized arguments: --batchsize=8", "--batch-size"]),
        (["--zzz"], ["unrecognized arguments: --zzz", "--help"]),
        (["--image-size", "100000"], ["--image-size must be between 32 and 1024"]),
        (["--shuffle-buffer", "-1"], ["--shuffle-buffer must be at least 1"]),
        (["--bad-images", "ignore"], ["--bad-images: invalid choice: 'ignore'"]),
    ],
)
def test_bad_flags_exit_2_with_one_line_and_no_traceback(tmp_path, argv, fragments):
    proc = subprocess.run(
        [sys.executable, "-m", "trainer.task", *argv],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if not k.startswith(("AIP_", "TF_CONFIG"))}
        | {"PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr
    assert "Traceback" not in proc.stderr and not list(tmp_path.iterdir())
