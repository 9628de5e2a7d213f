"""How many replicas the local service runs at once; the other jobs wait in JOB_STATE_QUEUED.

Why: every replica is a full TensorFlow process. Twenty jobs created at once would start
forty trainings on a two-core machine, each slower than the lot run one after another, and
the machine would swap. So the service admits jobs first come, first served while the
replicas already running plus the new job's replicas fit under a limit of replicas; a job
larger than the limit runs alone (when nothing else runs), so any valid job still runs.

The limit: ``LABKIT_MAX_RUNNING_REPLICAS`` (an integer >= 1), by default the number of CPU
cores (``os.cpu_count()``, at least 2): one replica per core, so the course's 2-worker job
runs on a 2-core machine and nothing else beside it.

A waiting job is ``JOB_STATE_QUEUED`` ("The job has been just created or resumed and
processing has not yet begun"; its pipeline ``PIPELINE_STATE_QUEUED``), then
``JOB_STATE_PENDING`` ("The service is preparing to run the job") once admitted, as in the
``JobState`` enum of the Vertex AI v1 API reference (docs.cloud.google.com, Vertex AI V1 API,
JobState; read with the kit's `search` tool, December 2026).
"""

from __future__ import annotations

import os
import threading

LIMIT_VARIABLE = "LABKIT_MAX_RUNNING_REPLICAS"


def default_limit(environ: dict[str, str] | None = None) -> int:
    """The replica limit from ``LABKIT_MAX_RUNNING_REPLICAS``, else the core count (>= 2)."""
    env = os.environ if environ is None else environ
    raw = env.get(LIMIT_VARIABLE, "").strip()
    if raw:
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value < 1:
            raise ValueError(
                f"{LIMIT_VARIABLE}={raw!r}: expected a whole number of replicas >= 1, e.g. "
                f"{LIMIT_VARIABLE}={os.cpu_count() or 2}"
            )
        return value
    return max(2, os.cpu_count() or 2)


class Admission:
    """First come, first served admission of jobs by their replica count."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.running = 0  # replicas of admitted jobs
        self._queue: list[str] = []
        self._cond = threading.Condition()

    def enqueue(self, name: str) -> None:
        """Take the job's place in the line (at creation, so the order is creation order)."""
        with self._cond:
            if name not in self._queue:
                self._queue.append(name)

    def _fits(self, name: str, replicas: int) -> bool:
        return (
            bool(self._queue)
            and self._queue[0] == name
            and (self.running == 0 or self.running + replicas <= self.limit)
        )

    def would_wait(self, name: str, replicas: int) -> bool:
        with self._cond:
            return not self._fits(name, replicas)

    def admit(self, name: str, replicas: int, give_up: threading.Event) -> bool:
        """Wait until the job may start its ``replicas``; False when ``give_up`` was set
        first (cancelled, deleted, or the service stops). Its place in line is left."""
        self.enqueue(name)
        with self._cond:
            while not self._fits(name, replicas):
                if give_up.is_set():
                    self._queue.remove(name)
                    self._cond.notify_all()
                    return False
                self._cond.wait(timeout=0.2)
            self._queue.pop(0)
            self.running += replicas
            self._cond.notify_all()
            return True

    def release(self, replicas: int) -> None:
        """An admitted job ended: let the next ones in."""
        with self._cond:
            self.running = max(0, self.running - replicas)
            self._cond.notify_all()

    def leave(self, name: str) -> None:
        """A job that will never ask for admission (failed at set-up) leaves the line."""
        with self._cond:
            if name in self._queue:
                self._queue.remove(name)
                self._cond.notify_all()
