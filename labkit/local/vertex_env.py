"""The environment Vertex AI gives each replica of a custom job, built in one place.

Both the local cluster launcher (`labkit cluster`) and the local Vertex AI service
(`labkit emulator`) start replicas from this module, so a trainer sees the same variables
on a laptop as on Vertex AI:

- ``TF_CONFIG``: ``{"cluster": {"chief": [...], "worker": [...], "ps": [...]},
  "task": {"type": ..., "index": i}, "job": {...}, "environment": "cloud"}``. Pool 0 is the
  ``chief``, pool 1 ``worker``, pool 2 ``ps``, pool 3 ``evaluator``; an evaluator gets its
  task but is not part of ``cluster`` (it does not join the collectives).
- ``CLUSTER_SPEC``: the same cluster named by pool (``workerpool0`` ...), evaluators included.
- ``AIP_MODEL_DIR``, ``AIP_CHECKPOINT_DIR``, ``AIP_TENSORBOARD_LOG_DIR`` from the job's base
  output directory (``<base>/model/``, ``<base>/checkpoints/``, ``<base>/logs/``).

Addresses are free ports on 127.0.0.1 instead of Vertex's ``cmle-training-...:2222`` hosts.

A cluster with an empty pool 0 (`plan_cluster([0, 3])`) has only ``worker`` tasks: that is
TensorFlow's plain MultiWorkerMirroredStrategy layout, where worker 0 acts as the chief.
Vertex itself never writes it (it requires exactly one replica in pool 0), but
`labkit cluster` without ``--chief`` uses it because it is what the TensorFlow guides run.
"""

from __future__ import annotations

import dataclasses
import json
import socket
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from typing import Any

# Vertex's worker pool index -> TensorFlow task type.
TASK_TYPE_BY_POOL = ("chief", "worker", "ps", "evaluator")
# Task types that take part in the training cluster (TF_CONFIG's "cluster").
CLUSTER_TASK_TYPES = ("chief", "worker", "ps")
LOCALHOST = "127.0.0.1"
# Variables a replica inherits from nobody: they describe the cluster it belongs to.
VERTEX_VARIABLES = (
    "TF_CONFIG",
    "CLUSTER_SPEC",
    "AIP_MODEL_DIR",
    "AIP_CHECKPOINT_DIR",
    "AIP_TENSORBOARD_LOG_DIR",
)


@dataclasses.dataclass(frozen=True)
class Replica:
    """One process of a job: which pool it belongs to, its index there, its address."""

    pool: int
    index: int
    address: str

    @property
    def task_type(self) -> str:
        return TASK_TYPE_BY_POOL[self.pool]

    @property
    def role(self) -> str:
        """Short name used in log prefixes and log file names, e.g. ``chief-0``."""
        return f"{self.task_type}-{self.index}"

    @property
    def pool_name(self) -> str:
        """The name Vertex uses in CLUSTER_SPEC and in its messages, e.g. ``workerpool1``."""
        return f"workerpool{self.pool}"


@dataclasses.dataclass(frozen=True)
class ClusterLayout:
    """Every replica of a job, in pool order; the source of TF_CONFIG and CLUSTER_SPEC."""

    replicas: tuple[Replica, ...]

    def tf_cluster(self) -> dict[str, list[str]]:
        """TF_CONFIG's ``cluster``: chief, worker and ps addresses (never evaluators)."""
        cluster: dict[str, list[str]] = {}
        for replica in self.replicas:
            if replica.task_type in CLUSTER_TASK_TYPES:
                cluster.setdefault(replica.task_type, []).append(replica.address)
        return cluster

    def pool_cluster(self) -> dict[str, list[str]]:
        """CLUSTER_SPEC's ``cluster``: every pool by its Vertex name, evaluators included."""
        cluster: dict[str, list[str]] = {}
        for replica in self.replicas:
            cluster.setdefault(replica.pool_name, []).append(replica.address)
        return cluster

    def tf_config(self, replica: Replica, job: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {
            "cluster": self.tf_cluster(),
            "task": {"type": replica.task_type, "index": replica.index},
            "job": dict(job or {}),
            "environment": "cloud",
        }

    def cluster_spec(
        self, replica: Replica, job: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        return {
            "cluster": self.pool_cluster(),
            "task": {"type": replica.pool_name, "index": replica.index},
            "job": dict(job or {}),
            "environment": "cloud",
        }


def free_ports(count: int, host: str = LOCALHOST) -> list[int]:
    """``count`` distinct ports that were free a moment ago.

    All sockets are held open until every port is chosen, so the ports differ; there is
    still a short window in which another program could take one (as with any launcher
    that passes ports to children), which is why each attempt of a job picks new ones.
    """
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(sock.getsockname()[1])
    return ports


def plan_cluster(
    replica_counts: Sequence[int], host: str = LOCALHOST, ports: Sequence[int] | None = None
) -> ClusterLayout:
    """Assign an address to every replica; ``replica_counts[i]`` is pool i's replica count.

    ``ports`` (one per replica, in pool order) is for tests; by default free ports are used.
    """
    counts = [int(c) for c in replica_counts]
    if len(counts) > len(TASK_TYPE_BY_POOL):
        raise ValueError(
            f"a job has at most {len(TASK_TYPE_BY_POOL)} worker pools "
            f"(chief, worker, ps, evaluator), got {len(counts)}"
        )
    if any(c < 0 for c in counts):
        raise ValueError(f"replica counts must be >= 0, got {counts}")
    total = sum(counts)
    if total == 0:
        raise ValueError("the cluster needs at least one replica")
    if ports is None:
        ports = free_ports(total, host)
    if len(ports) != total:
        raise ValueError(f"need {total} ports (one per replica), got {len(ports)}")
    replicas = []
    port_iter = iter(ports)
    for pool, count in enumerate(counts):
        for index in range(count):
            replicas.append(Replica(pool, index, f"{host}:{next(port_iter)}"))
    return ClusterLayout(tuple(replicas))


def cluster_counts(workers: int, chief: bool) -> list[int]:
    """Replica counts per pool for `labkit cluster --workers N [--chief]`.

    With a chief: pool 0 holds 1 replica and pool 1 the other N-1 (what Vertex runs for the
    codelab's two pools). Without: N ``worker`` tasks and no chief (TensorFlow's layout).
    """
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    return [1, workers - 1] if chief else [0, workers]


def output_dirs(base_output_dir: str) -> dict[str, str]:
    """The AIP_* directories Vertex derives from ``baseOutputDirectory.outputUriPrefix``."""
    base = base_output_dir.rstrip("/")
    if not base:
        raise ValueError("base_output_dir is empty; give the folder (or gs:// URI) for outputs")
    return {
        "AIP_MODEL_DIR": f"{base}/model/",
        "AIP_CHECKPOINT_DIR": f"{base}/checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": f"{base}/logs/",
    }


def replica_env(
    layout: ClusterLayout,
    replica: Replica,
    *,
    job: Mapping[str, Any] | None = None,
    base_output_dir: str | None = None,
) -> dict[str, str]:
    """The variables Vertex adds for ``replica`` (only those; merge them over a base env).

    ``job`` is the job spec that goes into the ``job`` field of TF_CONFIG and CLUSTER_SPEC,
    as Vertex puts the submitted spec there.
    """
    if replica not in layout.replicas:
        raise ValueError(f"{replica.role} is not part of this cluster")
    env = {
        "TF_CONFIG": json.dumps(layout.tf_config(replica, job)),
        "CLUSTER_SPEC": json.dumps(layout.cluster_spec(replica, job)),
    }
    if base_output_dir:
        env.update(output_dirs(base_output_dir))
    return env


def without_vertex_variables(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` minus any cluster variables inherited from the launching process.

    A notebook kernel started inside another job (or a test that set TF_CONFIG) must not
    leak its own cluster description into the replicas it launches.
    """
    return {k: v for k, v in env.items() if k not in VERTEX_VARIABLES}
