"""The input pipeline: shapes, dtypes, value range, global batch per replica count, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from fixtures_data import tiny_folder, write_tiny_folder  # noqa: F401

from trainer import data
from trainer import model as model_lib
from trainer.config import CASSAVA_CLASSES, ConfigError


def test_folder_source_reads_the_cassava_layout(tiny_folder):
    split = data.load_split(str(tiny_folder), "train")
    assert split.num_examples == 8 * 5
    assert split.class_names == list(CASSAVA_CLASSES)
    assert data.available_splits(str(tiny_folder)) == ["train", "validation"]


@pytest.mark.parametrize("replicas", [1, 2, 4])
def test_batches_are_global_batch_uint8_images_the_model_scales_to_0_1(tiny_folder, replicas):
    split = data.load_split(str(tiny_folder), "train")
    per_replica = 4
    ds = data.make_pipeline(
        split, global_batch=per_replica * replicas, image_size=32, training=True, seed=1
    )
    images, labels = next(iter(ds))
    assert images.shape == (per_replica * replicas, 32, 32, 3)
    assert images.dtype == tf.uint8 and labels.dtype == tf.int64  # 1 byte a pixel in flight
    scaled = model_lib.pixel_scaling()(images)  # the model's first layer
    assert scaled.dtype == tf.float32
    assert float(tf.reduce_min(scaled)) >= 0.0 and float(tf.reduce_max(scaled)) <= 1.0
    assert float(tf.reduce_max(scaled)) > 0.5  # scaled, not all dark
    assert set(labels.numpy()) <= set(range(5))


def test_the_model_takes_the_pipelines_uint8_batches_and_scales_them_itself(tiny_folder):
    split = data.load_split(str(tiny_folder), "validation")
    images, _labels = next(
        iter(data.make_pipeline(split, global_batch=6, image_size=32, training=False))
    )
    model, _base = model_lib.build_model(5, image_size=32, weights="none", dense_units=8)
    assert model.input.dtype == tf.uint8
    first = model.get_layer("scale_pixels")
    assert float(first(tf.constant([[0, 255]], tf.uint8)).numpy().max()) == pytest.approx(1.0)
    probabilities = model(images, training=False).numpy()
    assert probabilities.shape == (6, 5)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    # Pixels, not pre-scaled floats: the same picture divided by 255 is a different (dark) input.
    scaled_twice = model(tf.cast(images, tf.float32) / 255.0, training=False).numpy()
    assert not np.allclose(scaled_twice, probabilities)


def test_sharding_policy_is_data(tiny_folder):
    split = data.load_split(str(tiny_folder), "train")
    ds = data.make_pipeline(split, global_batch=4, image_size=16, training=True)
    policy = ds.options().experimental_distribute.auto_shard_policy
    assert policy == tf.data.experimental.AutoShardPolicy.DATA


def test_evaluation_pipeline_visits_every_example_once(tiny_folder):
    split = data.load_split(str(tiny_folder), "validation")
    ds = data.make_pipeline(split, global_batch=4, image_size=16, training=False)
    labels = np.concatenate([y.numpy() for _, y in ds])
    assert len(labels) == 15 and np.bincount(labels).tolist() == [3] * 5


def test_colour_survives_decode_resize_and_scaling(tiny_folder):
    split = data.load_split(str(tiny_folder), "validation")
    ds = data.make_pipeline(split, global_batch=15, image_size=16, training=False)
    images, labels = next(iter(ds))
    red = images.numpy()[labels.numpy() == 0].mean(axis=(0, 1, 2)) / 255.0
    assert red[0] > 0.65 and red[2] < 0.35  # class 0 was written red


def test_unknown_source_names_the_fix():
    with pytest.raises(ConfigError, match="unknown data source 'imagenet-folder'.*tfds:cassava"):
        data.load_split("imagenet-folder", "train")


def test_unknown_tfds_dataset(tmp_path):
    with pytest.raises(ConfigError, match="no dataset of that name"):
        data.load_split("tfds:no_such_dataset_xyz", "train", data_dir=str(tmp_path))


def test_folder_without_class_subfolders(tmp_path):
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "a.jpg").write_bytes(b"x")
    with pytest.raises(ConfigError, match="no class sub-folders"):
        data.load_split(str(tmp_path), "train")


def test_corrupt_image_is_named(tmp_path):
    root = write_tiny_folder(tmp_path, {"train": 2})
    bad = root / "cassavaleafdata" / "train" / "cmd" / "train-cmd-broken.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 this is not really a jpeg")
    with pytest.raises(ConfigError, match="train-cmd-broken.jpg"):
        data.load_split(str(root), "train", bad_images="fail")
    skipped = data.load_split(str(root), "train", bad_images="skip")
    assert skipped.num_examples == 10 and skipped.skipped[0].endswith("train-cmd-broken.jpg")


def test_cache_modes():
    small, big = (1000, 64), (10_000, 300)  # 12 MB and 2.7 GB of uint8 images
    budget = {"memory_budget": 256 * 2**20}
    assert data.cache_mode("auto", *small, **budget) == "memory"
    assert data.cache_mode("auto", *big, **budget) == "disk"  # training split: a temp file
    assert data.cache_mode("auto", *big, training=False, **budget) == "off"  # never disk
    assert data.cache_mode("disk", *small, training=False, **budget) == "memory"
    assert data.cache_mode("disk", *small) == "disk"
    assert data.cache_mode("memory", *big) == "memory" and data.cache_mode("on", *big) == "memory"
    assert data.cache_mode("off", *small) == "off"
    assert data.cache_bytes(2036, 300) == 2036 * 300 * 300 * 3
    with pytest.raises(ConfigError, match="--cache must be one of"):
        data.cache_mode("sometimes", 1, 1)


def test_auto_cache_budget_is_a_share_of_memory(monkeypatch):
    assert (data.memory_limit_bytes() or 0) > 0  # this machine's, read from the OS
    monkeypatch.setattr(data, "memory_limit_bytes", lambda: 16 * 2**30)
    assert data.cache_memory_budget() == 2 * 2**30  # 1/8
    assert data.cache_mode("auto", 5656, 300) == "memory"  # the real split: 1.4 GiB
    monkeypatch.setattr(data, "memory_limit_bytes", lambda: 8 * 2**30)
    assert data.cache_mode("auto", 5656, 300) == "disk"
    monkeypatch.setattr(data, "memory_limit_bytes", lambda: None)
    assert data.cache_memory_budget() == data.CACHE_MEMORY_FLOOR_BYTES


def test_cache_option_accepts_every_mode():
    from trainer.config import CACHE_OPTIONS, TrainConfig

    assert set(CACHE_OPTIONS) == {*data.CACHE_CHOICES, *data.CACHE_ALIASES}
    for mode in CACHE_OPTIONS:
        assert TrainConfig(cache=mode).cache == mode
    with pytest.raises(ConfigError, match="--cache"):
        TrainConfig(cache="sometimes")


def test_disk_cache_replays_the_split_from_a_private_temp_file(tiny_folder):
    split = data.load_split(str(tiny_folder), "train")  # 40 images
    ds = data.make_pipeline(split, global_batch=16, image_size=16, training=True, cache="disk")
    labels = np.concatenate([y.numpy() for _, y in ds.take(10)])  # 160 images: 4 epochs
    assert np.bincount(labels).tolist() == [32] * 5  # every epoch sees every image once
    cache_dir = Path(data.disk_cache_dir())
    assert cache_dir.name.startswith(data.CACHE_DIR_PREFIX)
    assert any(p.name.endswith(".index") for p in cache_dir.iterdir())  # the cache is complete


def test_stale_cache_dirs_of_dead_processes_are_removed(tmp_path):
    import fcntl

    dead = tmp_path / f"{data.CACHE_DIR_PREFIX}1-dead"
    alive = tmp_path / f"{data.CACHE_DIR_PREFIX}2-alive"
    starting = tmp_path / f"{data.CACHE_DIR_PREFIX}3-starting"  # no lock file yet
    for folder in (dead, alive, starting):
        folder.mkdir()
    (dead / "owner.lock").touch()
    (alive / "owner.lock").touch()
    with open(alive / "owner.lock") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        data._remove_stale_cache_dirs(str(tmp_path))
    assert not dead.exists() and alive.exists() and starting.exists()


def test_large_jpegs_decode_at_a_reduced_scale_never_below_the_target():
    def index(height, width, size):
        return int(data.jpeg_scale_index(tf.constant([height, width, 3]), size))

    assert index(400, 500, 300) == 0  # 1/2 would give 200 < 300: full size
    assert index(400, 500, 128) == 1  # 1/2: 200x250
    assert index(400, 500, 64) == 2  # 1/4: 100x125 (1/8 would give 50)
    assert index(4000, 3000, 32) == 3
    assert index(255, 300, 128) == 1  # libjpeg rounds up: ceil(255 / 2) = 128 still fits
    assert index(254, 300, 128) == 0


def test_reduced_scale_decoding_matches_full_decoding(tmp_path):
    from PIL import Image

    rows, cols = np.mgrid[0:400, 0:320]  # a smooth 400x320 picture: colour gradients
    smooth = np.stack(
        [128 + 100 * np.sin(rows / 50), 128 + 100 * np.cos(cols / 40), (rows + cols) / 3], -1
    ).astype(np.uint8)
    path = tmp_path / "big.jpg"
    Image.fromarray(smooth).save(path, quality=95)
    encoded = tf.constant(path.read_bytes())
    fast = data.decode_and_resize(encoded, 64)  # decoded at 1/4 scale: 100x80
    full = tf.image.resize(tf.io.decode_jpeg(encoded, channels=3), (64, 64), antialias=True)
    assert fast.shape == (64, 64, 3) and fast.dtype == tf.uint8
    assert np.abs(fast.numpy() - full.numpy()).mean() < 2  # of 255: the same picture
    png = tmp_path / "small.png"
    Image.fromarray(smooth[:50, :60]).save(png)
    assert data.decode_and_resize(tf.constant(png.read_bytes()), 32).shape == (32, 32, 3)
