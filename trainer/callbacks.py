"""Callbacks the job adds to `fit`: throughput, readable progress lines, and a fault hook.

The fault hook stands for a preempted VM in demos and tests: with `LAB_FAIL_AFTER_EPOCH=K`
the chosen replica (`LAB_FAIL_TASK`, default worker:0, or `local` without a cluster) exits
with code 3 after epoch K, once per checkpoint dir, so the restarted job resumes from the
backup instead of failing again.
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
    """Training images/s per epoch (validation excluded), from wall time around the train steps."""

    def __init__(self, images_per_epoch: int) -> None:
        super().__init__()
        self.images_per_epoch = images_per_epoch
        self.epoch_rates: list[float] = []
        self._start = 0.0
        self._stopped: float | None = None

    def on_epoch_begin(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        self._start, self._stopped = time.perf_counter(), None

    def on_test_begin(self, logs: Mapping[str, Any] | None = None) -> None:
        if self._stopped is None:
            self._stopped = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        end = self._stopped if self._stopped is not None else time.perf_counter()
        self.epoch_rates.append(self.images_per_epoch / max(end - self._start, 1e-9))

    @property
    def images_per_sec(self) -> float | None:
        """Median over epochs after the first (which pays tracing and start-up), else the first."""
        rates = self.epoch_rates[1:] or self.epoch_rates
        return statistics.median(rates) if rates else None


class Progress(keras.callbacks.Callback):
    """`[trainer] epoch 2/3 loss=... accuracy=...` lines, and a note when resuming from a backup."""

    def __init__(self, total_epochs: int, task: str) -> None:
        super().__init__()
        self.total_epochs = total_epochs
        self.task = task
        self.first_epoch: int | None = None

    def on_epoch_begin(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        if self.first_epoch is None:
            self.first_epoch = epoch
            if epoch > 0:
                log(f"task={self.task} resumed from backup at epoch {epoch}")

    def on_epoch_end(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        shown = " ".join(f"{k}={v:.4f}" for k, v in sorted((logs or {}).items()))
        log(f"task={self.task} epoch {epoch + 1}/{self.total_epochs} {shown}")


class FaultInjection(keras.callbacks.Callback):
    """Exit this replica after epoch K once (see module docstring)."""

    def __init__(self, fail_after_epoch: int, task: str, marker_dir: str) -> None:
        super().__init__()
        self.fail_after_epoch = fail_after_epoch
        self.task = task
        self.marker = posixpath.join(marker_dir, f"fault-injected-{self.task.replace(':', '-')}")

    def on_epoch_end(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        if epoch + 1 != self.fail_after_epoch or tf.io.gfile.exists(self.marker):
            return
        tf.io.gfile.makedirs(posixpath.dirname(self.marker))
        with tf.io.gfile.GFile(self.marker, "w") as f:
            f.write(f"{time.time()}\n")
        log(
            f"task={self.task} FAULT INJECTED: exiting after epoch {epoch + 1} (simulated preemption)"
        )
        time.sleep(2)  # let the other replicas finish writing this epoch's backup
        sys.stdout.flush()
        os._exit(FAULT_EXIT_CODE)


def fault_injection_from_env(
    task: str, default_task: str, marker_dir: str, env: Mapping[str, str] | None = None
) -> FaultInjection | None:
    """The fault hook when `LAB_FAIL_AFTER_EPOCH` is set and names this replica, else None."""
    env = os.environ if env is None else env
    after = env.get("LAB_FAIL_AFTER_EPOCH")
    if not after:
        return None
    target = env.get("LAB_FAIL_TASK") or default_task
    return FaultInjection(int(after), task, marker_dir) if target == task else None
