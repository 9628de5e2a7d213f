"""Training: the trainer's `fit` on its input pipeline against a bare `model.fit` on tensors.

The question is whether the kit's pipeline ever starves the model, so both sides train the
same model (the trainer's `build_model` + `compile_model`: ResNet50 with its head, random
initial weights since no machine here reaches the ImageNet weights) with `model.fit`:
- ``kit``: on `trainer.data.make_pipeline` as `trainer.train` builds it (the JPEGs decoded,
  resized, shuffled, cached and batched while the model trains: on 2 cores the pipeline
  competes with the model for the same CPUs);
- ``bare``: on the same number of images already decoded and resized, held as in-memory
  uint8 tensors as the pipeline yields them (`model.fit(x, y)`; the model's first layer
  scales them on both sides): the model's own speed, with no input work at all.
They share one process (two instances of the model) and take turns every 2 steps: the
kit's single `fit` (its pipeline built and iterated once, as in `trainer.train`) runs the
bare `fit` from its `on_epoch_end`, so load from elsewhere (on a shared 2-core machine,
step times here halved and doubled within a minute) slows both alike. At 64x64 and
128x128: two CPU cores cannot train 300x300 ResNet50 in a benchmark's budget (`bench.gpu`).

Figures per image size (one process each):
- ``{kit,bare}_{size}.images_per_s``: batch / median step time over the timed steps, a step
  being `on_train_batch_begin` to `on_train_batch_end` (the next batch plus the update);
- ``ratio_{size}``: kit / bare images/s; ``ready_s``: build, first trace and warm-up;
  ``peak_rss_mb``: the process's high-water mark.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench.measure import BenchContext, BenchError, check, median, run_child, section, spread

SIZES = (64, 128)
FULL = {"batch_size": 16, "warmup_steps": 2, "rounds": 6, "steps_per_round": 2}
QUICK = {"batch_size": 4, "warmup_steps": 1, "rounds": 2, "steps_per_round": 1}
QUICK_SIZES = (32,)
# Issue 6: the pipeline must never starve the model (5% for noise).
TARGET_MIN_RATIO = 0.95
# Processes per size, sizes alternating (issue 21: medians of >= 3 runs, with spread); each
# process's figures are already medians over its alternating steps.
DEFAULT_REPEATS = 3
SIDES = ("kit", "bare")
CHILD_ENV = {"TF_USE_LEGACY_KERAS": "1"}


def _callbacks() -> Any:
    import tf_keras as keras

    class StepTimer(keras.callbacks.Callback):
        """Seconds of every training step, from batch begin to batch end."""

        def __init__(self) -> None:
            super().__init__()
            self.steps: list[float] = []
            self._begin = 0.0

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            self._begin = time.perf_counter()

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self.steps.append(time.perf_counter() - self._begin)

    class TakeTurns(keras.callbacks.Callback):
        """After each epoch of the kit's `fit`, one `fit` of the bare model on tensors."""

        def __init__(self, bare_fit: Any) -> None:
            super().__init__()
            self.bare_fit = bare_fit

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            self.bare_fit()

    return StepTimer, TakeTurns


def fit_vs_bare(
    data_dir: str,
    image_size: int,
    batch_size: int,
    warmup_steps: int,
    rounds: int,
    steps_per_round: int,
) -> dict[str, Any]:
    """Child (TF_USE_LEGACY_KERAS=1): `fit` on the kit's pipeline and on tensors, in turn.

    Two instances of the same model: the kit's trains with one `fit` over the whole run, so
    its pipeline is built and iterated once, as in `trainer.train`; after each of its
    epochs (``steps_per_round`` steps) the bare instance runs one `fit` of as many steps on
    in-memory tensors. The first epoch of each (``warmup_steps``) is not timed.
    """
    import tensorflow as tf
    import tf_keras as keras

    from trainer import data
    from trainer import model as model_lib

    keras.utils.set_random_seed(1)
    begin = time.perf_counter()
    split = data.load_split("tfds:cassava", "train", data_dir=data_dir, shuffle_files=True, seed=1)
    pipeline = data.make_pipeline(
        split, global_batch=batch_size, image_size=image_size, training=True, seed=1
    )
    # The bare side's tensors: as many of the same images as one round takes, decoded once.
    held = batch_size * max(steps_per_round, warmup_steps)
    evaluation = data.make_pipeline(
        split, global_batch=held, image_size=image_size, training=False, cache="off"
    )
    images, labels = next(iter(evaluation))
    images, labels = tf.constant(images.numpy()), tf.constant(labels.numpy())

    def build() -> Any:
        model, _base = model_lib.build_model(
            len(split.class_names), image_size=image_size, weights="none"
        )
        model_lib.compile_model(model, 1e-4, jit_compile=False)
        return model

    kit_model, bare_model = build(), build()
    StepTimer, TakeTurns = _callbacks()
    timers = {"kit": StepTimer(), "bare": StepTimer()}
    fits = {"bare": 0}

    def bare_fit() -> None:
        steps = warmup_steps if fits["bare"] == 0 else steps_per_round
        fits["bare"] += 1
        count = batch_size * steps
        bare_model.fit(
            images[:count],
            labels[:count],
            batch_size=batch_size,
            epochs=1,
            shuffle=False,
            verbose=0,
            callbacks=[timers["bare"]],
        )
        if fits["bare"] == 1:  # warm-up done on both sides: start timing from here
            result["ready_s"] = time.perf_counter() - begin
            timers["kit"].steps.clear()
            timers["bare"].steps.clear()

    result: dict[str, Any] = {}
    # Epoch 1 is the warm-up (steps_per_round steps: tracing, the pipeline's first fill).
    kit_model.fit(
        pipeline,
        epochs=1 + rounds,
        steps_per_epoch=steps_per_round,
        verbose=0,
        callbacks=[timers["kit"], TakeTurns(bare_fit)],
    )
    for side in SIDES:
        result[f"{side}.step_s"] = timers[side].steps
        result[f"{side}.images_per_s"] = batch_size / statistics.median(timers[side].steps)
    result["ratio"] = result["kit.images_per_s"] / result["bare.images_per_s"]
    result["cache_mode"] = data.cache_mode("auto", split.num_examples, image_size)
    return result


def run(ctx: BenchContext) -> dict[str, Any]:
    """One process per image size (each already a median over its alternating steps)."""
    started = time.perf_counter()
    settings = dict(QUICK if ctx.quick else FULL)
    sizes = QUICK_SIZES if ctx.quick else SIZES
    repeats = ctx.repeats_for(DEFAULT_REPEATS)
    params: dict[str, Any] = {**settings, "image_sizes": list(sizes), "repeats": repeats}
    runs: list[dict[str, Any]] = []
    for repeat in range(repeats):
        for size in sizes:
            kwargs = {"data_dir": str(ctx.tfds_data_dir), "image_size": size, **settings}
            try:
                result = run_child("bench.training:fit_vs_bare", kwargs, env=CHILD_ENV)
            except BenchError as err:
                return section(f"error: {err}", params=params, runs=runs)
            runs.append({"image_size": size, "repeat": repeat, **result})
    summary = summarize(runs, sizes)
    checks = targets(summary, sizes)
    notes = [
        f"{', '.join(f'{s}x{s}' for s in sizes)}, batch {settings['batch_size']}, "
        f"{settings['warmup_steps']} warm-up steps, then {settings['rounds']} rounds of "
        f"{settings['steps_per_round']} steps per side in turn (two instances of the model); "
        "random weights; the kit's "
        "pipeline decodes on the same 2 cores the model trains on."
    ]
    return section(
        params=params,
        summary=summary,
        spreads=spreads(runs, sizes),
        checks=checks,
        runs=runs,
        notes=notes,
        wall_s=time.perf_counter() - started,
    )


def summarize(runs: list[dict[str, Any]], sizes: tuple[int, ...]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for size in sizes:
        mine = [r for r in runs if r["image_size"] == size]
        for side in SIDES:
            summary[f"{side}_{size}.images_per_s"] = median(
                [r[f"{side}.images_per_s"] for r in mine]
            )
        summary[f"ratio_{size}"] = median([r["ratio"] for r in mine])
        summary[f"ready_{size}_s"] = median([r["ready_s"] for r in mine])
        summary[f"peak_rss_{size}_mb"] = median([r["peak_rss_mb"] for r in mine])
    return summary


def _per_run_figures(size: int) -> dict[str, str]:
    """Summary figure -> the per-run key it is the median of."""
    return {
        **{f"{side}_{size}.images_per_s": f"{side}.images_per_s" for side in SIDES},
        f"ratio_{size}": "ratio",
        f"ready_{size}_s": "ready_s",
        f"peak_rss_{size}_mb": "peak_rss_mb",
    }


def spreads(runs: list[dict[str, Any]], sizes: tuple[int, ...]) -> dict[str, dict[str, Any]]:
    """Min/max/n over the processes of each size (a ratio is each process's own kit / bare)."""
    result: dict[str, dict[str, Any]] = {}
    for size in sizes:
        mine = [r for r in runs if r["image_size"] == size]
        for figure, key in _per_run_figures(size).items():
            result[figure] = spread([r.get(key) for r in mine])
    return result


def targets(summary: dict[str, Any], sizes: tuple[int, ...]) -> list[dict[str, Any]]:
    checks = []
    for size in sizes:
        value = summary.get(f"ratio_{size}")
        checks.append(
            check(
                f"training.ratio_{size}",
                value,
                f">= {TARGET_MIN_RATIO} (images/s, trainer's pipeline / bare fit on tensors)",
                None if value is None else value >= TARGET_MIN_RATIO,
            )
        )
    return checks
