"""Cluster info from TF_CONFIG, the chief table, and where each worker writes."""

from __future__ import annotations

import json

import pytest

from trainer.config import ConfigError
from trainer.distribution import is_chief, parse_tf_config, worker_temp_dir, write_dir

CLUSTER = {"chief": ["localhost:1"], "worker": ["localhost:2", "localhost:3"]}
NO_CHIEF = {"worker": ["localhost:2", "localhost:3"]}


def tf_config(cluster, task_type, index):
    return {
        "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})
    }


@pytest.mark.parametrize(
    "task_type, index, cluster, chief",
    [
        (None, 0, {}, True),  # no TF_CONFIG: the lone process is the chief
        ("chief", 0, CLUSTER, True),
        ("worker", 0, CLUSTER, False),  # a chief exists, so worker 0 is not it
        ("worker", 1, CLUSTER, False),
        ("worker", 0, NO_CHIEF, True),  # no chief in the cluster: worker 0 takes the role
        ("worker", 1, NO_CHIEF, False),
    ],
)
def test_chief_table(task_type, index, cluster, chief):
    assert is_chief(task_type, index, cluster) is chief


def test_no_tf_config_is_a_single_process():
    info = parse_tf_config({})
    assert not info.is_multi_worker and info.is_chief and info.name == "local"


def test_vertex_style_tf_config_is_read():
    env = tf_config(CLUSTER, "worker", 1)
    info = parse_tf_config(env)
    assert (info.task_type, info.task_id, info.num_workers, info.is_chief) == (
        "worker",
        1,
        3,
        False,
    )


def test_malformed_json_names_the_problem():
    with pytest.raises(ConfigError, match="TF_CONFIG is not valid JSON"):
        parse_tf_config({"TF_CONFIG": "{'cluster': "})


@pytest.mark.parametrize(
    "task_type, index, fragment",
    [
        ("worker", 5, "worker:5 is not in the cluster"),
        ("master", 0, "task type 'master'"),
        ("chief", 1, "chief:1"),
    ],
)
def test_task_not_in_the_cluster_is_rejected(task_type, index, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_tf_config(tf_config(CLUSTER, task_type, index))


def test_chief_writes_to_the_model_dir_others_to_unique_temp_dirs():
    chief = parse_tf_config(tf_config(CLUSTER, "chief", 0))
    w0 = parse_tf_config(tf_config(CLUSTER, "worker", 0))
    w1 = parse_tf_config(tf_config(CLUSTER, "worker", 1))
    model_dir = "gs://bucket/job/model/"
    assert write_dir(model_dir, chief) == "gs://bucket/job/model"
    temps = {write_dir(model_dir, w0), write_dir(model_dir, w1)}
    assert temps == {"gs://bucket/job/workertemp_worker_0", "gs://bucket/job/workertemp_worker_1"}
    assert worker_temp_dir(model_dir, w0) not in model_dir  # never inside the chief's model


def test_ps_tasks_are_refused_with_the_reason():
    from trainer.distribution import create_strategy

    info = parse_tf_config(tf_config({**CLUSTER, "ps": ["localhost:9"]}, "ps", 0))
    with pytest.raises(ConfigError, match="ParameterServerStrategy"):
        create_strategy(info)


def test_xla_is_refused_for_cpu_workers_only():
    from trainer.distribution import check_xla

    two_workers = parse_tf_config(
        {
            "TF_CONFIG": json.dumps(
                {"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}}
            )
        }
    )
    with pytest.raises(ConfigError, match="--xla on cannot train on several CPU workers"):
        check_xla(True, two_workers, gpu=False)
    check_xla(True, two_workers, gpu=True)  # NCCL collectives compile
    check_xla(True, parse_tf_config({}), gpu=False)  # one process on a CPU compiles
    check_xla(False, two_workers, gpu=False)
