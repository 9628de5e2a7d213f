"""Input data: TFDS `cassava` (or a folder in the cassava zip's layout) into a tf.data pipeline.

Differences from the codelab's pipeline, each measured in `bench/`:
- shuffle *encoded* JPEG bytes before decoding (the codelab shuffles 1,000 decoded 300x300
  float32 images: about 1 GB of buffer);
- decode and resize in parallel to uint8; a JPEG much larger than the target size is
  decoded at 1/2, 1/4 or 1/8 scale by libjpeg (never below the target size), which skips
  most of the decoding work at 64x64 or 128x128;
- cache the resized uint8 images (`--cache`: in memory when they fit a small budget, else
  in a private temporary file for the training split) and hand the model uint8 batches:
  its first layer scales them to [0, 1] (`trainer.model.pixel_scaling`), so a batch in
  flight is 1 byte a pixel, not float32's 4, and on a GPU the conversion runs there;
- non-deterministic element order while training; prefetch.
Sharding is set explicitly to `AutoShardPolicy.DATA` as the codelab teaches: cassava is
one or a few files, so sharding by file would leave workers without data.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import fcntl
import os
import shutil
import socket
import tempfile
import uuid
from typing import Any
from urllib.parse import urlparse

import tensorflow as tf

from trainer.config import BAD_IMAGE_CHOICES, CACHE_ALIASES, CACHE_CHOICES, ConfigError

AUTOTUNE = tf.data.AUTOTUNE
SPLITS = ("train", "validation", "test")
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")

# `--cache` (options in trainer.config): where the resized uint8 images are kept after epoch 1.
# `auto` keeps the cache in memory up to 1/8 of the memory of the machine (or of the
# container, when a cgroup limits it), at least 256 MiB: each worker also holds the model,
# its optimizer state and the batches in flight, and two local workers cache twice. Larger
# caches go to a private temporary file, which the OS keeps in its page cache when it has
# room, outside the process's RSS. The 300x300 uint8 images take 525 MiB for the bench's
# 2,036 images and 1.4 GiB for the real train split. Measured in bench/ (2 cores, 23 GiB,
# bench/results/latest.json, medians of 3): for 525 MiB, the memory cache peaked at 0.33x
# the codelab's RSS (1.61 vs 4.94 GB) and the disk cache at 0.34x (the shuffle after it holds
# 1,000 freshly read images), with a slower first epoch (writing); bench/README.md has why.
CACHE_MEMORY_SHARE = 8
CACHE_MEMORY_FLOOR_BYTES = 256 * 2**20
CACHE_DIR_PREFIX = "trainer-cache-"
JPEG_SCALE_RATIOS = (1, 2, 4, 8)  # what libjpeg can decode at (DCT scaling)
# libjpeg's inverse DCT: "INTEGER_FAST" is the faster one TensorFlow's own ImageNet
# preprocessing uses; "" keeps libjpeg's default (what TFDS and the codelab decode with).
JPEG_DCT_METHOD = "INTEGER_FAST"
# Offline, `download_and_prepare` retried for about 3.5 minutes before failing; one TCP
# connection to TFDS's download host with this timeout says the same in seconds.
DOWNLOAD_PROBE_TIMEOUT_S = 5.0


def cassava_download_url() -> str:
    """Where TFDS itself downloads cassava from: its builder module's constant, not a copy."""
    from tensorflow_datasets.image_classification import cassava

    return cassava._BASE_URL


@dataclasses.dataclass
class SplitData:
    """One split as encoded images with integer labels, before decoding."""

    encoded: tf.data.Dataset  # elements: (encoded image bytes, int64 label)
    num_examples: int
    class_names: list[str]
    skipped: list[str] = dataclasses.field(default_factory=list)  # records that do not decode


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
    bad_images: str | None = None,
) -> SplitData:
    """Encoded images and labels of one split, from TFDS or a folder.

    ``bad_images`` (the trainer passes `--bad-images`, default "fail"): every image is
    decoded once first (`find_bad_images`, about 1 ms an image); with "fail" a record that
    does not decode stops the run here, named, before any training; with "skip" it is left
    out and listed in `SplitData.skipped`. None checks nothing (a caller that trusts the
    data, or a benchmark that times the pipeline alone).
    """
    if bad_images is not None and bad_images not in BAD_IMAGE_CHOICES:
        raise ConfigError(f"--bad-images must be one of {', '.join(BAD_IMAGE_CHOICES)}")
    kind, where = parse_source(data)
    if kind == "tfds":
        named, num, classes = _load_tfds_split(where, split, data_dir, try_gcs, shuffle_files, seed)
    else:
        named, num, classes = _load_folder_split(where, split)
    bad = find_bad_images(named, num) if bad_images else []
    if bad and bad_images == "fail":
        raise ConfigError(bad_images_message(data, split, bad))
    if bad:
        named = named.filter(lambda name, x, y: tf.reduce_all(tf.not_equal(name, bad)))
    encoded = named.map(lambda name, x, y: (x, y), num_parallel_calls=AUTOTUNE)
    return SplitData(encoded, num - len(bad), classes, skipped=bad)


def bad_images_message(data: str, split: str, bad: list[str]) -> str:
    """The error for records that do not decode: which, and the two ways on."""
    shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
    return (
        f"{len(bad)} image(s) in the {split!r} split of {data} do not decode: {shown}. Remove or "
        "replace them (re-prepare the TFDS data), or pass --bad-images skip to train without them."
    )


def find_bad_images(named: tf.data.Dataset, expected: int | None = None) -> list[str]:
    """Names of the records whose image does not decode, checked in parallel, once.

    ``named`` yields (name, encoded image, label). The check decodes with the training
    pipeline's own decoder at the smallest size (a JPEG at 1/8 scale, about 1 ms each on
    2 cores), so what passes here decodes in training. When all ``expected`` records
    decode, the names are not read a second time.
    """
    decoded = named.map(
        lambda name, x, y: (name, tf.shape(decode_image_uint8(x, 32))),
        num_parallel_calls=AUTOTUNE,
    ).ignore_errors()
    good = {name for name, _ in decoded.as_numpy_iterator()}
    if expected is not None and len(good) >= expected:
        return []
    every = named.map(lambda name, x, y: name).as_numpy_iterator()
    return [name.decode() for name in every if name not in good]


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
        _check_download_reachable(name, data_dir, try_gcs)
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


def _check_download_reachable(name: str, data_dir: str | None, try_gcs: bool) -> None:
    """Fail in seconds, creating nothing, when the data is not prepared and cannot be fetched."""
    url = urlparse(cassava_download_url())
    host = url.hostname or ""
    try:
        socket.create_connection((host, url.port or 443), DOWNLOAD_PROBE_TIMEOUT_S).close()
    except OSError as err:
        where = data_dir or "the default TFDS data dir (~/tensorflow_datasets or $TFDS_DATA_DIR)"
        raise ConfigError(
            f"TFDS dataset {name!r} is not prepared in {where}, and this machine cannot reach "
            f"{host} to download it ({type(err).__name__}: {err}). Pass --data-dir with a TFDS "
            "dir that holds a prepared cassava/ (offline: `python -m labkit sample` prepares "
            "a sample and prints its TFDS dir), or run where the download is reachable."
            + ("" if try_gcs else " Nothing was created.")
        ) from None


def _load_tfds_split(
    name: str,
    split: str,
    data_dir: str | None,
    try_gcs: bool,
    shuffle_files: bool,
    seed: int | None,
) -> tuple[tf.data.Dataset, int, list[str]]:
    """(name, encoded image, label) records of a TFDS split, its size and its class names."""
    import tensorflow_datasets as tfds

    builder = _tfds_builder(name, data_dir, try_gcs)
    if split not in builder.info.splits:
        raise ConfigError(f"tfds:{name} has no split {split!r}; it has {list(builder.info.splits)}")
    ds = builder.as_dataset(
        split=split,
        shuffle_files=shuffle_files,
        decoders={"image": tfds.decode.SkipDecoding()},
        read_config=tfds.ReadConfig(shuffle_seed=seed),
    )
    features = builder.info.features
    has_names = "image/filename" in features
    named = ds.map(
        lambda r: (r["image/filename"] if has_names else tf.constant(""), r["image"], r["label"]),
        num_parallel_calls=AUTOTUNE,
    )
    return named, builder.info.splits[split].num_examples, list(features["label"].names)


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


def _load_folder_split(path: str, split: str) -> tuple[tf.data.Dataset, int, list[str]]:
    """(path, encoded image, label) records of a split folder, its size and its classes."""
    files, labels, classes = list_folder_split(path, split)
    ds = tf.data.Dataset.from_tensor_slices((files, tf.constant(labels, tf.int64)))
    ds = ds.map(lambda f, y: (f, tf.io.read_file(f), y), num_parallel_calls=AUTOTUNE)
    return ds, len(files), classes


def jpeg_scale_index(shape: tf.Tensor, image_size: int) -> tf.Tensor:
    """Index into JPEG_SCALE_RATIOS of the largest ratio that keeps both sides >= image_size.

    libjpeg decodes at 1/r scale to ceil(side / r) pixels, averaging in the DCT domain (much
    like an anti-aliased resize) at a fraction of the work; staying at or above the target
    size keeps all the detail the target size can hold.
    """
    short = tf.minimum(shape[0], shape[1])
    fits = [tf.cast((short + r - 1) // r >= image_size, tf.int32) for r in JPEG_SCALE_RATIOS[1:]]
    return tf.add_n(fits)  # the ratios are nested: 8 fits only if 4 and 2 fit


def decode_image_uint8(encoded: tf.Tensor, image_size: int) -> tf.Tensor:
    """JPEG (at the smallest libjpeg scale still >= image_size) or PNG/GIF/BMP -> HxWx3 uint8."""

    def jpeg() -> tf.Tensor:
        branches = [
            lambda r=r: tf.io.decode_jpeg(encoded, channels=3, ratio=r, dct_method=JPEG_DCT_METHOD)
            for r in JPEG_SCALE_RATIOS
        ]
        index = jpeg_scale_index(tf.image.extract_jpeg_shape(encoded), image_size)
        return tf.switch_case(index, branches)

    def other() -> tf.Tensor:
        return tf.io.decode_image(encoded, channels=3, expand_animations=False)

    image = tf.cond(tf.io.is_jpeg(encoded), jpeg, other)
    image.set_shape([None, None, 3])
    return image


def resize_uint8(images: tf.Tensor, image_size: int) -> tf.Tensor:
    """uint8 image(s) of any size -> image_size x image_size uint8, bilinear, rounded.

    Training and the serving signatures (`trainer.export`) both resize through here, so a
    served picture reaches the model exactly as a training picture did.
    """
    resized = tf.image.resize(images, (image_size, image_size))
    # Bilinear weights are a convex combination of uint8 pixels, so the result is already in
    # [0, 255]: adding 0.5 and truncating rounds to nearest without clipping.
    return tf.cast(resized + 0.5, tf.uint8)


def decode_and_resize(encoded: tf.Tensor, image_size: int) -> tf.Tensor:
    """JPEG/PNG bytes -> image_size x image_size x 3 uint8 (4x smaller than float32 to buffer)."""
    return resize_uint8(decode_image_uint8(encoded, image_size), image_size)


def cache_bytes(num_examples: int, image_size: int) -> int:
    """Size of the cache: every resized uint8 image of the split."""
    return num_examples * image_size * image_size * 3


def memory_limit_bytes() -> int | None:
    """The machine's physical memory, or the cgroup's limit when lower (None: unknown)."""
    limits = []
    with contextlib.suppress(ValueError, OSError):
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as handle:
                text = handle.read().strip()
        except OSError:
            continue
        if text.isdigit():
            limits.append(int(text))
    limits = [n for n in limits if n > 0]
    return min(limits) if limits else None


def cache_memory_budget() -> int:
    """Bytes `--cache auto` may keep in memory: 1/8 of the memory limit, at least 256 MiB."""
    limit = memory_limit_bytes()
    return max(CACHE_MEMORY_FLOOR_BYTES, limit // CACHE_MEMORY_SHARE if limit else 0)


def cache_mode(
    cache: str,
    num_examples: int,
    image_size: int,
    training: bool = True,
    memory_budget: int | None = None,
) -> str:
    """`--cache` for one split -> "memory", "disk" or "off".

    auto: memory when the uint8 images fit ``memory_budget`` (default
    `cache_memory_budget()`), else disk for the training split and no cache for an
    evaluation split. An evaluation split never uses the disk cache: its reader may stop
    part-way (`validation_steps`), and a file cache whose writer is still alive makes the
    next iterator over it fail ("cache lockfile already exists",
    tensorflow/tensorflow#18266); it uses memory (if it fits) instead.
    """
    mode = CACHE_ALIASES.get(cache, cache)
    if mode not in CACHE_CHOICES:
        raise ConfigError(f"--cache must be one of {', '.join(CACHE_CHOICES)}, got {cache!r}")
    if mode in ("off", "memory"):
        return mode
    budget = cache_memory_budget() if memory_budget is None else memory_budget
    fits = cache_bytes(num_examples, image_size) <= budget
    if mode == "auto" and fits:
        return "memory"
    if training:
        return "disk"
    return "memory" if fits else "off"


_cache_dir: str | None = None
_cache_lock: Any = None  # open file holding a lock for as long as this process lives


def _remove_stale_cache_dirs(parent: str) -> None:
    """Remove cache dirs whose process died without cleaning up (killed, or `os._exit`).

    Each owner holds an exclusive `flock` on `DIR/owner.lock` until it exits, however it
    exits; a lock that can be taken means its owner is gone.
    """
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        path = os.path.join(parent, name)
        if not name.startswith(CACHE_DIR_PREFIX) or not os.path.isdir(path):
            continue
        try:  # no lock file yet: an owner between mkdtemp and its lock, leave it
            handle = os.open(os.path.join(path, "owner.lock"), os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # locked: its owner is alive
        else:
            shutil.rmtree(path, ignore_errors=True)
        finally:
            os.close(handle)


def disk_cache_dir() -> str:
    """This process's private cache directory (made on first use, removed at exit)."""
    global _cache_dir, _cache_lock
    if _cache_dir is None or not os.path.isdir(_cache_dir):
        parent = tempfile.gettempdir()
        _remove_stale_cache_dirs(parent)
        path = tempfile.mkdtemp(prefix=f"{CACHE_DIR_PREFIX}{os.getpid()}-", dir=parent)
        lock = open(os.path.join(path, "owner.lock"), "a")  # noqa: SIM115 (held until exit)
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        _cache_dir, _cache_lock = path, lock
        atexit.register(shutil.rmtree, path, True)
    return _cache_dir


def disk_cache_file(tag: str) -> str:
    """A fresh file prefix for one pipeline's cache: pipelines never share a cache."""
    return os.path.join(disk_cache_dir(), f"{tag}-{uuid.uuid4().hex[:12]}")


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
    """Batches of (uint8 images, int64 labels), sharded by DATA across workers.

    The images stay uint8 [0, 255]: the model's first layer scales them (see the module
    docstring), so a cached epoch only replays and batches bytes.
    """
    ds = split.encoded
    buffer = max(1, min(shuffle_buffer, split.num_examples))
    if training:
        ds = ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
    ds = ds.map(
        lambda x, y: (decode_and_resize(x, image_size), y),
        num_parallel_calls=AUTOTUNE,
        deterministic=not training,
    )
    mode = cache_mode(cache, split.num_examples, image_size, training)
    if mode != "off":
        ds = ds.cache(disk_cache_file("train") if mode == "disk" else "")  # "": memory
        if training:  # a cache replays one order: shuffle the small uint8 images again
            ds = ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
    if training if repeat is None else repeat:
        ds = ds.repeat()
    ds = ds.batch(global_batch)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    options.deterministic = not training
    return ds.with_options(options).prefetch(AUTOTUNE)
