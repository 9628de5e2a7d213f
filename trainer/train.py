"""`run(config)`: the whole job, shared by `python -m trainer.task` and the notebooks.

`run` is the lab's outline, one named step per line, in the codelab's order: create the
strategy first, scale the batch with the replicas, load the data sharded by element, build
the model inside `strategy.scope()`, fit with the callbacks, and save where this task should
(every worker saves; only the chief's copy is kept). Each step is a short function below,
small enough for notebook 03 to show whole.

TensorFlow is imported at the top, as in the codelab: importing runs no TensorFlow op, so
the strategy is still the first thing `run` creates (MultiWorkerMirroredStrategy's rule).
"""

from __future__ import annotations

import dataclasses
import math
import posixpath
import time
import uuid
from typing import Any

import tensorflow as tf
import tf_keras as keras

from trainer import callbacks as cb
from trainer import data, export
from trainer import model as model_lib
from trainer.config import ConfigError, TrainConfig
from trainer.distribution import (
    ClusterInfo,
    check_xla,
    create_strategy,
    parse_tf_config,
    remove_dir,
    write_dir,
)


@dataclasses.dataclass
class RunResult:
    """What a run did and where its outputs are (the chief's paths on every worker)."""

    history: dict[str, list[float]]
    epochs_run: list[int]
    final_metrics: dict[str, float]
    images_per_sec: float | None
    replicas: int
    task: str
    is_chief: bool
    model_dir: str
    savedmodel_dir: str
    keras_file: str
    metrics_file: str
    saved_to: str
    wall_time_s: float
    resumed_from_epoch: int | None
    class_names: list[str]
    config: dict[str, Any]
    # Steps restored from a backup (None: started afresh), steps this process ran, per epoch.
    resumed_from_step: int | None = None
    steps_run: int = 0
    steps_per_epoch: int = 0
    skipped_images: list[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Inputs:
    """The sharded training (and validation) pipelines and what the model needs to know."""

    train: tf.data.Dataset
    validation: tf.data.Dataset | None
    steps_per_epoch: int
    num_examples: int
    class_names: list[str]
    skipped: list[str]


@dataclasses.dataclass
class Fitted:
    """What `fit_with_callbacks` measured: history, epochs, throughput and resume point."""

    history: dict[str, list[float]]
    epochs_run: list[int]
    throughput: cb.Throughput
    progress: cb.Progress


def run(config: TrainConfig) -> RunResult:
    """Train the cassava classifier as configured; every worker returns, the chief keeps the model.

    The codelab's four MWMS points are the numbered steps; `check_outputs` and
    `prepare_process` fail early (unwritable folders, XLA on CPU workers) before any data.
    """
    started = time.perf_counter()
    config.validate()
    info = parse_tf_config()
    strategy = create_strategy(info)  # MWMS 1: the strategy first, before any other TF op
    jit = prepare_process(config, info, strategy)
    target_dir = check_outputs(config, info)
    batch = scale_batch(config.batch_size, strategy)  # MWMS 3: per replica x replicas
    inputs = shard_data(config, batch)  # each worker reads its share (AutoShardPolicy.DATA)
    model, base = build_in_scope(strategy, config, len(inputs.class_names), jit)  # MWMS 2: scope
    fitted = fit_with_callbacks(model, base, strategy, config, info, inputs, batch, jit)
    save_where_this_task_should(model, config, info, target_dir, inputs.class_names)  # MWMS 4
    return report(config, info, strategy, inputs, fitted, target_dir, started)


def prepare_process(config: TrainConfig, info: ClusterInfo, strategy: Any) -> bool:
    """Seeds, mixed precision and XLA for this process; returns whether to compile with XLA."""
    cb.log(
        f"task={info.name} chief={info.is_chief} workers={max(info.num_workers, 1)} "
        f"replicas={strategy.num_replicas_in_sync} strategy={type(strategy).__name__}"
    )
    keras.utils.set_random_seed(config.seed)
    gpu = bool(tf.config.list_physical_devices("GPU"))
    if _switch(config.mixed_precision, gpu):
        keras.mixed_precision.set_global_policy("mixed_float16")
    jit = _switch(config.xla, gpu)
    check_xla(jit, info, gpu)
    return jit


def _switch(value: str, gpu: bool) -> bool:
    return gpu if value == "auto" else value == "on"


def check_outputs(config: TrainConfig, info: ClusterInfo) -> str:
    """Where this task saves (`write_dir`), after checking it and the backups can be written."""
    target_dir = write_dir(config.model_dir, info)
    what = "model directory" if info.is_chief else "worker's temporary directory"
    check_writable(target_dir, what, "--model-dir")
    check_writable(config.checkpoint_dir, "checkpoint directory", "--checkpoint-dir")
    return target_dir


def check_writable(directory: str, what: str, flag: str) -> None:
    """Fail before training when a folder cannot be written, creating and removing nothing
    but one uniquely named probe file.

    The probe goes into the folder when it exists, else into its nearest existing parent
    (making a file there takes the same permission as making the missing folders); a bucket
    path (gs://) needs no folders, so it goes there directly. Workers check the shared
    checkpoint folder at the same moment: when each made the missing folder and removed it
    again afterwards, one worker's removal failed the other's probe (seen in bench/scaling).
    """
    remote = "://" in directory
    where = directory if remote else _nearest_existing(directory)
    probe = posixpath.join(where, f".write-check-{uuid.uuid4().hex[:8]}")
    try:
        if not remote and not tf.io.gfile.isdir(where):
            raise NotADirectoryError(f"{where} is a file, not a folder")
        with tf.io.gfile.GFile(probe, "w") as f:
            f.write("ok")
        tf.io.gfile.remove(probe)
    except Exception as err:
        raise ConfigError(
            f"the {what} {directory!r} cannot be written ({type(err).__name__}: {str(err)[:160]}): "
            f"pass {flag} with a folder or bucket you can write to"
        ) from None


def _nearest_existing(path: str) -> str:
    """``path`` itself when it exists, else its nearest existing parent ("." for a relative one)."""
    path = path.rstrip("/") or "/"
    while not tf.io.gfile.exists(path):
        parent = posixpath.dirname(path) or "."
        if parent == path:
            break
        path = parent
    return path


def scale_batch(per_replica_batch_size: int, strategy: Any) -> int:
    """The global batch: every replica takes ``per_replica_batch_size`` examples per step."""
    return per_replica_batch_size * strategy.num_replicas_in_sync


def shard_data(config: TrainConfig, global_batch: int) -> Inputs:
    """The training and validation pipelines, batched globally and sharded by element.

    `data.make_pipeline` sets `AutoShardPolicy.DATA`: cassava is one or a few files, so
    sharding by file would leave workers without data.
    """
    source = dict(data_dir=config.data_dir, try_gcs=config.try_gcs, bad_images=config.bad_images)
    train = data.load_split(config.data, "train", shuffle_files=True, seed=config.seed, **source)
    check_batch_fits(global_batch, config.batch_size, train.num_examples)
    pipeline = dict(global_batch=global_batch, image_size=config.image_size, cache=config.cache)
    train_ds = data.make_pipeline(
        train, training=True, shuffle_buffer=config.shuffle_buffer, seed=config.seed, **pipeline
    )
    validation = None
    splits = data.available_splits(config.data, data_dir=config.data_dir, try_gcs=config.try_gcs)
    if config.validation and "validation" in splits:
        val = data.load_split(config.data, "validation", **source)
        validation = data.make_pipeline(val, training=False, **pipeline)
        validation = validation.repeat() if config.validation_steps else validation
    steps = config.steps_per_epoch or math.ceil(train.num_examples / global_batch)
    skipped = train.skipped + (val.skipped if validation is not None else [])
    if skipped:
        cb.log(f"skipped {len(skipped)} image(s) that do not decode (--bad-images skip)")
    cb.log(
        f"data={config.data} train_examples={train.num_examples} global_batch={global_batch} "
        f"steps_per_epoch={steps} image_size={config.image_size}"
    )
    return Inputs(train_ds, validation, steps, train.num_examples, train.class_names, skipped)


def check_batch_fits(global_batch: int, per_replica: int, num_examples: int) -> None:
    """Refuse a global batch larger than the training split before it runs out of memory."""
    if global_batch > num_examples:
        replicas = global_batch // per_replica
        raise ConfigError(
            f"the global batch ({per_replica} per replica x {replicas} replica(s) = "
            f"{global_batch}) is larger than the training split ({num_examples} images): pass "
            f"--batch-size {max(1, num_examples // replicas)} or less"
        )


def build_in_scope(strategy: Any, config: TrainConfig, num_classes: int, jit: bool) -> Any:
    """The model and its optimizer, created and compiled inside `strategy.scope()`.

    Variables created in the scope are mirrored on every replica. Returns (model, backbone):
    a fine-tuning phase unfreezes the backbone later.
    """
    with strategy.scope():
        model, base = model_lib.build_model(
            num_classes,
            image_size=config.image_size,
            weights=config.weights,
            dense_units=config.dense_units,
            freeze_base=config.freeze_base,
            bn_momentum=config.bn_momentum,
        )
        model_lib.compile_model(model, config.learning_rate, jit_compile=jit)
    return model, base


def fit_with_callbacks(
    model: Any,
    base: Any,
    strategy: Any,
    config: TrainConfig,
    info: ClusterInfo,
    inputs: Inputs,
    global_batch: int,
    jit: bool,
) -> Fitted:
    """`model.fit` once per phase, with backups (`BackupAndRestore`) and progress lines."""
    total = config.epochs + config.fine_tune_epochs
    progress = cb.Progress(total, info.name, inputs.steps_per_epoch)
    fitted = Fitted({}, [], cb.Throughput(global_batch), progress)
    fault = fault_hook(config, info, inputs.steps_per_epoch)
    for phase, first, last in phases(config):
        if phase == "finetune":
            base.trainable = True
            with strategy.scope():
                model_lib.compile_model(model, config.fine_tune_learning_rate, jit_compile=jit)
        h = model.fit(
            inputs.train,
            epochs=last,
            initial_epoch=first,
            steps_per_epoch=inputs.steps_per_epoch,
            validation_data=inputs.validation,
            validation_steps=config.validation_steps,
            callbacks=fit_callbacks(config, phase, fitted, fault),
            verbose=config.verbose,
        )
        fitted.epochs_run += list(h.epoch)
        for key, values in h.history.items():
            fitted.history.setdefault(key, []).extend(float(v) for v in values)
    if config.fine_tune_epochs:  # phase 1's backups were kept until phase 2 ended
        for phase in ("head", "finetune"):
            remove_dir(backup_dir(config, phase))
    return fitted


def phases(config: TrainConfig) -> list[tuple[str, int, int]]:
    """(name, first epoch, end epoch) of each fit: one phase, or frozen head then fine-tuning."""
    found = [("head" if config.freeze_base else "train", 0, config.epochs)]
    if config.fine_tune_epochs:
        found.append(("finetune", config.epochs, config.epochs + config.fine_tune_epochs))
    return found


def backup_dir(config: TrainConfig, phase: str) -> str:
    """Where `BackupAndRestore` keeps one phase's state (in AIP_CHECKPOINT_DIR on Vertex)."""
    return posixpath.join(config.checkpoint_dir, f"backup-{phase}")


def fit_callbacks(config: TrainConfig, phase: str, fitted: Fitted, fault: Any) -> list[Any]:
    """Throughput first (its clock stops before the backup writes), backup, progress, logs."""
    backup = keras.callbacks.BackupAndRestore(
        backup_dir=backup_dir(config, phase),
        save_freq=config.backup_every_steps or "epoch",
        delete_checkpoint=not config.fine_tune_epochs,
    )
    found = [fitted.throughput, backup, fitted.progress]
    if config.tensorboard_dir:
        found.append(
            keras.callbacks.TensorBoard(log_dir=config.tensorboard_dir, update_freq="epoch")
        )
    return found + ([fault] if fault else [])


def fault_hook(config: TrainConfig, info: ClusterInfo, steps_per_epoch: int) -> Any:
    """The simulated preemption of demos and tests (`LAB_FAIL_*`), or None."""
    if not info.is_multi_worker:
        default_task = "local"
    else:
        default_task = "worker:0" if info.cluster.get("worker") else "chief:0"
    return cb.fault_injection_from_env(
        info.name,
        default_task,
        config.checkpoint_dir,
        steps_per_epoch=steps_per_epoch,
        backup_dir=backup_dir(config, phases(config)[0][0]),
    )


def save_where_this_task_should(
    model: Any, config: TrainConfig, info: ClusterInfo, target_dir: str, class_names: list[str]
) -> None:
    """Every worker saves (the save runs collective ops); only the chief's copy is kept.

    ``target_dir`` is `write_dir`'s answer: the model dir for the chief, a temporary folder
    of its own for any other worker, removed right after its save.
    """
    saved = export.save_model(
        model, target_dir, image_size=config.image_size, class_names=class_names
    )
    if info.is_chief:
        cb.log(f"task={info.name} saved model to {saved['savedmodel']} and {saved['keras']}")
    else:
        remove_dir(target_dir)
        cb.log(f"task={info.name} saved to temporary {target_dir} and removed it")


def report(
    config: TrainConfig,
    info: ClusterInfo,
    strategy: Any,
    inputs: Inputs,
    fitted: Fitted,
    target_dir: str,
    started: float,
) -> RunResult:
    """The run's `RunResult`; the chief also writes it to ``metrics.json`` beside the model."""
    model_dir = config.model_dir.rstrip("/")
    progress, throughput = fitted.progress, fitted.throughput
    result = RunResult(
        history=fitted.history,
        epochs_run=fitted.epochs_run,
        final_metrics={k: v[-1] for k, v in fitted.history.items() if v},
        images_per_sec=throughput.images_per_sec,
        replicas=strategy.num_replicas_in_sync,
        task=info.name,
        is_chief=info.is_chief,
        model_dir=model_dir,
        savedmodel_dir=posixpath.join(model_dir, export.SAVEDMODEL_DIR),
        keras_file=posixpath.join(model_dir, export.KERAS_FILE),
        metrics_file=posixpath.join(model_dir, export.METRICS_FILE),
        saved_to=target_dir,
        wall_time_s=time.perf_counter() - started,
        resumed_from_epoch=progress.first_epoch or None,
        class_names=inputs.class_names,
        config=config.to_dict(),
        resumed_from_step=progress.resumed_from_step,
        steps_run=throughput.steps_run,
        steps_per_epoch=inputs.steps_per_epoch,
        skipped_images=inputs.skipped,
    )
    if info.is_chief:
        extra = {
            "workers": max(info.num_workers, 1),
            "images_per_sec_per_epoch": throughput.epoch_rates,
        }
        export.write_json(result.metrics_file, {**result.to_dict(), **extra})
        cb.log(f"task={info.name} metrics written to {result.metrics_file}")
    return result
