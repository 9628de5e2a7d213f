"""The codelab's own `preprocess_data`, `create_dataset` and `create_model`, as the baseline.

Copied from the seed's `trainer/task.py` with three changes, each needed to run it here
and none touching what is measured:
- `create_dataset` takes `data_dir`, so `tfds.load('cassava')` reads the bench's prepared
  JPEG set (the same files the kit's pipeline reads) instead of downloading 1.26 GiB;
- `image_size` (default the codelab's 300) so the training bench can run at a size two CPU
  cores can train; at 300 the pipeline is the codelab's line for line;
- `create_model` takes `weights` (the bench passes None: no machine here reaches the
  ImageNet weights' URL) and `image_size` is not passed to ResNet50, as in the codelab.
Run it with ``TF_USE_LEGACY_KERAS=1`` so `tf.keras` is tf-keras, as the codelab's TF 2.7
container had (Keras 3 `fit` fails under MultiWorkerMirroredStrategy: design.md).
"""

from __future__ import annotations

import functools
from typing import Any

import tensorflow as tf
import tensorflow_datasets as tfds

CODELAB_IMAGE_SIZE = 300
CODELAB_SHUFFLE_BUFFER = 1000
CODELAB_PER_REPLICA_BATCH_SIZE = 64


def preprocess_data(image: Any, label: Any, image_size: int = CODELAB_IMAGE_SIZE) -> Any:
    """Resizes and scales images."""

    image = tf.image.resize(image, (image_size, image_size))
    return tf.cast(image, tf.float32) / 255.0, label


def create_dataset(
    batch_size: int, *, data_dir: str | None = None, image_size: int = CODELAB_IMAGE_SIZE
) -> tuple[Any, int]:
    """Loads Cassava dataset and preprocesses data."""

    data, info = tfds.load(name="cassava", as_supervised=True, with_info=True, data_dir=data_dir)
    number_of_classes = info.features["label"].num_classes
    train_data = data["train"].map(
        functools.partial(preprocess_data, image_size=image_size),
        num_parallel_calls=tf.data.experimental.AUTOTUNE,
    )
    train_data = train_data.shuffle(CODELAB_SHUFFLE_BUFFER)
    train_data = train_data.batch(batch_size)
    train_data = train_data.prefetch(tf.data.experimental.AUTOTUNE)

    # Set AutoShardPolicy
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    train_data = train_data.with_options(options)

    return train_data, number_of_classes


def create_model(number_of_classes: int, *, weights: str | None = "imagenet") -> Any:
    """Creates and compiles pretrained ResNet50 model."""

    base_model = tf.keras.applications.ResNet50(weights=weights, include_top=False)
    x = base_model.output
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    x = tf.keras.layers.Dense(1016, activation="relu")(x)
    predictions = tf.keras.layers.Dense(number_of_classes, activation="softmax")(x)
    model = tf.keras.Model(inputs=base_model.input, outputs=predictions)

    model.compile(
        loss="sparse_categorical_crossentropy",
        optimizer=tf.keras.optimizers.Adam(0.0001),
        metrics=["accuracy"],
    )

    return model
