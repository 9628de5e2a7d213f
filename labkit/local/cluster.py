"""`python -m labkit cluster`: run a command as N local replicas of a multi-worker cluster.

Each replica gets TF_CONFIG and CLUSTER_SPEC on free localhost ports exactly as Vertex AI
writes them (`labkit.local.vertex_env`), output prefixed by its role, and a log file of its own
(`labkit.local.supervisor`). With ``--chief`` the first replica is pool 0's ``chief`` and the
others are pool 1's workers, as in the codelab's job; without it all N are ``worker``
tasks (TensorFlow's layout, worker 0 acting as chief). One failing replica stops the rest
within seconds; the exit status is 0 only when every replica succeeded. The replicas die
with the launcher even when it is SIGKILLed (a parent-death signal, `labkit.local.supervisor`), and
their pids are in ``<logs>/processes.json`` while they run, for `labkit cleanup`.

    python -m labkit cluster --workers 2 --chief --base-output-dir runs/mwms -- python -m trainer.task --epochs 1

``--base-output-dir`` stands for the job's model output directory: like Vertex, the runner
sets AIP_MODEL_DIR (and the checkpoint and TensorBoard folders) only from it, and the kit's
trainer refuses to start in a cluster without one (or its own ``--model-dir``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from labkit.cloud.paths import lab_home
from labkit.local import supervisor, vertex_env

EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130
# What a run shows of the replicas' output (their log files keep everything):
#   all      every line
#   quiet    every line but TensorFlow's C++ logging (the CLI's default)
#   trainer  the trainer's own `[trainer]` lines and Keras's per-epoch progress (notebooks)
VIEWS = ("all", "quiet", "trainer")
TRAINER_LINE = re.compile(r"^\[trainer\] |^\s*\d+/\d+ - ")


def shows(view: str) -> Callable[[str], bool]:
    """The line filter of a view (see `VIEWS`)."""
    if view == "all":
        return lambda line: True
    if view == "quiet":
        return lambda line: not supervisor.is_cpp_log_line(line)
    if view == "trainer":
        return lambda line: bool(TRAINER_LINE.match(line))
    raise ValueError(f"view must be one of {', '.join(VIEWS)}, got {view!r}")


@dataclasses.dataclass
class ClusterResult:
    """What happened to each replica, and where their logs are."""

    ok: bool
    outcome: str  # succeeded | failed | timeout | cancelled
    exit_codes: dict[str, int | None]
    failed_role: str | None
    message: str
    logs: dict[str, Path]
    tf_configs: dict[str, str]
    wall_seconds: float
    hidden_lines: int = 0  # lines the view left out (they are in the log files)

    def log_text(self, role: str) -> str:
        return self.logs[role].read_text(encoding="utf-8", errors="replace")

    def account(self, next_step: str = "") -> str:
        """What happened, in a few lines: each replica's exit, why, and where its log is.

        For an expected failure (a simulated preemption) this replaces the tracebacks a
        replica left in its log: the cause is the first failing replica's own last words.
        """
        from labkit.i18n import gettext as tr

        lines = [
            tr("outcome: {outcome} in {seconds} s").format(
                outcome=outcome_words(self.outcome), seconds=f"{self.wall_seconds:.0f}"
            )
        ]
        for role, code in self.exit_codes.items():
            ended = supervisor.describe_exit(code, tr)
            if role == self.failed_role:
                why = last_words(self.log_text(role))
                first = (
                    tr("{role}: {ended}, failed first: {why}")
                    if why
                    else tr("{role}: {ended}, failed first")
                )
                lines.append(first.format(role=role, ended=ended, why=why))
            elif code is not None and code < 0 and not self.ok:
                lines.append(
                    tr(
                        "{role}: {ended}: stopped by the supervisor, since a multi-worker "
                        "cluster cannot go on without every replica"
                    ).format(role=role, ended=ended)
                )
            elif code and self.failed_role:
                why = last_words(self.log_text(role))[:120]
                lines.append(
                    tr("{role}: {ended} after losing {failed}").format(
                        role=role, ended=ended, failed=self.failed_role
                    )
                    + (f" ({why})" if why else "")
                )
            else:
                lines.append(f"{role}: {ended}")
        if next_step:
            lines.append(tr("next: {step}").format(step=next_step))
        folder = next(iter(self.logs.values())).parent if self.logs else None
        names = ", ".join(path.name for path in self.logs.values())
        lines.append(
            tr("full logs ({count} more lines): {folder}/ {names}").format(
                count=self.hidden_lines, folder=folder, names=names
            )
        )
        return "\n".join(lines)


def outcome_words(outcome: str) -> str:
    """A `ClusterResult.outcome` in the edition's words."""
    from labkit.i18n import gettext as tr

    words = {
        "succeeded": tr("succeeded"),
        "failed": tr("failed"),
        "timeout": tr("timed out"),
        "cancelled": tr("cancelled"),
    }
    return words.get(outcome, outcome)


def last_words(log: str) -> str:
    """The line that says why a replica stopped: the trainer's FAULT or error line, else the
    last exception line of a traceback (``SomeError: ...``), else ''."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in reversed(lines):
        if "FAULT INJECTED" in line or line.startswith("[trainer] error:"):
            return line.removeprefix("[trainer] ")
    for line in reversed(lines):
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*", line):
            return line[:200]
    return ""


def default_logs_dir() -> Path:
    return lab_home() / "cluster" / time.strftime("%Y%m%d-%H%M%S")


def run_cluster(
    command: Sequence[str],
    workers: int,
    chief: bool = False,
    logs_dir: str | Path | None = None,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    *,
    base_output_dir: str | None = None,
    sink: supervisor.Sink | None = None,
    grace_seconds: float = supervisor.DEFAULT_GRACE_SECONDS,
    view: str = "quiet",
) -> ClusterResult:
    """Start ``workers`` replicas of ``command`` and wait for them (see the module doc).

    ``env`` is merged over this process's environment (minus any TF_CONFIG of its own).
    ``base_output_dir`` also sets AIP_MODEL_DIR / AIP_CHECKPOINT_DIR / AIP_TENSORBOARD_LOG_DIR
    as Vertex would for that base output directory. Logs: ``<logs_dir>/<role>.log``, every
    line; ``view`` (`VIEWS`) says which lines reach ``sink`` (stdout by default).
    """
    if not command:
        raise ValueError("no command given: put it after `--`, e.g. `-- python -m trainer.task`")
    if timeout is not None and timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout}")
    logs = Path(logs_dir) if logs_dir is not None else default_logs_dir()
    shown = supervisor.FilteredSink(sink or supervisor.print_sink(), shows(view))
    counts = vertex_env.cluster_counts(workers, chief)
    layout = vertex_env.plan_cluster(counts)
    job = {"display_name": "labkit-cluster", "worker_pool_specs": _pool_summary(counts, command)}
    base_env = vertex_env.without_vertex_variables(os.environ)
    base_env.update(env or {})
    base_env.setdefault("PYTHONUNBUFFERED", "1")  # stream the replicas' output as it comes
    base_env.update(supervisor.co_located_thread_env(len(layout.replicas), base_env))
    launches = []
    for replica in layout.replicas:
        replica_vars = vertex_env.replica_env(
            layout, replica, job=job, base_output_dir=base_output_dir
        )
        launches.append(
            supervisor.ReplicaLaunch(
                role=replica.role,
                argv=supervisor.with_current_python(command),
                env={**base_env, **replica_vars},
                log_path=logs / f"{replica.role}.log",
                cwd=str(cwd) if cwd is not None else None,
                header=f"# {replica.role} ({replica.pool_name}) TF_CONFIG={replica_vars['TF_CONFIG']}",
            )
        )
    try:
        result = supervisor.supervise(
            launches,
            sink=shown,
            timeout=timeout,
            grace_seconds=grace_seconds,
            # recorded for `labkit cleanup` / `kill_leftovers` should this launcher be SIGKILLed
            on_started=lambda pids: supervisor.record_processes(logs, pids),
        )
    finally:
        (logs / supervisor.PROCESS_RECORD).unlink(missing_ok=True)
    return ClusterResult(
        ok=result.ok,
        outcome=result.outcome,
        exit_codes=result.exit_codes,
        failed_role=result.failed_role,
        message=result.message,
        logs={launch.role: launch.log_path for launch in launches},
        tf_configs={launch.role: launch.env["TF_CONFIG"] for launch in launches},
        wall_seconds=result.wall_seconds,
        hidden_lines=shown.hidden,
    )


def _pool_summary(counts: Sequence[int], command: Sequence[str]) -> list[dict]:
    """The ``job`` field of TF_CONFIG: the pools as a job spec would list them."""
    return [
        {"replica_count": count, "container_spec": {"command": list(command)}} if count else {}
        for count in counts
    ]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m labkit cluster",
        description="Run COMMAND as N local replicas with the TF_CONFIG Vertex AI would set.",
        epilog="example: python -m labkit cluster --workers 2 --chief --base-output-dir runs/mwms "
        "-- python -m trainer.task",
    )
    parser.add_argument("--workers", type=int, required=True, help="total number of replicas")
    parser.add_argument(
        "--chief",
        action="store_true",
        help="make the first replica pool 0's `chief` (as on Vertex); default: N `worker`s",
    )
    parser.add_argument(
        "--logs", type=Path, help="folder for <role>.log (default: LAB_HOME/cluster/<time>)"
    )
    parser.add_argument("--timeout", type=float, help="stop every replica after S seconds")
    parser.add_argument(
        "--show",
        choices=VIEWS,
        default="quiet",
        help="which output lines to print (log files keep all): all, quiet (no TensorFlow C++ "
        "logging; the default) or trainer (the trainer's lines and Keras progress)",
    )
    parser.add_argument(
        "--base-output-dir",
        help="set AIP_MODEL_DIR, AIP_CHECKPOINT_DIR, AIP_TENSORBOARD_LOG_DIR under this folder",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    return parser


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        parser.error("no COMMAND given: add it after `--`, e.g. `-- python -m trainer.task`")
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    if args.timeout is not None and args.timeout <= 0:
        parser.error(f"--timeout must be a positive number of seconds, got {args.timeout}")
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)  # `kill` stops the replicas too
    logs_dir = args.logs or default_logs_dir()
    try:
        result = run_cluster(
            command,
            workers=args.workers,
            chief=args.chief,
            logs_dir=logs_dir,
            timeout=args.timeout,
            base_output_dir=args.base_output_dir,
            view=args.show,
        )
    except KeyboardInterrupt:
        print(f"[cluster] interrupted: stopped every replica; logs in {logs_dir}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except supervisor.ReplicaStartError as err:
        print(f"[cluster] {err}", file=sys.stderr)
        return 2
    finally:
        signal.signal(signal.SIGTERM, previous)
    codes = ", ".join(f"{role}={code}" for role, code in result.exit_codes.items())
    if result.ok:
        print(
            f"[cluster] all {args.workers} replicas succeeded in {result.wall_seconds:.1f} s; logs in {logs_dir}"
        )
        return 0
    print(f"[cluster] {result.outcome}: {result.message}", file=sys.stderr)
    print(f"[cluster] exit codes: {codes}; logs in {logs_dir}", file=sys.stderr)
    return EXIT_TIMEOUT if result.outcome == "timeout" else 1
