# ruff: noqa: F821
# (The exercise functions this file calls are written by the learner in notebook 03 and
# inserted at the "YOUR FUNCTIONS" line by `labkit.course.exercises.trainer.assemble`, which drops
# these first four lines from the learner's file.)
"""The learner's trainer/task.py, in the codelab's layout: the codelab's code, with the
parts the learner writes in notebook 03 inserted where the marker line is.

Defaults are the codelab's (300x300 images, 64 per replica, 2 epochs, ImageNet weights);
the LAB_* variables only make the lab's local runs small. Vertex AI sets TF_CONFIG and,
when the job has an output folder, AIP_MODEL_DIR.
"""

import os

# tf.keras is Keras 3 from TensorFlow 2.16 on, and Keras 3's fit fails under
# MultiWorkerMirroredStrategy (keras-team/keras#20585): use tf-keras (Keras 2) instead.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import tensorflow as tf  # noqa: E402
import tensorflow_datasets as tfds  # noqa: E402

PER_REPLICA_BATCH_SIZE = int(os.environ.get("LAB_BATCH_SIZE", "64"))
EPOCHS = int(os.environ.get("LAB_EPOCHS", "2"))
IMAGE_SIZE = int(os.environ.get("LAB_IMAGE_SIZE", "300"))
STEPS_PER_EPOCH = int(os.environ.get("LAB_STEPS_PER_EPOCH", "0")) or None  # None: all
WEIGHTS = os.environ.get("LAB_WEIGHTS", "imagenet")  # "none": random (no download)

# TODO: replace {your-gcs-bucket} with the name of the Storage bucket you created earlier
BUCKET = "gs://{your-gcs-bucket}/mwms"
# Vertex AI sets AIP_MODEL_DIR (ending in "/") when the job has an output folder.
MODEL_DIR = os.environ.get("AIP_MODEL_DIR", BUCKET).rstrip("/")


def preprocess_data(image, label):
    """Resizes and scales images."""

    image = tf.image.resize(image, (IMAGE_SIZE, IMAGE_SIZE))
    return tf.cast(image, tf.float32) / 255.0, label


def create_dataset(batch_size):
    """Loads Cassava dataset and preprocesses data."""

    data, info = tfds.load(name="cassava", as_supervised=True, with_info=True)
    number_of_classes = info.features["label"].num_classes
    train_data = data["train"].map(preprocess_data, num_parallel_calls=tf.data.AUTOTUNE)
    train_data = train_data.shuffle(1000)
    train_data = train_data.batch(batch_size)
    train_data = train_data.prefetch(tf.data.AUTOTUNE)

    # Set AutoShardPolicy (your data_options)
    train_data = train_data.with_options(data_options())

    return train_data, number_of_classes


def create_model(number_of_classes):
    """Creates and compiles pretrained ResNet50 model."""

    weights = None if WEIGHTS == "none" else WEIGHTS
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


# ==== YOUR FUNCTIONS (written in notebook 03) ====


def main():
    # Create the strategy first: it sets up the collectives before any other TensorFlow op
    strategy = create_strategy()

    # Get data
    global_batch_size = global_batch(PER_REPLICA_BATCH_SIZE, strategy)
    train_data, number_of_classes = create_dataset(global_batch_size)

    # Wrap variable creation within strategy scope
    model = create_model_in_scope(strategy, number_of_classes)

    model.fit(train_data, epochs=EPOCHS, steps_per_epoch=STEPS_PER_EPOCH)

    # Determine type and task of the machine from the strategy cluster resolver
    resolver = strategy.cluster_resolver
    task_type, task_id = resolver.task_type, resolver.task_id
    cluster_spec = resolver.cluster_spec().as_dict()

    # Every worker saves (the save has collective ops); only the chief's copy is kept
    write_model_path = write_filepath(MODEL_DIR, task_type, task_id, cluster_spec)
    model.save(write_model_path)
    print(f"[my trainer] {task_type}:{task_id} saved the model to {write_model_path}", flush=True)
    if not _is_chief(task_type, task_id, cluster_spec):
        tf.io.gfile.rmtree(os.path.dirname(write_model_path))
        print(f"[my trainer] {task_type}:{task_id} removed its temporary copy", flush=True)


if __name__ == "__main__":
    main()
