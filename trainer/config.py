"""The training job's configuration: one dataclass, filled from argv and Vertex's `AIP_*` env.

Defaults are the codelab's values (batch 64 per replica, 2 epochs, 300x300, ImageNet ResNet50,
Adam 1e-4). This module imports no TensorFlow so it can be used before the strategy exists.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

CASSAVA_CLASSES = ("cbb", "cbsd", "cgm", "cmd", "healthy")
# `--cache` (trainer.data.cache_mode); "on" is the earlier spelling of "memory".
CACHE_ALIASES = {"on": "memory"}
CACHE_CHOICES = ("auto", "memory", "disk", "off")
CACHE_OPTIONS = (*CACHE_CHOICES, *CACHE_ALIASES)

# Text a learner is told to replace in the codelab; finding it in a path means they did not.
PLACEHOLDER_PATTERNS = (
    r"\{your[-_a-zA-Z]*\}",
    r"\{YOUR[-_A-Z]*\}",
    r"your-cloud-project",
    r"your-gcs-bucket",
    r"YOUR_BUCKET",
    r"YOUR-PROJECT-ID",
    r"your[-_]project(?:[-_]id)?\b",
    r"^my-project$",
    r"^PROJECT_ID$",
)


def find_placeholder(value: str) -> str | None:
    """The codelab placeholder in ``value`` (e.g. ``{your-gcs-bucket}``), or None."""
    for pattern in PLACEHOLDER_PATTERNS:
        m = re.search(pattern, value or "")
        if m:
            return m.group(0)
    return None


class ConfigError(ValueError):
    """A configuration problem found before any training starts; the message names the fix."""


# Inside Vertex AI (CLUSTER_SPEC set) without AIP_MODEL_DIR the job has no model output
# directory: Vertex sets AIP_MODEL_DIR / AIP_CHECKPOINT_DIR / AIP_TENSORBOARD_LOG_DIR only from
# the job's baseOutputDirectory (the console's "Model output directory" field; REST reference
# CustomJobSpec.baseOutputDirectory). A default local path would then be the container's own
# disk, deleted with the replica after a 30-minute job: fail before training instead.
MODEL_DIR_MISSING = (
    "this replica runs inside Vertex AI (CLUSTER_SPEC is set) but the job has no model output "
    "directory, so Vertex did not set AIP_MODEL_DIR and the model would be saved inside the "
    "container and lost when the job ends. Set the model output directory: in the console's "
    "Training container step fill 'Model output directory' with gs://YOUR_BUCKET/PATH; with "
    "the SDK pass base_output_dir= (or staging_bucket=); in REST set "
    "baseOutputDirectory.outputUriPrefix; or add --model-dir gs://YOUR_BUCKET/PATH to the "
    "container's arguments"
)


def inside_vertex_without_model_dir(env: Mapping[str, str]) -> bool:
    """True when Vertex runs this replica (CLUSTER_SPEC) but gave it no AIP_MODEL_DIR."""
    return bool(env.get("CLUSTER_SPEC")) and not env.get("AIP_MODEL_DIR")


@dataclasses.dataclass
class TrainConfig:
    """Everything `trainer.run` needs. Field defaults are the codelab's values."""

    data: str = "tfds:cassava"
    data_dir: str | None = None
    try_gcs: bool = False
    image_size: int = 300
    batch_size: int = 64
    epochs: int = 2
    steps_per_epoch: int | None = None
    validation: bool = True
    validation_steps: int | None = None
    learning_rate: float = 1e-4
    weights: str = "imagenet"
    freeze_base: bool = False
    fine_tune_epochs: int = 0
    fine_tune_learning_rate: float = 1e-5
    dense_units: int = 1016
    bn_momentum: float | None = None
    seed: int = 42
    model_dir: str = "outputs/model"
    checkpoint_dir: str = "outputs/checkpoints"
    tensorboard_dir: str | None = "outputs/logs"
    backup_every_steps: int | None = None
    shuffle_buffer: int = 1000
    cache: str = "auto"
    mixed_precision: str = "auto"
    xla: str = "auto"
    verbose: int = 2

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Reject values that would fail later, and codelab placeholders left in paths."""
        positive = {
            "image_size": self.image_size,
            "batch_size": self.batch_size,
            "epochs": self.epochs,
            "dense_units": self.dense_units,
        }
        for name, value in positive.items():
            if value is None or value < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
        for name in ("steps_per_epoch", "validation_steps", "backup_every_steps"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(
                    f"--{name.replace('_', '-')} must be at least 1 or unset, got {value}"
                )
        if self.fine_tune_epochs < 0:
            raise ConfigError("--fine-tune-epochs must be 0 or more")
        if self.fine_tune_epochs and not self.freeze_base:
            raise ConfigError(
                "--fine-tune-epochs needs --freeze-base (fine-tuning unfreezes a frozen base)"
            )
        if self.bn_momentum is not None and not 0.0 <= self.bn_momentum < 1.0:
            raise ConfigError(f"--bn-momentum must be in [0, 1), got {self.bn_momentum}")
        if self.learning_rate <= 0:
            raise ConfigError(f"--learning-rate must be positive, got {self.learning_rate}")
        if self.cache not in CACHE_OPTIONS:
            raise ConfigError("--cache must be auto, memory, disk or off (on: memory)")
        for name in ("mixed_precision", "xla"):
            if getattr(self, name) not in ("auto", "on", "off"):
                raise ConfigError(f"--{name.replace('_', '-')} must be auto, on or off")
        for name in (
            "data",
            "data_dir",
            "model_dir",
            "checkpoint_dir",
            "tensorboard_dir",
            "weights",
        ):
            value = getattr(self, name)
            ph = find_placeholder(value) if isinstance(value, str) else None
            if ph:
                raise ConfigError(
                    f"--{name.replace('_', '-')} still contains the placeholder {ph!r} ({value!r}): "
                    "replace it with your bucket or project, e.g. gs://my-project-bucket/mwms"
                )
        if not self.data:
            raise ConfigError("--data is empty: use tfds:cassava or a folder of class sub-folders")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _env_default(env: Mapping[str, str], key: str, fallback: str | None) -> str | None:
    value = env.get(key)
    return value if value else fallback


def build_parser(env: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    """The CLI of `python -m trainer.task`; directory defaults come from Vertex's `AIP_*` env."""
    env = os.environ if env is None else env
    d = TrainConfig.__dataclass_fields__
    p = argparse.ArgumentParser(
        prog="python -m trainer.task",
        description=(
            "Transfer-learn ResNet50 on cassava leaf images with MultiWorkerMirroredStrategy "
            "(multi-worker when TF_CONFIG describes a cluster, as Vertex AI sets it)."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    g = p.add_argument_group("data")
    g.add_argument(
        "--data",
        default=d["data"].default,
        help="tfds:NAME, or a folder in the cassava zip layout (SPLIT/CLASS/*.jpg)",
    )
    g.add_argument(
        "--data-dir",
        default=_env_default(env, "TFDS_DATA_DIR", None),
        help="TFDS data dir (default: $TFDS_DATA_DIR, else TFDS's own default)",
    )
    g.add_argument(
        "--try-gcs", action="store_true", help="let TFDS read prepared data from its public bucket"
    )
    g.add_argument(
        "--image-size",
        type=int,
        default=d["image_size"].default,
        help="images are resized to SIZExSIZE",
    )
    g.add_argument(
        "--shuffle-buffer",
        type=int,
        default=d["shuffle_buffer"].default,
        help="shuffle buffer (of encoded images, before decoding)",
    )
    g.add_argument(
        "--cache",
        choices=CACHE_OPTIONS,
        default=d["cache"].default,
        help="keep the resized uint8 images after epoch 1: in memory, in a private temporary "
        "file (disk, training split only), or not (off); auto: memory when they fit in "
        "256 MiB, else disk for training (on: memory)",
    )
    g = p.add_argument_group("training")
    g.add_argument(
        "--batch-size",
        type=int,
        default=d["batch_size"].default,
        help="per replica; global = this x replicas",
    )
    g.add_argument(
        "--epochs", type=int, default=d["epochs"].default, help="passes over the training data"
    )
    g.add_argument(
        "--steps-per-epoch",
        type=int,
        default=None,
        help="default: one pass over the training split",
    )
    g.add_argument(
        "--no-validation", dest="validation", action="store_false", help="skip the validation split"
    )
    g.add_argument(
        "--validation-steps", type=int, default=None, help="default: the whole validation split"
    )
    g.add_argument(
        "--learning-rate", type=float, default=d["learning_rate"].default, help="Adam learning rate"
    )
    g.add_argument(
        "--seed", type=int, default=d["seed"].default, help="random seed for weights and shuffling"
    )
    g.add_argument(
        "--mixed-precision",
        choices=("auto", "on", "off"),
        default=d["mixed_precision"].default,
        help="mixed_float16 with a float32 softmax (auto: on when a GPU is present)",
    )
    g.add_argument(
        "--xla",
        choices=("auto", "on", "off"),
        default=d["xla"].default,
        help="compile the train step with XLA (auto: on when a GPU is present)",
    )
    g.add_argument("--verbose", type=int, default=d["verbose"].default, help="Keras fit verbosity")
    g = p.add_argument_group("model")
    g.add_argument(
        "--weights",
        default=d["weights"].default,
        help="imagenet, none, or a local .h5 weights file",
    )
    g.add_argument(
        "--dense-units",
        type=int,
        default=d["dense_units"].default,
        help="units of the Dense(relu) head layer",
    )
    g.add_argument(
        "--bn-momentum",
        type=float,
        default=None,
        help="BatchNorm moving-average momentum (default: Keras' 0.99); 0.9 suits runs of a few dozen steps",
    )
    g.add_argument(
        "--freeze-base", action="store_true", help="train only the head on a frozen backbone"
    )
    g.add_argument(
        "--fine-tune-epochs",
        type=int,
        default=0,
        help="after the frozen phase, unfreeze and train this many more epochs",
    )
    g.add_argument(
        "--fine-tune-learning-rate",
        type=float,
        default=d["fine_tune_learning_rate"].default,
        help="Adam learning rate of the fine-tuning phase",
    )
    g = p.add_argument_group(
        "outputs (Vertex AI sets AIP_MODEL_DIR, AIP_CHECKPOINT_DIR, AIP_TENSORBOARD_LOG_DIR)"
    )
    g.add_argument(
        "--model-dir",
        # None inside Vertex without AIP_MODEL_DIR: parse_config refuses to start then.
        default=None
        if inside_vertex_without_model_dir(env)
        else _env_default(env, "AIP_MODEL_DIR", d["model_dir"].default),
        help="where the chief saves the model (default: $AIP_MODEL_DIR, else outputs/model; "
        "required inside Vertex AI when the job has no model output directory)",
    )
    g.add_argument(
        "--checkpoint-dir",
        default=_env_default(env, "AIP_CHECKPOINT_DIR", d["checkpoint_dir"].default),
        help="BackupAndRestore folder (default: $AIP_CHECKPOINT_DIR, else outputs/checkpoints)",
    )
    g.add_argument(
        "--tensorboard-dir",
        default=_env_default(env, "AIP_TENSORBOARD_LOG_DIR", d["tensorboard_dir"].default),
        help="TensorBoard logs (default: $AIP_TENSORBOARD_LOG_DIR, else outputs/logs); 'none' to skip",
    )
    g.add_argument(
        "--backup-every-steps",
        type=int,
        default=None,
        help="back up every N steps as well as every epoch, so a restart loses less",
    )
    return p


def parse_config(
    argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None
) -> TrainConfig:
    """Config from command-line arguments, with Vertex's environment as the directory defaults."""
    args = build_parser(env).parse_args(argv)
    values = vars(args)
    if values.get("model_dir") is None:
        raise ConfigError(MODEL_DIR_MISSING)
    if values.get("tensorboard_dir") in ("none", ""):
        values["tensorboard_dir"] = None
    return TrainConfig(**values)
