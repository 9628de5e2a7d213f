"""ResNet50 backbone + the codelab's head, built with tf-keras.

tf-keras, not Keras 3: under MultiWorkerMirroredStrategy Keras 3's `fit` fails on
TensorFlow 2.21 (README.md, "What differs from the codelab"; keras-team/keras#20585), and its
BackupAndRestore has no chief/worker split.
"""

from __future__ import annotations

import os
from typing import Any

import tf_keras as keras

from trainer.config import ConfigError

IMAGENET_NOTOP_FILE = "resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5"


def resolve_weights(weights: str) -> str | None:
    """`imagenet`, `none` or a local weights file -> what `ResNet50(weights=...)` takes."""
    if weights.lower() == "none":
        return None
    if weights == "imagenet":
        return "imagenet"
    if not os.path.isfile(weights):
        raise ConfigError(
            f"weights file {weights!r} does not exist: pass an existing .h5 file of ResNet50 "
            f"weights without the top (e.g. {IMAGENET_NOTOP_FILE}), 'imagenet', or 'none'"
        )
    return weights


def build_backbone(image_size: int, weights: str) -> Any:
    """ResNet50 with `include_top=False`; a clear error when ImageNet weights cannot be fetched."""
    resolved = resolve_weights(weights)
    try:
        return keras.applications.ResNet50(
            weights=resolved, include_top=False, input_shape=(image_size, image_size, 3)
        )
    except Exception as err:
        if resolved != "imagenet":
            raise
        keras_home = os.environ.get("KERAS_HOME", os.path.expanduser("~/.keras"))
        raise ConfigError(
            f"could not load the ImageNet weights for ResNet50 ({type(err).__name__}: "
            f"{str(err)[:160]}). Offline, put {IMAGENET_NOTOP_FILE} in {keras_home}/models/, "
            "pass --weights PATH to a local copy, or train from scratch with --weights none."
        ) from None


def set_batchnorm_momentum(model: Any, momentum: float) -> int:
    """Set every BatchNormalization layer's moving-average momentum; returns how many.

    Keras' 0.99 needs hundreds of steps before the moving mean and variance used at
    evaluation match the data. A from-scratch backbone in a one-minute local run takes a
    few dozen steps, so its validation accuracy would sit at chance; 0.9 catches up in ~20.
    """
    layers = [
        layer for layer in model.submodules if isinstance(layer, keras.layers.BatchNormalization)
    ]
    for layer in layers:
        layer.momentum = momentum
    return len(layers)


def pixel_scaling() -> Any:
    """The model's first layer: uint8 pixels [0, 255] -> [0, 1] (the codelab's `/ 255.`).

    Scaling inside the model rather than in the input pipeline keeps every batch the
    pipeline buffers, prefetches and (on a GPU) copies to the device at 1 byte a pixel
    instead of float32's 4; a cached epoch then only replays bytes (bench/README.md). It
    computes in the layer's dtype policy, so mixed precision scales in float16.
    """
    return keras.layers.Rescaling(1.0 / 255.0, name="scale_pixels")


def build_model(
    num_classes: int,
    *,
    image_size: int = 300,
    weights: str = "imagenet",
    dense_units: int = 1016,
    freeze_base: bool = False,
    bn_momentum: float | None = None,
) -> tuple[Any, Any]:
    """The codelab's model: backbone, global average pooling, Dense(1016, relu), softmax.

    It takes uint8 images (what `trainer.data.make_pipeline` yields and the serving
    signatures decode to) and scales them itself (`pixel_scaling`): a float image already
    in [0, 1] would be cast to uint8 on the way in, so pass pixels, not scaled values.

    Returns (model, backbone) so a fine-tuning phase can unfreeze the backbone later. The
    softmax runs in float32 so mixed precision stays numerically safe.
    """
    base = build_backbone(image_size, weights)
    base.trainable = not freeze_base
    if bn_momentum is not None:
        set_batchnorm_momentum(base, bn_momentum)
    inputs = keras.Input(shape=(image_size, image_size, 3), dtype="uint8", name="image")
    x = pixel_scaling()(inputs)
    x = base(x, training=False) if freeze_base else base(x)
    x = keras.layers.GlobalAveragePooling2D(name="avg_pool")(x)
    x = keras.layers.Dense(dense_units, activation="relu", name="dense")(x)
    x = keras.layers.Dense(num_classes, name="logits")(x)
    outputs = keras.layers.Activation("softmax", dtype="float32", name="probabilities")(x)
    return keras.Model(inputs, outputs, name="cassava_resnet50"), base


def compile_model(model: Any, learning_rate: float, jit_compile: bool | None = None) -> None:
    """Adam, sparse categorical cross-entropy, accuracy: the codelab's compile."""
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        jit_compile=jit_compile,
    )
