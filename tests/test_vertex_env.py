"""The per-replica environment is what Vertex AI writes (the contract in labkit/local/vertex_env.py)."""

from __future__ import annotations

import json

import pytest

from labkit.local import vertex_env


def test_codelab_pools_chief_and_worker():
    layout = vertex_env.plan_cluster([1, 1], ports=[2001, 2002])
    chief, worker = layout.replicas
    assert (chief.role, chief.pool_name) == ("chief-0", "workerpool0")
    assert (worker.role, worker.pool_name) == ("worker-0", "workerpool1")

    tf_config = json.loads(vertex_env.replica_env(layout, worker)["TF_CONFIG"])
    assert tf_config == {
        "cluster": {"chief": ["127.0.0.1:2001"], "worker": ["127.0.0.1:2002"]},
        "task": {"type": "worker", "index": 0},
        "job": {},
        "environment": "cloud",
    }
    cluster_spec = json.loads(vertex_env.replica_env(layout, chief)["CLUSTER_SPEC"])
    assert cluster_spec["cluster"] == {
        "workerpool0": ["127.0.0.1:2001"],
        "workerpool1": ["127.0.0.1:2002"],
    }
    assert cluster_spec["task"] == {"type": "workerpool0", "index": 0}
    assert cluster_spec["environment"] == "cloud"


def test_all_four_pools_evaluator_outside_the_tf_cluster():
    layout = vertex_env.plan_cluster([1, 2, 1, 1], ports=[1, 2, 3, 4, 5])
    roles = [r.role for r in layout.replicas]
    assert roles == ["chief-0", "worker-0", "worker-1", "ps-0", "evaluator-0"]
    evaluator = layout.replicas[-1]
    env = vertex_env.replica_env(layout, evaluator)
    tf_config = json.loads(env["TF_CONFIG"])
    assert set(tf_config["cluster"]) == {"chief", "worker", "ps"}
    assert tf_config["cluster"]["worker"] == ["127.0.0.1:2", "127.0.0.1:3"]
    assert tf_config["task"] == {"type": "evaluator", "index": 0}
    cluster_spec = json.loads(env["CLUSTER_SPEC"])
    assert cluster_spec["cluster"]["workerpool3"] == ["127.0.0.1:5"]
    assert cluster_spec["task"] == {"type": "workerpool3", "index": 0}


def test_empty_placeholder_pools_are_skipped():
    layout = vertex_env.plan_cluster([1, 0, 0, 1], ports=[10, 11])
    assert [r.role for r in layout.replicas] == ["chief-0", "evaluator-0"]
    assert layout.tf_cluster() == {"chief": ["127.0.0.1:10"]}


def test_job_spec_goes_into_the_job_field():
    layout = vertex_env.plan_cluster([1], ports=[7])
    job = {"worker_pool_specs": [{"replica_count": 1}]}
    env = vertex_env.replica_env(layout, layout.replicas[0], job=job)
    assert json.loads(env["TF_CONFIG"])["job"] == job
    assert json.loads(env["CLUSTER_SPEC"])["job"] == job


def test_output_dirs_follow_the_base_output_directory():
    layout = vertex_env.plan_cluster([1], ports=[7])
    env = vertex_env.replica_env(layout, layout.replicas[0], base_output_dir="gs://b/run-1/")
    assert env["AIP_MODEL_DIR"] == "gs://b/run-1/model/"
    assert env["AIP_CHECKPOINT_DIR"] == "gs://b/run-1/checkpoints/"
    assert env["AIP_TENSORBOARD_LOG_DIR"] == "gs://b/run-1/logs/"
    assert "AIP_MODEL_DIR" not in vertex_env.replica_env(layout, layout.replicas[0])


def test_cluster_counts_with_and_without_chief():
    assert vertex_env.cluster_counts(3, chief=True) == [1, 2]
    assert vertex_env.cluster_counts(1, chief=True) == [1, 0]
    assert vertex_env.cluster_counts(3, chief=False) == [0, 3]
    layout = vertex_env.plan_cluster(vertex_env.cluster_counts(2, chief=False), ports=[1, 2])
    tf_config = layout.tf_config(layout.replicas[0])
    assert tf_config["cluster"] == {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}
    assert tf_config["task"] == {"type": "worker", "index": 0}
    with pytest.raises(ValueError, match="--workers must be at least 1"):
        vertex_env.cluster_counts(0, chief=True)


def test_free_ports_are_distinct_and_bindable():
    import socket

    ports = vertex_env.free_ports(6)
    assert len(set(ports)) == 6
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


@pytest.mark.parametrize(
    ("counts", "ports", "message"),
    [
        ([1, 1, 1, 1, 1], None, "at most 4 worker pools"),
        ([1, -1], None, "must be >= 0"),
        ([0, 0], None, "at least one replica"),
        ([1, 1], [5], "need 2 ports"),
    ],
)
def test_bad_layouts_are_rejected(counts, ports, message):
    with pytest.raises(ValueError, match=message):
        vertex_env.plan_cluster(counts, ports=ports)


def test_inherited_cluster_variables_are_dropped():
    env = {"TF_CONFIG": "{}", "AIP_MODEL_DIR": "/x", "HOME": "/root"}
    assert vertex_env.without_vertex_variables(env) == {"HOME": "/root"}
