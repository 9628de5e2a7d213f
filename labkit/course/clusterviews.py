"""Notebook 03's views of a multi-worker cluster: who is chief, each replica's ``TF_CONFIG``,
where each replica saves, what each replica logged, and the preemption demo's outcome.

The rules shown are the trainer's own (`trainer.distribution`) and the environment the
local cluster runner sets is Vertex AI's (`labkit.local.vertex_env`), so the tables cannot drift
from what runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from labkit.course import faultdemo
from labkit.course.results import record
from labkit.course.views import Table, matching_lines
from labkit.local import vertex_env
from trainer.distribution import is_chief, parse_tf_config, write_dir

CHIEF_CASES: tuple[tuple[str, str | None, int, dict[str, list[str]]], ...] = (
    ("no TF_CONFIG (one machine)", None, 0, {}),
    ("chief 0 (Vertex pool 0)", "chief", 0, {"chief": ["a:2222"], "worker": ["b:2222"]}),
    ("worker 0, cluster with a chief", "worker", 0, {"chief": ["a:2222"], "worker": ["b:2222"]}),
    ("worker 0, cluster without chief", "worker", 0, {"worker": ["a:2222", "b:2222"]}),
    ("worker 1, cluster without chief", "worker", 1, {"worker": ["a:2222", "b:2222"]}),
)


def chief_table(codelab_rule: Callable[[str | None, int], bool]) -> Table:
    """Who is chief in each kind of cluster: the codelab's rule next to the trainer's."""
    return Table(
        [
            {
                "case": case,
                "codelab _is_chief": codelab_rule(task_type, index),
                "trainer is_chief": is_chief(task_type, index, cluster),
            }
            for case, task_type, index, cluster in CHIEF_CASES
        ]
    )


def example_layout(workers: int, first_port: int = 2222) -> vertex_env.ClusterLayout:
    """A chief + (workers - 1) workers cluster on fixed ports, for showing TF_CONFIG.

    Vertex gives every replica its own host (port 2222 each); local replicas share
    127.0.0.1, so they differ by port instead.
    """
    counts = vertex_env.cluster_counts(workers, chief=True)
    return vertex_env.plan_cluster(counts, ports=list(range(first_port, first_port + workers)))


def show_tf_configs(layout: vertex_env.ClusterLayout) -> None:
    """Print TF_CONFIG and CLUSTER_SPEC of every replica as Vertex would set them."""
    for replica in layout.replicas:
        print(f"--- {replica.role} ({replica.pool_name}) ---")
        print("TF_CONFIG =", json.dumps(layout.tf_config(replica)))
        print("CLUSTER_SPEC =", json.dumps(layout.cluster_spec(replica)))


def save_plan(layout: vertex_env.ClusterLayout, model_dir: str) -> Table:
    """Where each replica of ``layout`` saves the model, and whether the copy is kept."""
    rows = []
    for replica in layout.replicas:
        info = parse_tf_config({"TF_CONFIG": json.dumps(layout.tf_config(replica))})
        rows.append(
            {
                "replica": replica.role,
                "chief": info.is_chief,
                "saves to": write_dir(model_dir, info),
                "kept": "yes" if info.is_chief else "no: removed after the save",
            }
        )
    return Table(rows)


def replica_lines(cluster: Any, pattern: str = r"\[trainer\]") -> None:
    """Print, per replica of a `run_cluster` result, the log lines matching ``pattern``."""
    for role in cluster.logs:
        print(f"--- {role} (exit code {cluster.exit_codes.get(role)}) ---")
        for line in matching_lines(cluster.log_text(role), pattern):
            print(line)


def preemption_result(
    plan: faultdemo.FaultPlan,
    first: Any,
    second: Any,
    metrics: Mapping[str, Any],
    run_dir: str | Path,
) -> str:
    """The restart resumed from the backup (raises if it started over): the check's line,
    with the demo's outcome recorded as this run's ``preemption``."""
    line = faultdemo.check_resumed(metrics, plan)
    record(run_dir, "preemption", faultdemo.outcome(plan, first, second, metrics))
    return line
