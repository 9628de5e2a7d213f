"""`run(config)`: the whole job, shared by `python -m trainer.task` and the notebooks.

Order matters and follows the codelab: strategy first, then data with the global batch
size, then the model inside `strategy.scope()`, then `fit`, then every worker saves.
"""

from __future__ import annotations

import dataclasses
import math
import posixpath
import time
import uuid
from typing import Any

from trainer.config import ConfigError, TrainConfig
from trainer.distribution import (
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

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _switch(value: str, gpu: bool) -> bool:
    return gpu if value == "auto" else value == "on"


def check_writable(directory: str, what: str, flag: str) -> None:
    """Fail before training when a folder cannot be written, leaving nothing behind."""
    import tensorflow as tf

    probe = posixpath.join(directory, f".write-check-{uuid.uuid4().hex[:8]}")
    try:
        tf.io.gfile.makedirs(directory)
        with tf.io.gfile.GFile(probe, "w") as f:
            f.write("ok")
        tf.io.gfile.remove(probe)
    except Exception as err:
        raise ConfigError(
            f"the {what} {directory!r} cannot be written ({type(err).__name__}: {str(err)[:160]}): "
            f"pass {flag} with a folder or bucket you can write to"
        ) from None


def run(config: TrainConfig) -> RunResult:
    """Train the cassava classifier as configured; every worker returns, the chief keeps the model."""
    started = time.perf_counter()
    config.validate()
    info = parse_tf_config()
    strategy = create_strategy(info)  # before any other TensorFlow op (MWMS requirement)

    import tensorflow as tf
    import tf_keras as keras

    from trainer import callbacks as cb
    from trainer import data, export
    from trainer import model as model_lib

    replicas = strategy.num_replicas_in_sync
    cb.log(
        f"task={info.name} chief={info.is_chief} workers={max(info.num_workers, 1)} replicas={replicas} "
        f"strategy={type(strategy).__name__}"
    )
    keras.utils.set_random_seed(config.seed)
    gpu = bool(tf.config.list_physical_devices("GPU"))
    if _switch(config.mixed_precision, gpu):
        keras.mixed_precision.set_global_policy("mixed_float16")
    jit = _switch(config.xla, gpu)
    check_xla(jit, info, gpu)

    model_dir = config.model_dir.rstrip("/")
    target_dir = write_dir(model_dir, info)
    check_writable(
        target_dir,
        "model directory" if info.is_chief else "worker's temporary directory",
        "--model-dir",
    )
    check_writable(config.checkpoint_dir, "checkpoint directory", "--checkpoint-dir")
    if not info.is_chief:
        remove_dir(target_dir)  # the check created it; the save below recreates it

    global_batch = config.batch_size * replicas
    train_split = data.load_split(
        config.data,
        "train",
        data_dir=config.data_dir,
        try_gcs=config.try_gcs,
        shuffle_files=True,
        seed=config.seed,
    )
    steps = config.steps_per_epoch or math.ceil(train_split.num_examples / global_batch)
    train_ds = data.make_pipeline(
        train_split,
        global_batch=global_batch,
        image_size=config.image_size,
        training=True,
        shuffle_buffer=config.shuffle_buffer,
        cache=config.cache,
        seed=config.seed,
    )
    val_ds = None
    splits = data.available_splits(config.data, data_dir=config.data_dir, try_gcs=config.try_gcs)
    if config.validation and "validation" in splits:
        val_split = data.load_split(
            config.data, "validation", data_dir=config.data_dir, try_gcs=config.try_gcs
        )
        val_ds = data.make_pipeline(
            val_split,
            global_batch=global_batch,
            image_size=config.image_size,
            training=False,
            cache=config.cache,
        )
        if config.validation_steps:
            val_ds = val_ds.repeat()
    class_names = train_split.class_names
    cb.log(
        f"task={info.name} data={config.data} train_examples={train_split.num_examples} "
        f"global_batch={global_batch} steps_per_epoch={steps} image_size={config.image_size}"
    )

    with strategy.scope():
        model, base = model_lib.build_model(
            len(class_names),
            image_size=config.image_size,
            weights=config.weights,
            dense_units=config.dense_units,
            freeze_base=config.freeze_base,
            bn_momentum=config.bn_momentum,
        )
        model_lib.compile_model(model, config.learning_rate, jit_compile=jit)

    total_epochs = config.epochs + config.fine_tune_epochs
    throughput = cb.Throughput(global_batch)
    progress = cb.Progress(total_epochs, info.name, steps)
    default_fault_task = (
        "local"
        if not info.is_multi_worker
        else ("worker:0" if info.cluster.get("worker") else "chief:0")
    )
    first_phase = _phases(config)[0][0]
    fault = cb.fault_injection_from_env(
        info.name,
        default_fault_task,
        config.checkpoint_dir,
        steps_per_epoch=steps,
        backup_dir=posixpath.join(config.checkpoint_dir, f"backup-{first_phase}"),
    )

    def fit_callbacks(phase: str, delete_backup: bool) -> list[Any]:
        backup = keras.callbacks.BackupAndRestore(
            backup_dir=posixpath.join(config.checkpoint_dir, f"backup-{phase}"),
            save_freq=config.backup_every_steps or "epoch",
            delete_checkpoint=delete_backup,
        )
        # Throughput first: its epoch clock stops before the backup writes its checkpoint.
        found = [throughput, backup, progress]
        if config.tensorboard_dir:
            found.append(
                keras.callbacks.TensorBoard(log_dir=config.tensorboard_dir, update_freq="epoch")
            )
        return found + ([fault] if fault else [])

    fit_args = dict(
        steps_per_epoch=steps,
        validation_data=val_ds,
        validation_steps=config.validation_steps,
        verbose=config.verbose,
    )
    history: dict[str, list[float]] = {}
    epochs_run: list[int] = []
    for phase, first, last in _phases(config):
        if phase == "finetune":
            base.trainable = True
            with strategy.scope():
                model_lib.compile_model(model, config.fine_tune_learning_rate, jit_compile=jit)
        delete_backup = not config.fine_tune_epochs  # keep phase-1 backups until phase 2 ends
        h = model.fit(
            train_ds,
            epochs=last,
            initial_epoch=first,
            callbacks=fit_callbacks(phase, delete_backup),
            **fit_args,
        )
        epochs_run += list(h.epoch)
        for key, values in h.history.items():
            history.setdefault(key, []).extend(float(v) for v in values)
    if config.fine_tune_epochs:
        for phase in ("head", "finetune"):
            remove_dir(posixpath.join(config.checkpoint_dir, f"backup-{phase}"))

    saved = export.save_model(
        model, target_dir, image_size=config.image_size, class_names=class_names
    )
    if not info.is_chief:
        remove_dir(target_dir)
        cb.log(f"task={info.name} saved to temporary {target_dir} and removed it")
    else:
        cb.log(f"task={info.name} saved model to {saved['savedmodel']} and {saved['keras']}")

    final = {k: v[-1] for k, v in history.items() if v}
    result = RunResult(
        history=history,
        epochs_run=epochs_run,
        final_metrics=final,
        images_per_sec=throughput.images_per_sec,
        replicas=replicas,
        task=info.name,
        is_chief=info.is_chief,
        model_dir=model_dir,
        savedmodel_dir=posixpath.join(model_dir, export.SAVEDMODEL_DIR),
        keras_file=posixpath.join(model_dir, export.KERAS_FILE),
        metrics_file=posixpath.join(model_dir, export.METRICS_FILE),
        saved_to=target_dir,
        wall_time_s=time.perf_counter() - started,
        resumed_from_epoch=progress.first_epoch if progress.first_epoch else None,
        class_names=class_names,
        config=config.to_dict(),
        resumed_from_step=progress.resumed_from_step,
        steps_run=throughput.steps_run,
        steps_per_epoch=steps,
    )
    if info.is_chief:
        export.write_json(
            result.metrics_file,
            {
                **result.to_dict(),
                "workers": max(info.num_workers, 1),
                "images_per_sec_per_epoch": throughput.epoch_rates,
            },
        )
        cb.log(f"task={info.name} metrics written to {result.metrics_file}")
    return result


def _phases(config: TrainConfig) -> list[tuple[str, int, int]]:
    """(name, first epoch, end epoch) of each fit: one phase, or frozen head then fine-tuning."""
    phases = [("head" if config.freeze_base else "train", 0, config.epochs)]
    if config.fine_tune_epochs:
        phases.append(("finetune", config.epochs, config.epochs + config.fine_tune_epochs))
    return phases
