"""Input data: TFDS `cassava` (or a folder in the cassava zip's layout) into a tf.data pipeline.

Differences from the codelab's pipeline, each measured in `bench/`:
- shuffle *encoded* JPEG bytes before decoding (the codelab shuffles 1,000 decoded 300x300
  float32 images: about 1 GB of buffer);
- decode and resize in parallel to uint8, cache that when it fits, and scale to [0, 1]
  per batch instead of per image;
- non-deterministic element order while training; prefetch.
Sharding is set explicitly to `AutoShardPolicy.DATA` as the codelab teaches: cassava is
one or a few files, so sharding by file would leave workers without data.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import tensorflow as tf

from trainer.config import ConfigError

AUTOTUNE = tf.data.AUTOTUNE
SPLITS = ("train", "validation", "test")
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")
CACHE_LIMIT_BYTES = 2 * 1024**3


@dataclasses.dataclass
class SplitData:
    """One split as encoded images with integer labels, before decoding."""

    encoded: tf.data.Dataset  # elements: (encoded image bytes, int64 label)
    num_examples: int
    class_names: list[str]


def parse_source(data: str) -> tuple[str, str]:
    """``tfds:NAME`` -> ("tfds", NAME); an existing folder -> ("folder", path); else an error."""
    if data.startswith("tfds:"):
        name = data.split(":", 1)[1]
        if not name:
            raise ConfigError("--data tfds: needs a dataset name, e.g. tfds:cassava")
        return "tfds", name
    if data.startswith("gs://") or os.path.isdir(data):
        return "folder", data
    raise ConfigError(
        f"unknown data source {data!r}: use tfds:cassava (TensorFlow Datasets) or the path of a "
        "folder laid out as SPLIT/CLASS/*.jpg (the cassava zip's cassavaleafdata/ folder)"
    )


def load_split(
    data: str,
    split: str,
    *,
    data_dir: str | None = None,
    try_gcs: bool = False,
    shuffle_files: bool = False,
    seed: int | None = None,
) -> SplitData:
    """Encoded images and labels of one split, from TFDS or a folder."""
    kind, where = parse_source(data)
    if kind == "tfds":
        return _load_tfds_split(where, split, data_dir, try_gcs, shuffle_files, seed)
    return _load_folder_split(where, split)


def available_splits(data: str, *, data_dir: str | None = None, try_gcs: bool = False) -> list[str]:
    """The splits a source has (TFDS info, or the split folders present)."""
    kind, where = parse_source(data)
    if kind == "tfds":
        return list(_tfds_builder(where, data_dir, try_gcs).info.splits.keys())
    root = _folder_root(where)
    return [s for s in SPLITS if tf.io.gfile.isdir(f"{root}/{s}")] or ["train"]


def _tfds_builder(name: str, data_dir: str | None, try_gcs: bool) -> Any:
    import tensorflow_datasets as tfds

    try:
        builder = tfds.builder(name, data_dir=data_dir, try_gcs=try_gcs)
    except tfds.core.registered.DatasetNotFoundError:
        raise ConfigError(
            f"unknown data source tfds:{name}: TensorFlow Datasets has no dataset of that name "
            "(the lab uses tfds:cassava)"
        ) from None
    if not builder.is_prepared():
        try:
            builder.download_and_prepare()
        except Exception as err:  # offline machines end here: say what to do instead
            where = data_dir or "the default TFDS data dir"
            raise ConfigError(
                f"TFDS dataset {name!r} is not prepared in {where} and could not be downloaded "
                f"({type(err).__name__}: {str(err)[:200]}). Offline, generate the sample with "
                "`python -m labkit sample` and pass --data-dir with the TFDS dir it prints."
            ) from None
    return builder


def _load_tfds_split(
    name: str,
    split: str,
    data_dir: str | None,
    try_gcs: bool,
    shuffle_files: bool,
    seed: int | None,
) -> SplitData:
    import tensorflow_datasets as tfds

    builder = _tfds_builder(name, data_dir, try_gcs)
    if split not in builder.info.splits:
        raise ConfigError(f"tfds:{name} has no split {split!r}; it has {list(builder.info.splits)}")
    ds = builder.as_dataset(
        split=split,
        as_supervised=True,
        shuffle_files=shuffle_files,
        decoders={"image": tfds.decode.SkipDecoding()},
        read_config=tfds.ReadConfig(shuffle_seed=seed),
    )
    label_feature = builder.info.features["label"]
    return SplitData(ds, builder.info.splits[split].num_examples, list(label_feature.names))


def _folder_root(path: str) -> str:
    """Accept the zip's top folder or `cassavaleafdata/` itself."""
    inner = f"{path.rstrip('/')}/cassavaleafdata"
    return inner if tf.io.gfile.isdir(inner) else path.rstrip("/")


def list_folder_split(path: str, split: str) -> tuple[list[str], list[int], list[str]]:
    """File paths, labels and class names of a split folder (class = sub-folder name, sorted)."""
    root = _folder_root(path)
    split_dir = f"{root}/{split}"
    if not tf.io.gfile.isdir(split_dir):
        if split == "train" and not any(tf.io.gfile.isdir(f"{root}/{s}") for s in SPLITS):
            split_dir = root  # a plain folder of class sub-folders is the training split
        else:
            raise ConfigError(
                f"{root} has no {split!r} split folder (expected {root}/{split}/CLASS/*.jpg)"
            )
    classes = sorted(
        d.rstrip("/")
        for d in tf.io.gfile.listdir(split_dir)
        if tf.io.gfile.isdir(f"{split_dir}/{d}")
    )
    if not classes:
        raise ConfigError(
            f"{split_dir} has no class sub-folders: lay images out as {split_dir}/CLASS/*.jpg, "
            "one sub-folder per class (cbb, cbsd, cgm, cmd, healthy for cassava)"
        )
    files: list[str] = []
    labels: list[int] = []
    for index, name in enumerate(classes):
        for entry in sorted(tf.io.gfile.listdir(f"{split_dir}/{name}")):
            if entry.lower().endswith(IMAGE_EXTENSIONS):
                files.append(f"{split_dir}/{name}/{entry}")
                labels.append(index)
    if not files:
        raise ConfigError(f"{split_dir}/CLASS/ folders hold no .jpg, .jpeg or .png images")
    return files, labels, classes


def find_corrupt_images(files: list[str]) -> list[str]:
    """Files that do not decode as images (checked in parallel with tf.data, once per run)."""
    paths = tf.data.Dataset.from_tensor_slices(files)
    decoded = paths.map(
        lambda p: (
            p,
            tf.shape(tf.io.decode_image(tf.io.read_file(p), channels=3, expand_animations=False)),
        ),
        num_parallel_calls=AUTOTUNE,
    ).ignore_errors()
    good = {p.decode() for p, _ in decoded.as_numpy_iterator()}
    return [f for f in files if f not in good]


def _load_folder_split(path: str, split: str) -> SplitData:
    files, labels, classes = list_folder_split(path, split)
    corrupt = find_corrupt_images(files)
    if corrupt:
        shown = ", ".join(corrupt[:5]) + (
            f" and {len(corrupt) - 5} more" if len(corrupt) > 5 else ""
        )
        raise ConfigError(
            f"corrupt image file(s) that do not decode: {shown}. Remove or replace them."
        )
    ds = tf.data.Dataset.from_tensor_slices((files, tf.constant(labels, tf.int64)))
    ds = ds.map(lambda f, y: (tf.io.read_file(f), y), num_parallel_calls=AUTOTUNE)
    return SplitData(ds, len(files), classes)


def decode_and_resize(encoded: tf.Tensor, image_size: int) -> tf.Tensor:
    """JPEG/PNG bytes -> image_size x image_size x 3 uint8 (4x smaller than float32 to buffer)."""
    image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
    image = tf.image.resize(image, (image_size, image_size))
    return tf.cast(tf.clip_by_value(tf.round(image), 0.0, 255.0), tf.uint8)


def scale_batch(images: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """uint8 [0, 255] -> float32 [0, 1], once per batch (the codelab's `/ 255.`)."""
    return tf.cast(images, tf.float32) / 255.0, labels


def should_cache(cache: str, num_examples: int, image_size: int) -> bool:
    """`auto` caches the resized uint8 images when they fit in CACHE_LIMIT_BYTES."""
    if cache in ("on", "off"):
        return cache == "on"
    return num_examples * image_size * image_size * 3 <= CACHE_LIMIT_BYTES


def make_pipeline(
    split: SplitData,
    *,
    global_batch: int,
    image_size: int,
    training: bool,
    shuffle_buffer: int = 1000,
    cache: str = "auto",
    seed: int | None = None,
    repeat: bool | None = None,
) -> tf.data.Dataset:
    """Batches of (float32 images in [0, 1], int64 labels), sharded by DATA across workers."""
    ds = split.encoded
    buffer = max(1, min(shuffle_buffer, split.num_examples))
    if training:
        ds = ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
    ds = ds.map(
        lambda x, y: (decode_and_resize(x, image_size), y),
        num_parallel_calls=AUTOTUNE,
        deterministic=not training,
    )
    if should_cache(cache, split.num_examples, image_size):
        ds = ds.cache()
        if training:  # a cache replays one order: shuffle the small uint8 images again
            ds = ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
    if training if repeat is None else repeat:
        ds = ds.repeat()
    ds = ds.batch(global_batch)
    ds = ds.map(scale_batch, num_parallel_calls=AUTOTUNE)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    options.deterministic = not training
    return ds.with_options(options).prefetch(AUTOTUNE)
