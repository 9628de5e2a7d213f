"""Training: the codelab's dataset + model against the kit's, taking steps in turn in one process.

Both sides train the same ResNet50 + Dense(1016) head with Adam(1e-4) on the same JPEGs,
with random initial weights (no machine here reaches the ImageNet weights). They share one
process, which ``TF_USE_LEGACY_KERAS=1`` makes possible: the codelab's `tf.keras` is then the
same tf-keras the kit imports. After warming up, the two take training steps in turn
(codelab, kit, codelab, ...), so whatever else loads the machine slows both alike; on a
shared 2-core machine, step times of separate runs minutes apart moved threefold, which
no number of separate runs would have averaged out. Two CPU cores cannot train 300x300
ResNet50 in a benchmark's budget, so this runs smaller images; 300x300 is `bench.gpu`'s job.

Figures (medians over the runs; each run is one process):
- ``images_per_s``: batch / median step time, a step being the next batch from the side's
  own pipeline plus `train_on_batch` (the step `fit` runs), over the alternating steps;
- ``speed_ratio_vs_codelab``: kit / codelab images/s, taken within each run;
- ``ready_s``: building the dataset and the model and taking the warm-up steps (graph
  tracing, and for the codelab filling its 1,000-image shuffle buffer); the sides are
  built one after the other, in swapped order from one run to the next;
- ``peak_rss_mb``: the process's high-water mark, both sides together.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench.measure import BenchContext, BenchError, check, median, run_child, section

FULL = {"image_size": 96, "batch_size": 16, "warmup_steps": 2, "steps": 8}
QUICK = {"image_size": 32, "batch_size": 4, "warmup_steps": 1, "steps": 3}
# The kit's steady-state training speed must not fall behind the codelab's (5% for noise).
TARGET_MIN_SPEED_RATIO = 0.95
DEFAULT_REPEATS = 2
SIDES = ("codelab", "kit")
CHILD_ENV = {"TF_USE_LEGACY_KERAS": "1"}


@dataclasses.dataclass
class Side:
    """One side's model and the pipeline it draws batches from."""

    model: Any
    dataset: Any
    iterator: Any = None

    def __post_init__(self) -> None:
        self.iterator = iter(self.dataset)

    def step(self) -> float:
        """Seconds for one training step, including the wait for its batch."""
        begin = time.perf_counter()
        try:
            images, labels = next(self.iterator)
        except StopIteration:  # the codelab's dataset is finite: a new pass, as `fit` would
            self.iterator = iter(self.dataset)
            images, labels = next(self.iterator)
        self.model.train_on_batch(images, labels)
        return time.perf_counter() - begin


def build_codelab(data_dir: str, image_size: int, batch_size: int) -> Side:
    from bench import codelab

    dataset, classes = codelab.create_dataset(batch_size, data_dir=data_dir, image_size=image_size)
    return Side(codelab.create_model(classes, weights=None), dataset)


def build_kit(data_dir: str, image_size: int, batch_size: int) -> Side:
    from trainer import data
    from trainer import model as model_lib

    split = data.load_split("tfds:cassava", "train", data_dir=data_dir, shuffle_files=True, seed=1)
    dataset = data.make_pipeline(
        split, global_batch=batch_size, image_size=image_size, training=True, seed=1
    )
    model, _base = model_lib.build_model(
        len(split.class_names), image_size=image_size, weights="none"
    )
    model_lib.compile_model(model, 1e-4, jit_compile=False)
    return Side(model, dataset)


BUILDERS: dict[str, Callable[[str, int, int], Side]] = {
    "codelab": build_codelab,
    "kit": build_kit,
}


def train_side_by_side(
    data_dir: str,
    image_size: int,
    batch_size: int,
    warmup_steps: int,
    steps: int,
    codelab_first: bool = True,
) -> dict[str, Any]:
    """Child (needs TF_USE_LEGACY_KERAS=1): build both sides, warm up, then alternate steps."""
    import tensorflow as tf
    import tf_keras as keras

    if tf.keras.Model is not keras.Model:
        raise RuntimeError(
            "the codelab's tf.keras is not tf-keras here: set TF_USE_LEGACY_KERAS=1 before "
            "TensorFlow is imported (bench.training runs its child that way)"
        )
    keras.utils.set_random_seed(1)
    order = list(SIDES) if codelab_first else list(reversed(SIDES))
    sides: dict[str, Side] = {}
    result: dict[str, Any] = {"order": order}
    for name in order:
        begin = time.perf_counter()
        sides[name] = BUILDERS[name](data_dir, image_size, batch_size)
        for _ in range(warmup_steps):
            sides[name].step()
        result[f"{name}.ready_s"] = time.perf_counter() - begin
    step_s: dict[str, list[float]] = {name: [] for name in order}
    for _ in range(steps):
        for name in order:
            step_s[name].append(sides[name].step())
    for name in order:
        result[f"{name}.step_s"] = step_s[name]
        result[f"{name}.images_per_s"] = batch_size / statistics.median(step_s[name])
    result["speed_ratio_vs_codelab"] = result["kit.images_per_s"] / result["codelab.images_per_s"]
    return result


def run(ctx: BenchContext) -> dict[str, Any]:
    """`DEFAULT_REPEATS` side-by-side processes (2: each builds two ResNet50s, and its
    figures are already medians over its steps), build order swapped between them."""
    started = time.perf_counter()
    sizes = dict(QUICK if ctx.quick else FULL)
    repeats = ctx.repeats_for(DEFAULT_REPEATS)
    params: dict[str, Any] = {**sizes, "repeats": repeats}
    runs: list[dict[str, Any]] = []
    for repeat in range(repeats):
        kwargs = {"data_dir": str(ctx.tfds_data_dir), **sizes, "codelab_first": repeat % 2 == 0}
        try:
            result = run_child("bench.training:train_side_by_side", kwargs, env=CHILD_ENV)
        except BenchError as err:
            return section(f"error: {err}", params=params, runs=runs)
        runs.append({"repeat": repeat, **result})
    summary: dict[str, float | None] = {}
    for name in SIDES:
        for key in ("images_per_s", "ready_s"):
            summary[f"{name}.{key}"] = median([r[f"{name}.{key}"] for r in runs])
    speed = median([r["speed_ratio_vs_codelab"] for r in runs])
    summary["kit.speed_ratio_vs_codelab"] = speed
    summary["peak_rss_mb"] = median([r["peak_rss_mb"] for r in runs])
    checks = [
        check(
            "training.kit.speed_ratio_vs_codelab",
            speed,
            f">= {TARGET_MIN_SPEED_RATIO} (images/s, kit / codelab, steps in turn)",
            None if speed is None else speed >= TARGET_MIN_SPEED_RATIO,
        )
    ]
    notes = [
        f"CPU-sized: {sizes['image_size']}x{sizes['image_size']}, batch {sizes['batch_size']}, "
        f"{sizes['warmup_steps']} warm-up + {sizes['steps']} timed steps per side, random "
        "weights; on CPU the model sets the step time, so equal speed is the expectation."
    ]
    return section(
        params=params,
        summary=summary,
        checks=checks,
        runs=runs,
        notes=notes,
        wall_s=time.perf_counter() - started,
    )
