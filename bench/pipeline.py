"""Input pipeline: the codelab's `create_dataset` against the kit's `make_pipeline`.

Both read the same cached JPEG set at the codelab's 300x300 and batch 64, for two epochs,
with no model attached: this measures what the pipeline alone costs in time and memory.
The codelab side is its own `codelab/trainer/task.py` (`bench.baseline`), iterated as
`fit` iterates a finite dataset (a new pass per epoch); the kit side is
`trainer.data.make_pipeline` as `trainer.train` builds it (repeating, steps per epoch).
Each run is its own process (its peak RSS is that pipeline's alone), and the variants
alternate run by run so a noisy neighbour hurts them alike.

Figures per variant (medians over the runs):
- ``epoch1_images_per_s``: images over the first full epoch / its wall time, from the
  first request for a batch (both sides decode every image in it; the kit also fills
  its cache);
- ``epoch2_images_per_s``: the same for the second epoch (the codelab decodes again; the
  kit replays its cache);
- ``first_batch_s``: from building the dataset to the first batch (the codelab's
  `shuffle(1000)` must first decode and resize 1,000 images to float32);
- ``peak_rss_mb`` (the process's high-water mark) and ``rss_growth_mb`` (peak minus the
  RSS after importing TensorFlow, before the pipeline was built).
Ratios (kit / codelab, from the medians): ``throughput_ratio`` (epoch 1),
``cached_epoch_ratio`` (epoch 2), ``peak_rss_ratio``, ``rss_growth_ratio``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from bench.baseline import CODELAB_IMAGE_SIZE, codelab_env, load_codelab
from bench.measure import (
    BenchContext,
    BenchError,
    check,
    current_rss_mb,
    median,
    ratio,
    run_child,
    section,
    spread,
)

BATCH_SIZE = 64  # the codelab's PER_REPLICA_BATCH_SIZE
IMAGE_SIZE = CODELAB_IMAGE_SIZE
EPOCHS = 2
QUICK_BATCH_SIZE = 8
DEFAULT_REPEATS = 3  # runs of every variant (issue 21: medians of >= 3 runs, with spread)

# Variant name -> (child function, extra kwargs, is an extra). `kit` is the trainer's
# default (`--cache auto`: in memory up to 1/8 of the machine's memory, else a temp file).
VARIANTS: dict[str, tuple[str, dict[str, Any], bool]] = {
    "codelab": ("bench.pipeline:measure_codelab", {}, False),
    "kit": ("bench.pipeline:measure_kit", {"cache": "auto"}, False),
    "kit_disk": ("bench.pipeline:measure_kit", {"cache": "disk"}, True),
    "kit_nocache": ("bench.pipeline:measure_kit", {"cache": "off"}, True),
}
FIGURES = (
    "epoch1_images_per_s",
    "epoch2_images_per_s",
    "first_batch_s",
    "peak_rss_mb",
    "rss_growth_mb",
    "baseline_rss_mb",
)
REPLAY_CEILING = (
    "replay_ceiling"  # a run of `measure_replay_ceiling` per repeat, after the variants
)
DECODE_CEILING = "decode_ceiling"  # a run of `measure_decode_ceiling` per repeat, likewise

# Issue 21's targets (issue 6's with a margin), kit / codelab, judged on medians.
TARGET_THROUGHPUT_RATIO = 1.5  # images/s over a full (first) epoch, at least
TARGET_PEAK_RSS_RATIO = 0.35  # peak resident memory of each process, at most
TARGET_CACHED_EPOCH_RATIO = 5.5  # second epoch: the kit's cache against re-decoding, at least


def _time_epochs(
    batches_of_epoch: Callable[[int], Iterable[Any]], epochs: int, built: float
) -> dict[str, Any]:
    """Drain each epoch's batches; first-batch latency counts from ``built`` (dataset build)."""
    first_batch_s = None
    epoch_s: list[float] = []
    epoch_images: list[int] = []
    for epoch in range(epochs):
        begin = time.perf_counter()
        images = 0
        for images_batch, _labels in batches_of_epoch(epoch):
            if first_batch_s is None:
                first_batch_s = time.perf_counter() - built
            images += int(images_batch.shape[0])
        epoch_s.append(time.perf_counter() - begin)
        epoch_images.append(images)
    rates = [n / s for n, s in zip(epoch_images, epoch_s, strict=True)]
    return {
        "first_batch_s": first_batch_s,
        "epoch_s": epoch_s,
        "epoch_images": epoch_images,
        "epoch1_images_per_s": rates[0],
        "epoch2_images_per_s": rates[1] if len(rates) > 1 else None,
        "images_per_s": sum(epoch_images) / sum(epoch_s),
    }


def measure_codelab(data_dir: str, batch_size: int, epochs: int = EPOCHS) -> dict[str, Any]:
    """Child: the codelab's own `create_dataset`, a new pass per epoch as `fit` makes."""
    import tensorflow as tf  # noqa: F401  (imported before the baseline RSS is taken)
    import tensorflow_datasets  # noqa: F401

    codelab = load_codelab(data_dir)  # tfds.load() without data_dir: TFDS_DATA_DIR
    baseline = current_rss_mb()
    built = time.perf_counter()
    dataset, _classes = codelab.create_dataset(batch_size)
    timing = _time_epochs(lambda _epoch: dataset, epochs, built)
    return {**timing, "baseline_rss_mb": baseline}


def measure_kit(
    data_dir: str, batch_size: int, image_size: int, cache: str, epochs: int = EPOCHS
) -> dict[str, Any]:
    """Child: `trainer.data.make_pipeline` as `trainer.train` builds it (repeating)."""
    import tensorflow as tf  # noqa: F401
    import tensorflow_datasets  # noqa: F401

    from trainer import data

    baseline = current_rss_mb()
    built = time.perf_counter()
    split = data.load_split("tfds:cassava", "train", data_dir=data_dir, shuffle_files=True, seed=1)
    dataset = data.make_pipeline(
        split, global_batch=batch_size, image_size=image_size, training=True, cache=cache, seed=1
    )
    steps = math.ceil(split.num_examples / batch_size)
    iterator: Iterator[Any] | None = None

    def epoch_batches(_epoch: int) -> Iterator[Any]:
        nonlocal iterator
        if iterator is None:  # created inside epoch 1's time, as the codelab's pass is
            iterator = iter(dataset)
        for _ in range(steps):
            yield next(iterator)

    timing = _time_epochs(epoch_batches, epochs, built)
    mode = data.cache_mode(cache, split.num_examples, image_size, training=True)
    return {**timing, "baseline_rss_mb": baseline, "cache_mode": mode}


def measure_decode_ceiling(data_dir: str, batch_size: int, image_size: int) -> dict[str, Any]:
    """Child: images/s of the work no first epoch can skip at this size, alone.

    Read the TFDS records, decode every JPEG and resize it with the kit's own functions
    (`trainer.data.decode_and_resize`: libjpeg's fast DCT, bilinear to uint8), in parallel,
    batch, prefetch: no shuffle, no cache. A first epoch that decodes every image at full
    scale (both sides here: the bench's images are under twice 300 pixels, so libjpeg's
    reduced-scale decode does not apply) cannot be faster than this; over the codelab's
    epoch 1 it bounds `throughput_ratio`.
    """
    import tensorflow as tf
    import tensorflow_datasets  # noqa: F401

    from trainer import data

    split = data.load_split("tfds:cassava", "train", data_dir=data_dir, shuffle_files=True, seed=1)
    ds = split.encoded.map(
        lambda x, y: (data.decode_and_resize(x, image_size), y),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=False,
    )
    ds = ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)
    begin = time.perf_counter()
    count = sum(int(batch.shape[0]) for batch, _labels in ds)
    return {"ceiling_images_per_s": count / (time.perf_counter() - begin)}


def measure_replay_ceiling(batch_size: int, image_size: int) -> dict[str, Any]:
    """Child: `replay_batch_ceiling` in a process of its own (its batches in flight would
    otherwise raise a measured variant's peak RSS)."""
    return {"ceiling_images_per_s": replay_batch_ceiling(batch_size, image_size)}


def replay_batch_ceiling(batch_size: int, image_size: int, images: int = 2048) -> float:
    """Images/s of the steps a cached epoch cannot skip: batching uint8 images already in
    memory and prefetching the batches (the kit's pipeline after its cache hands the model
    uint8 batches; the model's first layer scales them), fed from one image in memory.
    Over the codelab's epoch-2 images/s it is about the best cached-epoch ratio any cache
    can give here (the kit's epoch 2 can beat it a little: its prefetch buffer fills with
    epoch-2 batches while epoch 1 ends, `repeat()` making one stream)."""
    import tensorflow as tf

    image = tf.zeros([image_size, image_size, 3], tf.uint8)
    label = tf.constant(0, tf.int64)
    ds = tf.data.Dataset.from_tensors((image, label)).repeat(images).batch(batch_size)
    ds = ds.prefetch(tf.data.AUTOTUNE)
    for _ in ds.take(2):  # warm-up: tracing, thread pools
        pass
    begin = time.perf_counter()
    count = sum(int(batch.shape[0]) for batch, _labels in ds)
    return count / (time.perf_counter() - begin)


def run(ctx: BenchContext) -> dict[str, Any]:
    """Every variant, interleaved run by run; medians, ratios and the targets."""
    started = time.perf_counter()
    batch_size = QUICK_BATCH_SIZE if ctx.quick else BATCH_SIZE
    repeats = ctx.repeats_for(DEFAULT_REPEATS)
    params = {
        "batch_size": batch_size,
        "image_size": IMAGE_SIZE,
        "epochs": EPOCHS,
        "train_images": ctx.train_images,
        "repeats": repeats,
        "baseline": "codelab/trainer/task.py create_dataset (300x300, shuffle(1000), batch)",
    }
    runs: list[dict[str, Any]] = []
    for repeat in range(repeats):
        for name, (target, extra, _is_extra) in VARIANTS.items():
            kwargs: dict[str, Any] = {"data_dir": str(ctx.tfds_data_dir), "batch_size": batch_size}
            if name != "codelab":
                kwargs["image_size"] = IMAGE_SIZE
            try:
                result = run_child(
                    target, {**kwargs, **extra}, env=codelab_env(ctx.tfds_data_dir), timeout=900
                )
            except BenchError as err:
                return section(f"error: {err}", params=params, runs=runs)
            result["rss_growth_mb"] = result["peak_rss_mb"] - result["baseline_rss_mb"]
            runs.append({"variant": name, "repeat": repeat, **result})
        ceilings = {
            DECODE_CEILING: (
                "bench.pipeline:measure_decode_ceiling",
                {"data_dir": str(ctx.tfds_data_dir)},
            ),
            REPLAY_CEILING: ("bench.pipeline:measure_replay_ceiling", {}),
        }
        for name, (target, extra) in ceilings.items():
            try:
                result = run_child(
                    target,
                    {"batch_size": batch_size, "image_size": IMAGE_SIZE, **extra},
                    env=codelab_env(ctx.tfds_data_dir),
                    timeout=300,
                )
            except BenchError as err:
                return section(f"error: {err}", params=params, runs=runs)
            runs.append({"variant": name, "repeat": repeat, **result})
    summary = summarize(runs)
    summary.update(rss_breakdown(summary, mean_jpeg_bytes(ctx.images_dir), ctx.train_images))
    return section(
        params=params,
        summary=summary,
        spreads=spreads(runs),
        checks=targets(summary),
        runs=runs,
        notes=notes(runs),
        wall_s=time.perf_counter() - started,
    )


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-variant medians, then the kit/codelab ratios computed from the medians."""
    summary: dict[str, Any] = {}
    for name in VARIANTS:
        mine = [r for r in runs if r["variant"] == name]
        if not mine:
            continue
        for key in FIGURES:
            if any(r.get(key) is not None for r in mine):
                summary[f"{name}.{key}"] = median([r.get(key) for r in mine])

    def kit_over_codelab(key: str, variant: str = "kit") -> float | None:
        return ratio(summary.get(f"{variant}.{key}"), summary.get(f"codelab.{key}"))

    summary["throughput_ratio"] = kit_over_codelab("epoch1_images_per_s")
    summary["peak_rss_ratio"] = kit_over_codelab("peak_rss_mb")
    summary["cached_epoch_ratio"] = kit_over_codelab("epoch2_images_per_s")
    summary["rss_growth_ratio"] = kit_over_codelab("rss_growth_mb")
    # The best ratios the work no epoch can skip allows here (see the two ceilings).
    for name, ratio_name, codelab_key in CEILING_RATIOS:
        ceiling = [r.get("ceiling_images_per_s") for r in runs if r["variant"] == name]
        if ceiling:
            summary[f"{name}.images_per_s"] = median(ceiling)
            summary[ratio_name] = ratio(
                summary[f"{name}.images_per_s"], summary.get(f"codelab.{codelab_key}")
            )
    for variant in ("kit_disk", "kit_nocache"):
        if f"{variant}.epoch1_images_per_s" in summary:
            summary[f"{variant}.throughput_ratio"] = kit_over_codelab(
                "epoch1_images_per_s", variant
            )
            summary[f"{variant}.peak_rss_ratio"] = kit_over_codelab("peak_rss_mb", variant)
            summary[f"{variant}.cached_epoch_ratio"] = kit_over_codelab(
                "epoch2_images_per_s", variant
            )
    return summary


# Ceiling run -> (its ratio's name, the codelab figure it is over).
CEILING_RATIOS = (
    (DECODE_CEILING, "throughput_ceiling_ratio", "epoch1_images_per_s"),
    (REPLAY_CEILING, "cached_epoch_ceiling_ratio", "epoch2_images_per_s"),
)

# Ratio figure -> (per-run figure, variant over the codelab), for the ratios' spreads.
RATIO_FIGURES = {
    "throughput_ratio": ("epoch1_images_per_s", "kit"),
    "peak_rss_ratio": ("peak_rss_mb", "kit"),
    "cached_epoch_ratio": ("epoch2_images_per_s", "kit"),
    "rss_growth_ratio": ("rss_growth_mb", "kit"),
    **{
        f"{variant}.{name}": (key, variant)
        for variant in ("kit_disk", "kit_nocache")
        for name, key in (
            ("throughput_ratio", "epoch1_images_per_s"),
            ("peak_rss_ratio", "peak_rss_mb"),
            ("cached_epoch_ratio", "epoch2_images_per_s"),
        )
    },
}


CODELAB_SHUFFLE = 1000  # the codelab's `shuffle(1000)`, of decoded 300x300 float32 images
KIT_SHUFFLE = 1000  # the trainer's default --shuffle-buffer, of encoded JPEGs before decoding
MIB = 2**20


def mean_jpeg_bytes(images_dir: Path) -> float | None:
    """Mean size of the training split's JPEG files (what the kit's first shuffle holds)."""
    sizes = [p.stat().st_size for p in (Path(images_dir) / "train").rglob("*.jpg")]
    return sum(sizes) / len(sizes) if sizes else None


def rss_breakdown(
    summary: dict[str, Any], jpeg_bytes: float | None, train_images: int
) -> dict[str, float | None]:
    """Where each variant's peak RSS goes: the TensorFlow import floor (measured: RSS after
    importing TensorFlow and TFDS, before the pipeline), its shuffle buffer and its cache
    (computed from their sizes), and the rest (decode buffers, parallel-map and prefetch
    buffers, allocator slack: peak - the three). ``rss_growth_ratio`` is kit / codelab over
    what the pipeline controls (peak - import floor).

    The kit's second shuffle (after the cache) holds references to the memory cache's
    tensors; after a disk cache it holds 1,000 freshly read uint8 images.
    """
    from trainer.data import cache_bytes

    image_uint8 = IMAGE_SIZE * IMAGE_SIZE * 3
    encoded = (jpeg_bytes or 0.0) * min(KIT_SHUFFLE, train_images)
    shuffle = {
        "codelab": min(CODELAB_SHUFFLE, train_images) * image_uint8 * 4,
        "kit": encoded,
        "kit_disk": encoded + min(KIT_SHUFFLE, train_images) * image_uint8,
        "kit_nocache": encoded,
    }
    cache = {"codelab": 0, "kit": cache_bytes(train_images, IMAGE_SIZE), "kit_disk": 0}
    cache["kit_nocache"] = 0
    result: dict[str, float | None] = {}
    for variant in VARIANTS:
        peak = summary.get(f"{variant}.peak_rss_mb")
        if peak is None:
            continue
        floor = summary.get(f"{variant}.baseline_rss_mb")
        shuffle_mb, cache_mb = shuffle[variant] / MIB, cache[variant] / MIB
        result[f"{variant}.rss.import_floor_mb"] = floor
        result[f"{variant}.rss.shuffle_buffer_mb"] = shuffle_mb
        result[f"{variant}.rss.cache_mb"] = cache_mb
        result[f"{variant}.rss.decode_prefetch_other_mb"] = (
            None if floor is None else peak - floor - shuffle_mb - cache_mb
        )
    return result


def spreads(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Min/max/n of every summary figure: a variant's figure over its runs; a ratio over the
    ratios of the runs taken side by side (repeat r of the variant / repeat r of the codelab)."""
    result: dict[str, dict[str, Any]] = {}
    for name in VARIANTS:
        mine = [r for r in runs if r["variant"] == name]
        if mine:
            for key in FIGURES:
                if any(r.get(key) is not None for r in mine):
                    result[f"{name}.{key}"] = spread([r.get(key) for r in mine])
    by_repeat = {(r["variant"], r.get("repeat")): r for r in runs}
    for figure, (key, variant) in RATIO_FIGURES.items():
        pairs = [
            ratio(run.get(key), by_repeat.get(("codelab", repeat), {}).get(key))
            for (name, repeat), run in by_repeat.items()
            if name == variant
        ]
        if pairs:
            result[figure] = spread(pairs)
    for name, ratio_name, codelab_key in CEILING_RATIOS:
        ceiling = [r for r in runs if r["variant"] == name]
        if ceiling:
            result[f"{name}.images_per_s"] = spread(
                [r.get("ceiling_images_per_s") for r in ceiling]
            )
            result[ratio_name] = spread(
                [
                    ratio(r.get("ceiling_images_per_s"), codelab.get(codelab_key))
                    for r in ceiling
                    if (codelab := by_repeat.get(("codelab", r.get("repeat")))) is not None
                ]
            )
    return result


def _at_least(value: float | None, target: float) -> bool | None:
    return None if value is None else value >= target


def _at_most(value: float | None, target: float) -> bool | None:
    return None if value is None else value <= target


def targets(summary: dict[str, Any]) -> list[dict[str, Any]]:
    throughput = summary.get("throughput_ratio")
    peak = summary.get("peak_rss_ratio")
    cached = summary.get("cached_epoch_ratio")
    return [
        check(
            "pipeline.throughput_ratio",
            throughput,
            f">= {TARGET_THROUGHPUT_RATIO} (images/s over epoch 1, kit / codelab)",
            _at_least(throughput, TARGET_THROUGHPUT_RATIO),
        ),
        check(
            "pipeline.peak_rss_ratio",
            peak,
            f"<= {TARGET_PEAK_RSS_RATIO} (peak RSS of each process, kit / codelab)",
            _at_most(peak, TARGET_PEAK_RSS_RATIO),
        ),
        check(
            "pipeline.cached_epoch_ratio",
            cached,
            f">= {TARGET_CACHED_EPOCH_RATIO:g} (images/s over epoch 2: kit's cache / codelab)",
            _at_least(cached, TARGET_CACHED_EPOCH_RATIO),
        ),
    ]


def notes(runs: list[dict[str, Any]]) -> list[str]:
    """Which cache the kit used, and what the measured set does not show."""
    from labkit.course.sample import REAL_SPLIT_SIZES
    from trainer.data import cache_bytes, cache_memory_budget, cache_mode

    used = sorted({f"{r['variant']}: {r['cache_mode']}" for r in runs if "cache_mode" in r})
    budget_mib = cache_memory_budget() / 2**20
    real_train = REAL_SPLIT_SIZES["train"]
    real_mib = cache_bytes(real_train, IMAGE_SIZE) / 2**20
    return [
        f"cache used: {', '.join(used) or '-'} (`--cache auto` keeps up to "
        f"{budget_mib:.0f} MiB of uint8 images in memory here, 1/8 of the memory, else a "
        "temporary file whose pages the OS may keep in its page cache, outside the process's RSS)",
        f"On the real train split ({real_train} images) `--cache auto` uses "
        f"{cache_mode('auto', real_train, IMAGE_SIZE)}: {real_mib:.0f} MiB of uint8 300x300 "
        "images; the codelab's shuffle buffer stays at 1,000 float32 images (~1030 MiB) "
        "whatever the size.",
    ]
