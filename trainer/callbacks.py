"""Callbacks the job adds to `fit`: throughput, readable progress lines, and a fault hook.

The fault hook stands for a preempted VM in demos and tests: with `LAB_FAIL_AT_STEP=N` the
chosen replica (`LAB_FAIL_TASK`, default worker:0, or `local` without a cluster) exits with
code 3 right after training step N (counted over all epochs), or with `LAB_FAIL_AFTER_EPOCH=K`
after epoch K; once per checkpoint dir, so the restarted job resumes from the backup instead
of failing again. By step, the fault lands mid-training whatever the epochs and steps are;
with `--backup-every-steps N` the backup of step N is there to resume from.
"""

from __future__ import annotations

import os
import posixpath
import statistics
import sys
import time
from collections.abc import Mapping
from typing import Any

import tensorflow as tf
import tf_keras as keras

FAULT_EXIT_CODE = 3


def log(message: str) -> None:
    """One line to stdout, flushed at once so multi-process logs interleave readably."""
    print(f"[trainer] {message}", flush=True)


class Throughput(keras.callbacks.Callback):
    """Training images/s per epoch (validation excluded), from wall time around the train steps.

    Images are counted from the steps actually run, so an epoch resumed mid-way from a
    backup is measured on its own steps, not on a whole epoch's.
    """

    def __init__(self, global_batch: int) -> None:
        super().__init__()
        self.global_batch = global_batch
        self.epoch_rates: list[float] = []
        self.steps_run = 0
        self._epoch_steps = 0
        self._start = 0.0
        self._stopped: float | None = None

    def on_epoch_begin(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        self._start, self._stopped, self._epoch_steps = time.perf_counter(), None, 0

    def on_train_batch_end(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
        self._epoch_steps += 1
        self.steps_run += 1

    def on_test_begin(self, logs: Mapping[str, Any] | None = None) -> None:
        if self._stopped is None:
            self._stopped = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        end = self._stopped if self._stopped is not None else time.perf_counter()
        images = self._epoch_steps * self.global_batch
        self.epoch_rates.append(images / max(end - self._start, 1e-9))

    @property
    def images_per_sec(self) -> float | None:
        """Median over epochs after the first (which pays tracing and start-up), else the first."""
        rates = self.epoch_rates[1:] or self.epoch_rates
        return statistics.median(rates) if rates else None


class Progress(keras.callbacks.Callback):
    """`[trainer] epoch 2/3 loss=... accuracy=...` lines, and a note when resuming from a backup.

    A resume shows in the first step `fit` runs: Keras starts at the epoch and step after the
    backup's, so a first step other than epoch 1, step 1 means the state came from a backup.
    """

    def __init__(self, total_epochs: int, task: str, steps_per_epoch: int) -> None:
        super().__init__()
        self.total_epochs = total_epochs
        self.task = task
        self.steps_per_epoch = steps_per_epoch
        self.first_epoch: int | None = None
        self.first_step: int | None = None  # steps done before this run (over all epochs)
        self._epoch = 0

    @property
    def resumed_from_step(self) -> int | None:
        """Training steps restored from the backup (None when training started afresh)."""
        return self.first_step or None

    def on_epoch_begin(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        self._epoch = int(epoch)
        if self.first_epoch is None:
            self.first_epoch = epoch

    def on_train_batch_begin(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
        if self.first_step is not None:
            return
        batch = int(batch)  # Keras passes the resumed step as a NumPy integer
        self.first_step = self._epoch * self.steps_per_epoch + batch
        if self.first_step:
            log(
                f"task={self.task} resumed from backup at epoch {self._epoch + 1}, step "
                f"{batch + 1}/{self.steps_per_epoch} ({self.first_step} steps done before)"
            )

    def on_epoch_end(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        shown = " ".join(f"{k}={v:.4f}" for k, v in sorted((logs or {}).items()))
        log(f"task={self.task} epoch {epoch + 1}/{self.total_epochs} {shown}")


class FaultInjection(keras.callbacks.Callback):
    """Exit this replica once, after epoch K or after training step N (see module docstring).

    Steps count from the start of training, over epochs (epoch 2, step 3 of 10 is step 13),
    so a restarted job that resumes from step N's backup does not fail again either way.
    ``backup_dir``: where the chief writes its backups; before exiting, the hook waits
    (bounded) until the chief's backup of this step is there, as a preempted VM's cluster
    would have it only when the backup finished first.
    """

    def __init__(
        self,
        task: str,
        marker_dir: str,
        *,
        after_epoch: int | None = None,
        at_step: int | None = None,
        steps_per_epoch: int = 1,
        backup_dir: str | None = None,
        wait_seconds: float = 120.0,
    ) -> None:
        super().__init__()
        if (after_epoch is None) == (at_step is None):
            raise ValueError("give the fault exactly one of after_epoch or at_step")
        self.after_epoch = after_epoch
        self.at_step = at_step
        self.steps_per_epoch = steps_per_epoch
        self.task = task
        self.backup_dir = backup_dir
        self.wait_seconds = wait_seconds
        self.marker = posixpath.join(marker_dir, f"fault-injected-{self.task.replace(':', '-')}")
        self._epoch = 0
        self._state_before: str | None = None

    def on_epoch_begin(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        self._epoch = int(epoch)

    def on_train_batch_begin(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
        if self._fails_after(int(batch)):
            self._state_before = self._backup_state()

    def _fails_after(self, batch: int) -> bool:
        """Whether the fault fires at the end of this batch, or of the epoch it ends."""
        if self.at_step is not None:
            return self._epoch * self.steps_per_epoch + batch + 1 == self.at_step
        return self._epoch + 1 == self.after_epoch and batch + 1 == self.steps_per_epoch

    def on_train_batch_end(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
        step = self._epoch * self.steps_per_epoch + int(batch) + 1
        if self.at_step is not None and step == self.at_step:
            self._fail(f"after step {step} (epoch {self._epoch + 1}, step {batch + 1})")

    def on_epoch_end(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        if self.after_epoch is not None and epoch + 1 == self.after_epoch:
            self._fail(f"after epoch {epoch + 1}")

    def _fail(self, where: str) -> None:
        if tf.io.gfile.exists(self.marker):
            return  # failed once already: this is the restarted job
        tf.io.gfile.makedirs(posixpath.dirname(self.marker))
        with tf.io.gfile.GFile(self.marker, "w") as f:
            f.write(f"{time.time()}\n")
        self._wait_for_backup()
        log(f"task={self.task} FAULT INJECTED: exiting {where} (simulated preemption)")
        sys.stdout.flush()
        os._exit(FAULT_EXIT_CODE)

    def _wait_for_backup(self) -> None:
        """Until the chief's backup state file differs from what it was as this step began.

        Its content, not its mtime: `tf.io.gfile.stat` gives whole seconds, so a backup
        written in the second its step began looked older than the step (a CI flake).
        """
        if self.backup_dir is None:
            time.sleep(2)  # let the other replicas finish writing this epoch's backup
            return
        deadline = time.monotonic() + self.wait_seconds
        while time.monotonic() < deadline:
            state = self._backup_state()
            if state is not None and state != self._state_before:
                return
            time.sleep(0.5)
        log(
            f"task={self.task} no backup appeared in {self.backup_dir} within {self.wait_seconds:g} s"
        )

    def _backup_state(self) -> str | None:
        """The text of the chief's checkpoint state file (it names each new backup), or None."""
        if self.backup_dir is None:
            return None
        # tf_keras's BackupAndRestore keeps the chief's checkpoints in <backup_dir>/chief/.
        state = posixpath.join(self.backup_dir, "chief", "checkpoint")
        try:
            with tf.io.gfile.GFile(state) as f:
                return f.read()
        except tf.errors.NotFoundError:
            return None


def fault_injection_from_env(
    task: str,
    default_task: str,
    marker_dir: str,
    env: Mapping[str, str] | None = None,
    *,
    steps_per_epoch: int = 1,
    backup_dir: str | None = None,
) -> FaultInjection | None:
    """The fault hook when `LAB_FAIL_AT_STEP` or `LAB_FAIL_AFTER_EPOCH` is set and
    `LAB_FAIL_TASK` names this replica, else None."""
    env = os.environ if env is None else env
    at_step, after = env.get("LAB_FAIL_AT_STEP"), env.get("LAB_FAIL_AFTER_EPOCH")
    if not at_step and not after:
        return None
    target = env.get("LAB_FAIL_TASK") or default_task
    if target != task:
        return None
    return FaultInjection(
        task,
        marker_dir,
        at_step=int(at_step) if at_step else None,
        after_epoch=None if at_step else int(after or 0),
        steps_per_epoch=steps_per_epoch,
        backup_dir=backup_dir,
    )
