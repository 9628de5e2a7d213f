"""Looking at the data the way notebook 01 does: counts per class, examples, image sizes.

Everything reads through `trainer.data.load_split`, the trainer's own loader, so what a
learner sees is what the trainer trains on. This module imports TensorFlow (through
`trainer.data`): notebooks import it after their settings load quieted TensorFlow's logs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from labkit.course.results import record
from trainer import data


def class_counts(
    knobs: Mapping[str, Any], splits: Sequence[str], run_dir: str | Path | None = None
) -> dict[str, list[int]]:
    """Images per class in each split, read from labels only (no image is decoded).

    With ``run_dir``, the splits' sizes, class names and counts are recorded as this run's
    ``data`` (notebook 01's result).
    """
    counts: dict[str, list[int]] = {}
    class_names: list[str] = []
    for split in splits:
        loaded = data.load_split(knobs["data"], split, data_dir=knobs.get("data_dir"))
        class_names = list(loaded.class_names)
        per_class = [0] * len(loaded.class_names)
        for label in loaded.encoded.map(lambda _, y: y).as_numpy_iterator():
            per_class[int(label)] += 1
        counts[split] = per_class
    if run_dir is not None:
        record(
            run_dir,
            "data",
            {
                "splits": {split: sum(c) for split, c in counts.items()},
                "class_names": class_names,
                "counts": counts,
            },
        )
    return counts


def encoded_examples(
    knobs: Mapping[str, Any], split: str, count: int, *, per_class: bool = False
) -> tuple[list[bytes], list[int], list[str]]:
    """The first ``count`` encoded images of a split (or ``count`` of each class), their
    labels and the class names; deterministic, so reruns show the same pictures."""
    loaded = data.load_split(knobs["data"], split, data_dir=knobs.get("data_dir"))
    wanted = count * len(loaded.class_names) if per_class else count
    taken: dict[int, int] = {}
    encoded: list[bytes] = []
    labels: list[int] = []
    for image, label in loaded.encoded.as_numpy_iterator():
        label = int(label)
        if per_class and taken.get(label, 0) >= count:
            continue
        taken[label] = taken.get(label, 0) + 1
        encoded.append(bytes(image))
        labels.append(label)
        if len(encoded) >= wanted:
            break
    return encoded, labels, loaded.class_names


def decode(encoded: Sequence[bytes]) -> list[np.ndarray]:
    """JPEG/PNG bytes -> uint8 arrays at their original sizes."""
    return [tf.io.decode_image(b, channels=3, expand_animations=False).numpy() for b in encoded]


def resized(images: Sequence[np.ndarray], size: int) -> list[np.ndarray]:
    """Images resized to size x size exactly as the trainer does (`trainer.data`)."""
    return [data.decode_and_resize(tf.io.encode_png(img), size).numpy() for img in images]


def image_sizes(knobs: Mapping[str, Any], split: str, limit: int = 300) -> list[tuple[int, int]]:
    """(height, width) of up to ``limit`` images, read from the JPEG headers."""
    loaded = data.load_split(knobs["data"], split, data_dir=knobs.get("data_dir"))
    sizes = []
    for image, _ in loaded.encoded.take(limit):
        if tf.io.is_jpeg(image):
            shape = tf.image.extract_jpeg_shape(image)
        else:
            shape = tf.shape(tf.io.decode_image(image, channels=3, expand_animations=False))
        sizes.append((int(shape[0]), int(shape[1])))
    return sizes
