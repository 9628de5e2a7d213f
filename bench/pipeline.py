"""Input pipeline: the codelab's `create_dataset` against the kit's `make_pipeline`.

Both read the same cached JPEG set, at the codelab's 300x300 and batch 64, for the
codelab's two epochs, with no model attached: this measures what the pipeline alone
costs in time and memory. Each run is its own process (its peak RSS is that pipeline's),
and the variants alternate run by run so a noisy neighbour hurts them alike.

Figures per variant (medians over the runs):
- ``first_batch_s``: from building the dataset to the first batch (the codelab's
  `shuffle(1000)` must first decode and resize 1,000 images to float32);
- ``images_per_s``: images delivered over both epochs / their wall time;
- ``peak_rss_mb`` and ``rss_growth_mb`` (peak minus the RSS after importing TensorFlow).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
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

BATCH_SIZE = 64
IMAGE_SIZE = 300
EPOCHS = 2
QUICK_BATCH_SIZE = 8
DEFAULT_REPEATS = 3

# Variant name -> (child function, extra kwargs). `kit` is the trainer's default
# (`--cache auto`); `kit_nocache` shows what the cache costs and buys.
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "codelab": ("bench.pipeline:measure_codelab", {}),
    "kit": ("bench.pipeline:measure_kit", {"cache": "auto"}),
    "kit_nocache": ("bench.pipeline:measure_kit", {"cache": "off"}),
}

# Targets (see bench/README.md): the kit must hold at most half the codelab's extra memory
# and deliver images at least 1.3x as fast, measured side by side.
TARGET_MEMORY_RATIO = 0.5
TARGET_SPEEDUP = 1.3


def _time_epochs(
    batches_of_epoch: Callable[[int], Iterable[Any]], epochs: int, started: float
) -> dict[str, Any]:
    """Drain each epoch's batches; first-batch latency counts from ``started`` (dataset build)."""
    first_batch_s = None
    epoch_s: list[float] = []
    epoch_images: list[int] = []
    for epoch in range(epochs):
        begin = time.perf_counter()
        images = 0
        for images_batch, _labels in batches_of_epoch(epoch):
            if first_batch_s is None:
                first_batch_s = time.perf_counter() - started
            images += int(images_batch.shape[0])
        epoch_s.append(time.perf_counter() - begin)
        epoch_images.append(images)
    total_s = time.perf_counter() - started
    return {
        "first_batch_s": first_batch_s,
        "epoch_s": epoch_s,
        "epoch_images": epoch_images,
        "total_s": total_s,
        "images_per_s": sum(epoch_images) / total_s,
    }


def measure_codelab(
    data_dir: str, batch_size: int, image_size: int, epochs: int = EPOCHS
) -> dict[str, Any]:
    """Child: the codelab's `create_dataset`, iterated as `fit` does (a new pass per epoch)."""
    import tensorflow as tf  # noqa: F401  (imported before the baseline RSS is taken)

    from bench import codelab

    baseline = current_rss_mb()
    started = time.perf_counter()
    dataset, _classes = codelab.create_dataset(batch_size, data_dir=data_dir, image_size=image_size)
    timing = _time_epochs(lambda _epoch: dataset, epochs, started)
    return {**timing, "baseline_rss_mb": baseline}


def measure_kit(
    data_dir: str, batch_size: int, image_size: int, cache: str, epochs: int = EPOCHS
) -> dict[str, Any]:
    """Child: `trainer.data.make_pipeline` as `trainer.run` builds it (repeating, steps/epoch)."""
    import tensorflow as tf  # noqa: F401

    from trainer import data

    baseline = current_rss_mb()
    started = time.perf_counter()
    split = data.load_split("tfds:cassava", "train", data_dir=data_dir, shuffle_files=True, seed=1)
    dataset = data.make_pipeline(
        split,
        global_batch=batch_size,
        image_size=image_size,
        training=True,
        cache=cache,
        seed=1,
    )
    steps = math.ceil(split.num_examples / batch_size)
    iterator = iter(dataset)
    timing = _time_epochs(lambda _epoch: (next(iterator) for _ in range(steps)), epochs, started)
    cached = data.should_cache(cache, split.num_examples, image_size)
    return {**timing, "baseline_rss_mb": baseline, "cached": cached}


def run(ctx: BenchContext) -> dict[str, Any]:
    """Every variant, interleaved, `DEFAULT_REPEATS` times; medians, ratios and the targets."""
    started = time.perf_counter()
    batch_size = QUICK_BATCH_SIZE if ctx.quick else BATCH_SIZE
    params = {
        "batch_size": batch_size,
        "image_size": IMAGE_SIZE,
        "epochs": EPOCHS,
        "train_images": ctx.train_images,
        "repeats": ctx.repeats_for(DEFAULT_REPEATS),
    }
    runs: list[dict[str, Any]] = []
    for repeat in range(params["repeats"]):
        for name, (target, extra) in VARIANTS.items():
            kwargs = {
                "data_dir": str(ctx.tfds_data_dir),
                "batch_size": batch_size,
                "image_size": IMAGE_SIZE,
                **extra,
            }
            try:
                result = run_child(target, kwargs)
            except BenchError as err:
                return section(f"error: {err}", params=params, runs=runs)
            result["rss_growth_mb"] = result["peak_rss_mb"] - result["baseline_rss_mb"]
            runs.append({"variant": name, "repeat": repeat, **result})
    summary = summarize(runs)
    return section(
        params=params,
        summary=summary,
        checks=targets(summary),
        runs=runs,
        notes=projection_notes(),
        wall_s=time.perf_counter() - started,
    )


def summarize(runs: list[dict[str, Any]]) -> dict[str, float | None]:
    """Per-variant medians, and the kit/codelab ratios computed from the medians."""
    summary: dict[str, float | None] = {}
    for name in VARIANTS:
        mine = [r for r in runs if r["variant"] == name]
        for key in ("first_batch_s", "images_per_s", "peak_rss_mb", "rss_growth_mb"):
            summary[f"{name}.{key}"] = median([r[key] for r in mine])
    for name in ("kit", "kit_nocache"):
        summary[f"{name}.speedup_vs_codelab"] = ratio(
            summary[f"{name}.images_per_s"], summary["codelab.images_per_s"]
        )
        summary[f"{name}.memory_ratio_vs_codelab"] = ratio(
            summary[f"{name}.rss_growth_mb"], summary["codelab.rss_growth_mb"]
        )
    return summary


def targets(summary: dict[str, float | None]) -> list[dict[str, Any]]:
    checks = []
    for name in ("kit", "kit_nocache"):
        memory = summary[f"{name}.memory_ratio_vs_codelab"]
        speed = summary[f"{name}.speedup_vs_codelab"]
        checks.append(
            check(
                f"pipeline.{name}.memory_ratio_vs_codelab",
                memory,
                f"<= {TARGET_MEMORY_RATIO} (RSS growth, kit / codelab)",
                None if memory is None else memory <= TARGET_MEMORY_RATIO,
            )
        )
        checks.append(
            check(
                f"pipeline.{name}.speedup_vs_codelab",
                speed,
                f">= {TARGET_SPEEDUP}x (images/s over 2 epochs)",
                None if speed is None else speed >= TARGET_SPEEDUP,
            )
        )
    return checks


def projection_notes() -> list[str]:
    """What the measured set does not show: the kit's cache grows with the real split."""
    from labkit.sample import REAL_SPLIT_SIZES
    from trainer.data import CACHE_LIMIT_BYTES

    real_train = REAL_SPLIT_SIZES["train"]
    cache_mb = real_train * IMAGE_SIZE * IMAGE_SIZE * 3 / 2**20
    decision = "caches" if cache_mb * 2**20 <= CACHE_LIMIT_BYTES else "does not cache"
    return [
        f"On the real train split ({real_train} images) `--cache auto` {decision}: "
        f"{cache_mb:.0f} MiB of uint8 300x300 images (limit {CACHE_LIMIT_BYTES / 2**20:.0f} MiB); "
        "the codelab's shuffle buffer stays at 1,000 float32 images (~1030 MiB) whatever the size."
    ]
