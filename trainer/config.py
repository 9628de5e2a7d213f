"""The training job's configuration: one typed dataclass, the single source of every option.

`TrainConfig`'s fields carry the codelab's defaults (batch 64 per replica, 2 epochs, 300x300,
ImageNet ResNet50, Adam 1e-4) and, in their metadata, their help text, their command-line
flag and the environment variable Vertex AI fills them from. Everything else is derived:
the CLI of `python -m trainer.task` (`build_parser`), the `AIP_*` directory defaults, the
container `args` a job spec carries (`TrainConfig.to_args`, `args_for` for the notebooks'
size knobs) and the knobs' cloud values (`codelab_knobs`). This module imports no
TensorFlow, so labkit can import it cheaply and MWMS can still be created first.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

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


# Ranges that fail in seconds instead of out of memory after a minute (issue 21 item 5).
# 32: tf_keras' ResNet50 refuses inputs smaller than 32x32 (`min_size=32` in its
# ResNet application module). 1024: over three times the codelab's 300 and twice the sample's
# photos (about 500x400), where upscaling adds no detail while memory grows with the square:
# one 64-image batch of 1024x1024 float32 is 0.8 GB of input alone, before ResNet50's
# activations (100000 ran out of memory after a minute, issue 21).
IMAGE_SIZE_RANGE = (32, 1024)
# The shuffle buffer holds encoded images and is capped at the split's size
# (trainer.data.make_pipeline), so a large value costs nothing more than a full shuffle;
# below 1 there is no buffer at all (-1 used to be accepted and clamped silently).
SHUFFLE_BUFFER_MIN = 1
# `--bad-images`: what a record that does not decode does (trainer.data.find_bad_images).
BAD_IMAGE_CHOICES = ("fail", "skip")
SWITCH_CHOICES = ("auto", "on", "off")
# Options with these values on the command line mean None (no TensorBoard logs).
NONE_WORDS = ("none", "")


def option(
    default: Any,
    help: str,
    *,
    group: str,
    env: str | None = None,
    choices: Sequence[str] | None = None,
    flag: str | None = None,
) -> Any:
    """A `TrainConfig` field: its default and, as metadata, how the CLI and Vertex set it.

    ``env``: the environment variable that replaces the default when set (Vertex's
    `AIP_*`); ``flag``: the command-line flag when it is not ``--field-name`` (a bool
    field whose default is True is switched off by ``--no-NAME``).
    """
    meta = {"help": help, "group": group, "env": env, "choices": choices, "flag": flag}
    return dataclasses.field(default=default, metadata=meta)


@dataclasses.dataclass
class TrainConfig:
    """Everything `trainer.run` needs. Field defaults are the codelab's values.

    Each field's metadata holds its help text, group, flag and environment variable, from
    which `build_parser`, `to_args` and `args_for` are derived: add a field here and the
    CLI, the job specs and the notebooks' knobs all know it.
    """

    # -- data
    data: str = option(
        "tfds:cassava",
        "tfds:NAME, or a folder in the cassava zip layout (SPLIT/CLASS/*.jpg)",
        group="data",
    )
    data_dir: str | None = option(
        None,
        "TFDS data dir (default: $TFDS_DATA_DIR, else TFDS's own default)",
        group="data",
        env="TFDS_DATA_DIR",
    )
    try_gcs: bool = option(
        False, "let TFDS read prepared data from its public bucket", group="data"
    )
    image_size: int = option(
        300,
        f"images are resized to SIZExSIZE ({IMAGE_SIZE_RANGE[0]}-{IMAGE_SIZE_RANGE[1]})",
        group="data",
    )
    shuffle_buffer: int = option(
        1000,
        "shuffle buffer of encoded images, before decoding (at least 1; capped at the split's size)",
        group="data",
    )
    cache: str = option(
        "auto",
        "keep the resized uint8 images after epoch 1: in memory, in a private temporary "
        "file (disk, training split only), or not (off); auto: memory when they fit in "
        "1/8 of the memory, at least 256 MiB, else disk for training (on: memory)",
        group="data",
        choices=CACHE_OPTIONS,
    )
    bad_images: str = option(
        "fail",
        "a record whose image does not decode: fail naming it before training, or skip "
        "it and count the skipped (every image is checked once at start, about 1 ms each)",
        group="data",
        choices=BAD_IMAGE_CHOICES,
    )
    # -- training
    batch_size: int = option(64, "per replica; global = this x replicas", group="training")
    epochs: int = option(2, "passes over the training data", group="training")
    steps_per_epoch: int | None = option(
        None, "default: one pass over the training split", group="training"
    )
    validation: bool = option(True, "skip the validation split", group="training")
    validation_steps: int | None = option(
        None, "default: the whole validation split", group="training"
    )
    learning_rate: float = option(1e-4, "Adam learning rate", group="training")
    seed: int = option(42, "random seed for weights and shuffling", group="training")
    mixed_precision: str = option(
        "auto",
        "mixed_float16 with a float32 softmax (auto: on when a GPU is present)",
        group="training",
        choices=SWITCH_CHOICES,
    )
    xla: str = option(
        "auto",
        "compile the train step with XLA (auto: on when a GPU is present)",
        group="training",
        choices=SWITCH_CHOICES,
    )
    verbose: int = option(2, "Keras fit verbosity", group="training")
    # -- model
    weights: str = option("imagenet", "imagenet, none, or a local .h5 weights file", group="model")
    dense_units: int = option(1016, "units of the Dense(relu) head layer", group="model")
    bn_momentum: float | None = option(
        None,
        "BatchNorm moving-average momentum (default: Keras' 0.99); 0.9 suits runs of a few "
        "dozen steps",
        group="model",
    )
    freeze_base: bool = option(False, "train only the head on a frozen backbone", group="model")
    fine_tune_epochs: int = option(
        0, "after the frozen phase, unfreeze and train this many more epochs", group="model"
    )
    fine_tune_learning_rate: float = option(
        1e-5, "Adam learning rate of the fine-tuning phase", group="model"
    )
    # -- outputs (Vertex AI sets the AIP_* variables from the job's baseOutputDirectory)
    model_dir: str = option(
        "outputs/model",
        "where the chief saves the model (default: $AIP_MODEL_DIR, else outputs/model; "
        "required inside Vertex AI when the job has no model output directory)",
        group="outputs",
        env="AIP_MODEL_DIR",
    )
    checkpoint_dir: str = option(
        "outputs/checkpoints",
        "BackupAndRestore folder (default: $AIP_CHECKPOINT_DIR, else outputs/checkpoints)",
        group="outputs",
        env="AIP_CHECKPOINT_DIR",
    )
    tensorboard_dir: str | None = option(
        "outputs/logs",
        "TensorBoard logs (default: $AIP_TENSORBOARD_LOG_DIR, else outputs/logs); 'none' to skip",
        group="outputs",
        env="AIP_TENSORBOARD_LOG_DIR",
    )
    backup_every_steps: int | None = option(
        None,
        "back up every N steps as well as every epoch, so a restart loses less",
        group="outputs",
    )

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Reject values that would fail later, and codelab placeholders left in paths."""
        _check_numbers(self)
        _check_choices(self)
        _check_paths(self)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_args(self) -> list[str]:
        """The `python -m trainer.task` arguments that give back exactly this config.

        Every field is written out (None ones left off), so the result does not depend on
        the defaults or the environment of the process that parses it.
        """
        return args_for(**self.to_dict())


def _flag(field: dataclasses.Field) -> str:
    """The field's command-line flag: ``--image-size``, or ``--no-validation``."""
    if field.metadata.get("flag"):
        return field.metadata["flag"]
    name = field.name.replace("_", "-")
    return f"--no-{name}" if field.type == "bool" and field.default is True else f"--{name}"


FIELDS: dict[str, dataclasses.Field] = {f.name: f for f in dataclasses.fields(TrainConfig)}
FLAGS: dict[str, str] = {name: _flag(f) for name, f in FIELDS.items()}
CHOICES: dict[str, Sequence[str]] = {
    name: f.metadata["choices"] for name, f in FIELDS.items() if f.metadata["choices"]
}


def _option_name(name: str) -> str:
    return FLAGS.get(name, f"--{name.replace('_', '-')}")


def _check_numbers(config: TrainConfig) -> None:
    """Counts at least 1, rates positive, sizes in range: each error names the flag."""
    for name in ("batch_size", "epochs", "dense_units"):
        value = getattr(config, name)
        if value is None or value < 1:
            raise ConfigError(f"{_option_name(name)} must be at least 1, got {value}")
    low, high = IMAGE_SIZE_RANGE
    if config.image_size is None or not low <= config.image_size <= high:
        raise ConfigError(
            f"--image-size must be between {low} and {high}, got {config.image_size}: ResNet50 "
            f"takes at least {low}x{low}, and above {high} memory grows with the square of the "
            "size while the photos hold no more detail (the codelab uses 300)"
        )
    if config.shuffle_buffer is None or config.shuffle_buffer < SHUFFLE_BUFFER_MIN:
        raise ConfigError(
            f"--shuffle-buffer must be at least {SHUFFLE_BUFFER_MIN}, got {config.shuffle_buffer}: "
            "it is how many encoded images are shuffled at once (1 = no shuffling; the codelab "
            "uses 1000; values above the split's size shuffle it whole)"
        )
    for name in ("steps_per_epoch", "validation_steps", "backup_every_steps"):
        value = getattr(config, name)
        if value is not None and value < 1:
            raise ConfigError(f"{_option_name(name)} must be at least 1 or unset, got {value}")
    if config.fine_tune_epochs < 0:
        raise ConfigError("--fine-tune-epochs must be 0 or more")
    if config.fine_tune_epochs and not config.freeze_base:
        raise ConfigError(
            "--fine-tune-epochs needs --freeze-base (fine-tuning unfreezes a frozen base)"
        )
    if config.bn_momentum is not None and not 0.0 <= config.bn_momentum < 1.0:
        raise ConfigError(f"--bn-momentum must be in [0, 1), got {config.bn_momentum}")
    for name in ("learning_rate", "fine_tune_learning_rate"):
        if getattr(config, name) <= 0:
            raise ConfigError(f"{_option_name(name)} must be positive, got {getattr(config, name)}")


def _check_choices(config: TrainConfig) -> None:
    for name, allowed in CHOICES.items():
        value = getattr(config, name)
        if value not in allowed:
            raise ConfigError(
                f"{_option_name(name)} must be one of {', '.join(allowed)}, got {value!r}"
            )


def _check_paths(config: TrainConfig) -> None:
    if not config.data:
        raise ConfigError("--data is empty: use tfds:cassava or a folder of class sub-folders")
    for name in ("data", "data_dir", "model_dir", "checkpoint_dir", "tensorboard_dir", "weights"):
        value = getattr(config, name)
        ph = find_placeholder(value) if isinstance(value, str) else None
        if ph:
            raise ConfigError(
                f"{_option_name(name)} still contains the placeholder {ph!r} ({value!r}): "
                "replace it with your bucket or project, e.g. gs://my-project-bucket/mwms"
            )


def args_for(**values: Any) -> list[str]:
    """`python -m trainer.task` arguments for the given field values, in field order.

    The notebooks' size knobs go through here (03's cluster, 04's container args): keys
    that are not `TrainConfig` fields (``workers``, ``machine_type``) and None values
    (meaning "the default") are left out; booleans become their switch when they differ
    from the default.
    """
    out: list[str] = []
    for name, field in FIELDS.items():
        value = values.get(name)
        if value is None:
            if name == "tensorboard_dir" and name in values:
                out += [FLAGS[name], "none"]
            continue
        if field.type == "bool":
            if bool(value) != field.default:
                out.append(FLAGS[name])
            continue
        out += [FLAGS[name], str(value)]
    return out


def codelab_knobs() -> dict[str, Any]:
    """The codelab's values of the fields the notebooks' size knobs set (their cloud mode)."""
    names = ("image_size", "batch_size", "epochs", "steps_per_epoch", "weights")
    names += ("learning_rate", "bn_momentum", "data", "data_dir")
    return {name: FIELDS[name].default for name in names}


class TrainerArgumentParser(argparse.ArgumentParser):
    """argparse that answers a mistyped flag with the closest real ones, then exits 2."""

    def error(self, message: str) -> NoReturn:
        hint = ""
        match = re.search(r"unrecognized arguments: (\S+)", message)
        if match:
            known = [f for action in self._actions for f in action.option_strings]
            close = difflib.get_close_matches(match.group(1).split("=")[0], known, n=2)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        self.exit(
            2, f"[trainer] error: {message}{hint}. `python -m trainer.task --help` lists them all\n"
        )


def _add_option(group: Any, field: dataclasses.Field, env: Mapping[str, str]) -> None:
    flag, meta = FLAGS[field.name], field.metadata
    if field.type == "bool":
        action = "store_false" if field.default is True else "store_true"
        group.add_argument(flag, dest=field.name, action=action, help=meta["help"])
        return
    default = env.get(meta["env"]) if meta["env"] else None
    kind = {"int": int, "int | None": int, "float": float, "float | None": float}.get(field.type)
    group.add_argument(
        flag,
        dest=field.name,
        type=kind or str,
        default=default or field.default,
        choices=CHOICES.get(field.name),
        help=meta["help"],
    )


GROUP_TITLES = {
    "data": "data",
    "training": "training",
    "model": "model",
    "outputs": "outputs (Vertex AI sets AIP_MODEL_DIR, AIP_CHECKPOINT_DIR, AIP_TENSORBOARD_LOG_DIR)",
}


def build_parser(env: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    """The CLI of `python -m trainer.task`, one option per `TrainConfig` field.

    Directory defaults come from Vertex's `AIP_*` environment (the fields' ``env``).
    """
    env = os.environ if env is None else env
    parser = TrainerArgumentParser(
        prog="python -m trainer.task",
        description=(
            "Transfer-learn ResNet50 on cassava leaf images with MultiWorkerMirroredStrategy "
            "(multi-worker when TF_CONFIG describes a cluster, as Vertex AI sets it)."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        allow_abbrev=False,  # `--epoch 3` is an error naming --epochs, not a silent guess
    )
    groups = {key: parser.add_argument_group(title) for key, title in GROUP_TITLES.items()}
    for field in FIELDS.values():
        _add_option(groups[field.metadata["group"]], field, env)
    if inside_vertex_without_model_dir(env):
        # None: parse_config refuses to start (the model would be lost with the container).
        parser.set_defaults(model_dir=None)
    return parser


def parse_config(
    argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None
) -> TrainConfig:
    """Config from command-line arguments, with Vertex's environment as the directory defaults."""
    values = vars(build_parser(env).parse_args(argv))
    if values.get("model_dir") is None:
        raise ConfigError(MODEL_DIR_MISSING)
    if str(values.get("tensorboard_dir")).lower() in NONE_WORDS:
        values["tensorboard_dir"] = None
    return TrainConfig(**values)
