"""What Vertex AI does when a replica of a running CustomJob exits, as the local service models it.

Sources (read with the kit's `search` tool, December 2026):

- "Understand the custom training service" (cloud.google.com/vertex-ai/docs/training/
  understanding-training-service), section "Restart workers during the training job":
  Vertex restarts a worker *with the same hostname*, alone, when its VM undergoes maintenance
  (on another VM) or when it exits non-zero (immediately, in the same VM). A worker that fails
  with one of the page's "common errors" is a *permanent* error: Vertex shuts the whole job
  down. Any other non-zero exit is *non-permanent*: the restarted worker runs on, up to
  **5 restarts per worker**; if it fails again after that, Vertex **retries the whole job up to
  3 times** before it fails the job.
- The ``Scheduling`` reference (v1 REST / client libraries): ``restartJobOnWorkerRestart``
  "restarts the entire CustomJob if a worker gets restarted. This feature can be used by
  distributed training jobs that are not resilient to workers leaving and joining a job";
  ``disableRetries`` "indicates if the job should retry for internal errors after the job
  starts running. If true, overrides restartJobOnWorkerRestart to false".

The local reading of those rules (the stored copy of the page did not show its list of common
errors, so the split below is the kit's, stated here and in the job log):

- exit status 1 or 2 (Python's status for an uncaught exception or a usage error: an error in
  the training code, which a restart would only repeat) -> **permanent**: the job fails.
- any other non-zero exit, or a kill by a signal (a preempted or restarted VM, the
  out-of-memory killer) -> **non-permanent**: the replica is restarted alone, in place (same
  role, same TF_CONFIG and ports), at most `REPLICA_RESTART_LIMIT` times; its next failure
  retries the whole job, at most `JOB_RETRY_LIMIT` times, then the job fails.
- ``restartJobOnWorkerRestart``: every non-permanent replica exit restarts *every* replica
  (a new attempt; the checkpoint folder is kept, so BackupAndRestore resumes). The reference
  gives no count; locally a job restarts at most `REPLICA_RESTART_LIMIT` times this way.
- ``disableRetries``: no whole-job retries, and ``restartJobOnWorkerRestart`` is off.

A MultiWorkerMirroredStrategy cluster cannot take one worker back: its peers wait in a
collective or fail when the worker leaves. A replica restarted alone in a multi-replica job
without the flag is therefore noted, and if the job then fails, or makes no progress for
`LONE_RESTART_STALL_S` (on Vertex it would wait until ``scheduling.timeout``, 7 days by
default), the error names ``restartJobOnWorkerRestart`` as the fix.
"""

from __future__ import annotations

import dataclasses
import os
import signal
from typing import Any

REPLICA_RESTART_LIMIT = 5  # restarts per worker in place (the page above)
JOB_RETRY_LIMIT = 3  # whole-job retries after a worker failed past its restarts (the page above)
PERMANENT_EXIT_CODES = frozenset({1, 2})  # the kit's reading of "common errors" (see above)
LONE_RESTART_STALL_S = float(os.environ.get("LABKIT_LONE_RESTART_STALL_S", "180"))

FLAG_FIX = (
    "set scheduling.restartJobOnWorkerRestart=true (SDK: CustomJob.run(..., "
    "restart_job_on_worker_restart=True); the kit's specs.JobRequest.run_kwargs() does) so "
    "Vertex restarts every replica and BackupAndRestore resumes from the last backup"
)


@dataclasses.dataclass(frozen=True)
class RestartPolicy:
    """The restart rules one job asked for in ``jobSpec.scheduling``."""

    restart_job_on_worker_restart: bool
    disable_retries: bool

    @classmethod
    def from_scheduling(cls, scheduling: dict[str, Any] | None) -> RestartPolicy:
        scheduling = scheduling or {}
        disable = bool(scheduling.get("disableRetries") or scheduling.get("disable_retries"))
        flag = bool(
            scheduling.get("restartJobOnWorkerRestart")
            or scheduling.get("restart_job_on_worker_restart")
        )
        return cls(restart_job_on_worker_restart=flag and not disable, disable_retries=disable)

    @property
    def job_retries(self) -> int:
        return 0 if self.disable_retries else JOB_RETRY_LIMIT

    def describe(self) -> str:
        if self.restart_job_on_worker_restart:
            return (
                "restartJobOnWorkerRestart: a replica that exits non-permanently restarts every "
                f"replica (at most {REPLICA_RESTART_LIMIT} times)"
            )
        retries = (
            "no job retries (disableRetries)"
            if self.disable_retries
            else f"then the whole job is retried up to {JOB_RETRY_LIMIT} times"
        )
        return (
            "a replica that exits non-permanently is restarted alone, in place, up to "
            f"{REPLICA_RESTART_LIMIT} times; {retries}"
        )


def is_permanent(returncode: int | None) -> bool:
    """True for an exit that fails the job at once (see the module docstring)."""
    return returncode is not None and returncode in PERMANENT_EXIT_CODES


def exit_kind(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name} (non-permanent: a restarted or preempted VM)"
    if is_permanent(returncode):
        return f"exit status {returncode} (permanent: an error in the training code)"
    return f"exit status {returncode} (non-permanent)"


def lone_restart_note(replicas: list[str]) -> str:
    """The sentence a failed multi-replica job gets after a replica was restarted alone."""
    return (
        f" Before that, {', '.join(replicas)} had been restarted alone, in place (what Vertex "
        "does with a replica that exits non-zero when the job does not set "
        "restartJobOnWorkerRestart); a MultiWorkerMirroredStrategy cluster cannot take one "
        f"worker back. Fix: {FLAG_FIX}."
    )
