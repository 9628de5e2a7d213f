"""Training: the codelab's dataset + model against the kit's pipeline + model, one process each.

Both sides train the same ResNet50 + Dense(1016) head with Adam(1e-4) on the same JPEGs,
with random initial weights (no machine here reaches the ImageNet weights), through
tf-keras `fit`. The codelab side runs with ``TF_USE_LEGACY_KERAS=1`` so its `tf.keras`
is tf-keras, like the kit. Two CPU cores cannot train 300x300 ResNet50 in a benchmark's
budget (about 5 images/s), so this runs smaller images; the 300x300 figures are
`bench.gpu`'s job.

Figures per variant (medians over the runs):
- ``images_per_s``: batch size / median step time over the steps after epoch 1 (epoch 1
  pays graph tracing and, for the codelab, filling its 1,000-image shuffle buffer);
- ``first_epoch_s``: epoch 1's wall time (tracing, and for the codelab filling its shuffle
  buffer: the start-up a learner waits through);
- ``peak_rss_mb``: the training process's high-water mark.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench.measure import (
    BenchContext,
    BenchError,
    check,
    current_rss_mb,
    median,
    ratio,
    run_child,
    section,
)

FULL = {"image_size": 96, "batch_size": 16, "steps_per_epoch": 6, "epochs": 2}
QUICK = {"image_size": 32, "batch_size": 4, "steps_per_epoch": 2, "epochs": 2}
# The kit's steady-state training speed must not fall behind the codelab's (5% for noise).
TARGET_MIN_SPEED_RATIO = 0.95
DEFAULT_REPEATS = 2


def _step_timer() -> Any:
    """A tf-keras callback recording each training step's wall time, per epoch."""
    import tf_keras as keras

    class StepTimer(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.steps: list[list[float]] = []
            self.epoch_s: list[float] = []
            self._begin = 0.0
            self._epoch_begin = 0.0

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.steps.append([])
            self._epoch_begin = time.perf_counter()

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            self._begin = time.perf_counter()

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self.steps[-1].append(time.perf_counter() - self._begin)

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            self.epoch_s.append(time.perf_counter() - self._epoch_begin)

    return StepTimer()


def _fit_and_time(
    model: Any, dataset: Any, batch_size: int, steps_per_epoch: int, epochs: int
) -> dict[str, Any]:
    timer = _step_timer()
    model.fit(dataset, epochs=epochs, steps_per_epoch=steps_per_epoch, callbacks=[timer], verbose=0)
    later_steps = [s for epoch in timer.steps[1:] for s in epoch] or timer.steps[0]
    return {
        "images_per_s": batch_size / statistics.median(later_steps),
        "first_epoch_s": timer.epoch_s[0],
        "epoch_s": timer.epoch_s,
        "step_s_median": statistics.median(later_steps),
    }


def train_codelab(
    data_dir: str, image_size: int, batch_size: int, steps_per_epoch: int, epochs: int
) -> dict[str, Any]:
    """Child (needs TF_USE_LEGACY_KERAS=1): `create_dataset` + `create_model` + `fit`."""
    import tensorflow as tf

    from bench import codelab

    tf.keras.utils.set_random_seed(1)
    baseline = current_rss_mb()
    started = time.perf_counter()
    dataset, classes = codelab.create_dataset(batch_size, data_dir=data_dir, image_size=image_size)
    model = codelab.create_model(classes, weights=None)
    build_s = time.perf_counter() - started
    timing = _fit_and_time(model, dataset, batch_size, steps_per_epoch, epochs)
    return {
        **timing,
        "build_s": build_s,
        "baseline_rss_mb": baseline,
        "legacy_keras": type(model).__module__.startswith("tf_keras"),
    }


def train_kit(
    data_dir: str, image_size: int, batch_size: int, steps_per_epoch: int, epochs: int
) -> dict[str, Any]:
    """Child: `trainer.data` pipeline + `trainer.model` build/compile (as `trainer.run` does)."""
    import tf_keras as keras

    from trainer import data
    from trainer import model as model_lib

    keras.utils.set_random_seed(1)
    baseline = current_rss_mb()
    started = time.perf_counter()
    split = data.load_split("tfds:cassava", "train", data_dir=data_dir, shuffle_files=True, seed=1)
    dataset = data.make_pipeline(
        split, global_batch=batch_size, image_size=image_size, training=True, seed=1
    )
    model, _base = model_lib.build_model(
        len(split.class_names), image_size=image_size, weights="none"
    )
    model_lib.compile_model(model, 1e-4, jit_compile=False)
    build_s = time.perf_counter() - started
    timing = _fit_and_time(model, dataset, batch_size, steps_per_epoch, epochs)
    return {
        **timing,
        "build_s": build_s,
        "baseline_rss_mb": baseline,
        "legacy_keras": type(model).__module__.startswith("tf_keras"),
    }


VARIANTS: dict[str, tuple[str, dict[str, str]]] = {
    "codelab": ("bench.training:train_codelab", {"TF_USE_LEGACY_KERAS": "1"}),
    "kit": ("bench.training:train_kit", {}),
}


def run(ctx: BenchContext) -> dict[str, Any]:
    """Both variants, alternating, `DEFAULT_REPEATS` times (2: each run pays a ResNet50 build
    and trace, and its speed figure is already a median over its steps)."""
    started = time.perf_counter()
    sizes = dict(QUICK if ctx.quick else FULL)
    repeats = ctx.repeats_for(DEFAULT_REPEATS)
    params: dict[str, Any] = {**sizes, "repeats": repeats}
    runs: list[dict[str, Any]] = []
    for repeat in range(repeats):
        for name, (target, env) in VARIANTS.items():
            kwargs = {"data_dir": str(ctx.tfds_data_dir), **sizes}
            try:
                result = run_child(target, kwargs, env=env)
            except BenchError as err:
                return section(f"error: {err}", params=params, runs=runs)
            runs.append({"variant": name, "repeat": repeat, **result})
    summary: dict[str, float | None] = {}
    for name in VARIANTS:
        mine = [r for r in runs if r["variant"] == name]
        for key in ("images_per_s", "first_epoch_s", "build_s", "peak_rss_mb"):
            summary[f"{name}.{key}"] = median([r[key] for r in mine])
    speed = ratio(summary["kit.images_per_s"], summary["codelab.images_per_s"])
    summary["kit.speed_ratio_vs_codelab"] = speed
    summary["kit.first_epoch_ratio_vs_codelab"] = ratio(
        summary["kit.first_epoch_s"], summary["codelab.first_epoch_s"]
    )
    checks = [
        check(
            "training.kit.speed_ratio_vs_codelab",
            speed,
            f">= {TARGET_MIN_SPEED_RATIO} (steady-state images/s, kit / codelab)",
            None if speed is None else speed >= TARGET_MIN_SPEED_RATIO,
        )
    ]
    notes = [
        f"CPU-sized run: {params['image_size']}x{params['image_size']}, batch "
        f"{params['batch_size']}, {params['steps_per_epoch']} steps x {params['epochs']} epochs, "
        "random weights; the model dominates step time on CPU, so equal speed is the expectation."
    ]
    return section(
        params=params,
        summary=summary,
        checks=checks,
        runs=runs,
        notes=notes,
        wall_s=time.perf_counter() - started,
    )
