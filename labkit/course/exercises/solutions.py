"""Solutions of notebook 03's exercises, in the codelab's style: one function per exercise.

Each function's source goes, as it is, into the learner's trainer when the notebook runs with
``SOLVED = True`` (CI, `make lab`); a learner who is stuck prints one with
``exercises.show_solution("_is_chief")``. They use only names the learner's file has
(``os``, ``tf``, ``create_model`` and each other), so they run there unchanged.
"""

import os

import tensorflow as tf

from labkit.course.exercises.template_task import create_model


def _is_chief(task_type, task_id, cluster_spec):
    """True on the one replica that saves the real model."""
    if task_type is None:  # no TF_CONFIG: a single machine
        return True
    if task_type == "chief":  # pool 0 of a Vertex AI job
        return True
    # A cluster of workers only (TensorFlow's own layout): worker 0 acts as the chief.
    return task_type == "worker" and task_id == 0 and not cluster_spec.get("chief")


def _get_temp_dir(dirpath, task_id):
    """A folder of this worker's own, inside dirpath, for a copy that is deleted later."""
    base_dirpath = "workertemp_" + str(task_id)
    temp_dir = os.path.join(dirpath, base_dirpath)
    tf.io.gfile.makedirs(temp_dir)
    return temp_dir


def write_filepath(filepath, task_type, task_id, cluster_spec):
    """Where this replica saves: the chief to filepath, every other worker to a temp dir."""
    dirpath = os.path.dirname(filepath)
    base = os.path.basename(filepath)
    if not _is_chief(task_type, task_id, cluster_spec):
        dirpath = _get_temp_dir(dirpath, task_id)
    return os.path.join(dirpath, base)


def create_strategy():
    """The strategy, created before any other TensorFlow operation."""
    return tf.distribute.MultiWorkerMirroredStrategy()


def create_model_in_scope(strategy, number_of_classes):
    """The model, built and compiled inside the strategy's scope."""
    with strategy.scope():
        model = create_model(number_of_classes)
    return model


def global_batch(per_replica_batch_size, strategy):
    """The batch of one step across the whole cluster."""
    return per_replica_batch_size * strategy.num_replicas_in_sync


def data_options():
    """Dataset options that shard the data by element across the workers."""
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return options
