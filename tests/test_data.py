"""The input pipeline: shapes, dtypes, value range, global batch per replica count, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from fixtures_data import tiny_folder, write_tiny_folder  # noqa: F401

from trainer import data
from trainer.config import CASSAVA_CLASSES, ConfigError


def test_folder_source_reads_the_cassava_layout(tiny_folder):
    split = data.load_split(str(tiny_folder), "train")
    assert split.num_examples == 8 * 5
    assert split.class_names == list(CASSAVA_CLASSES)
    assert data.available_splits(str(tiny_folder)) == ["train", "validation"]


@pytest.mark.parametrize("replicas", [1, 2, 4])
def test_batches_are_global_batch_float_images_in_0_1(tiny_folder, replicas):
    split = data.load_split(str(tiny_folder), "train")
    per_replica = 4
    ds = data.make_pipeline(split, global_batch=per_replica * replicas, image_size=32, training=True, seed=1)
    images, labels = next(iter(ds))
    assert images.shape == (per_replica * replicas, 32, 32, 3)
    assert images.dtype == tf.float32 and labels.dtype == tf.int64
    assert float(tf.reduce_min(images)) >= 0.0 and float(tf.reduce_max(images)) <= 1.0
    assert float(tf.reduce_max(images)) > 0.5  # scaled, not all dark
    assert set(labels.numpy()) <= set(range(5))


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
    red = images.numpy()[labels.numpy() == 0].mean(axis=(0, 1, 2))
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
        data.load_split(str(root), "train")


def test_cache_switch():
    assert data.should_cache("auto", 1000, 64) and not data.should_cache("auto", 10_000, 300)
    assert data.should_cache("on", 10**9, 300) and not data.should_cache("off", 1, 1)
