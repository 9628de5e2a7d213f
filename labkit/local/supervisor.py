"""Run a group of replica processes as one unit: all succeed, or all stop.

A multi-worker job is only useful while every replica runs: when one dies, the others
block in their next collective forever. `supervise` is the single place (shared by
`labkit cluster` and the local Vertex AI service) that starts the replicas, streams their
output with a role prefix to a sink and to one log file per replica, and on the first
failure, a timeout, a cancel or Ctrl-C stops every other replica: SIGTERM to its process
group, then SIGKILL after a grace period. Each replica gets its own session and process
group, so whatever it spawns is stopped with it and nothing outlives `supervise`.

A supervisor that is itself SIGKILLed cannot stop anything, so on Linux each replica is
started with a parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGKILL)`` in the child between
fork and exec; it survives the exec of the replica's command): when the thread that started
it dies with its process, the kernel kills the replica. The replica is the direct child
(`subprocess.Popen` forks and execs the command itself, no shell in between); what a replica
forks in turn is reached through its process group, whose leader pid the caller records
(``on_started``) for `labkit emulator stop` and cleanup.

A replica's peak memory (``ru_maxrss`` from ``wait4``, the kernel's high-water mark of its
resident set, also for a replica killed by SIGKILL) is kept in `ReplicaOutcome`, so an
out-of-memory kill can be named with the memory it reached.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from labkit.cloud.paths import write_json_atomic

if sys.platform.startswith("linux"):
    import ctypes

    _LIBC = ctypes.CDLL(None, use_errno=True)
    _PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
else:  # pragma: no cover - the kit runs on Linux (Workbench, CI)
    _LIBC = None

OUTCOMES = ("succeeded", "failed", "timeout", "cancelled")
POLL_SECONDS = 0.05
DEFAULT_GRACE_SECONDS = 5.0
DEFAULT_TAIL_LINES = 20

Sink = Callable[[str], None]

# TensorFlow's C++ logging (absl format, and the older timestamped one), the absl pre-init
# notice and the CPU-flags hint. TF_CPP_MIN_LOG_LEVEL does not silence the lines logged
# before absl is initialised (cudart_stub, cuInit), so streams filter them here; the
# replica's log file keeps every line.
CPP_LOG_LINE = re.compile(
    r"^(?:[IWEF]\d{4} [\d:.]+\s+\d+ \S+:\d+\]"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] \S+:\d+\]"
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called"
    r"|To enable the following instructions: .*rebuild TensorFlow)"
)
TRACEBACK_LINE = re.compile(r"^Traceback \(most recent call last\):")


def is_cpp_log_line(line: str) -> bool:
    """Whether a line of a replica's output is TensorFlow C++ logging (see `CPP_LOG_LINE`)."""
    return bool(CPP_LOG_LINE.match(line))


class FilteredSink:
    """A sink that passes on only the lines ``keep`` accepts and counts the others.

    The notebooks show each replica's own lines this way while its log file keeps all.
    """

    def __init__(self, sink: Sink, keep: Callable[[str], bool]) -> None:
        self.sink = sink
        self.keep = keep
        self.shown = 0
        self.hidden = 0
        self._lock = threading.Lock()

    def __call__(self, line: str) -> None:
        role, sep, text = line.partition("] ")
        keep = self.keep(text if sep and role.startswith("[") else line)
        with self._lock:
            if keep:
                self.shown += 1
            else:
                self.hidden += 1
        if keep:
            self.sink(line)


THREAD_VARIABLES = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")


def co_located_thread_env(
    replicas: int, environ: Mapping[str, str], cpus: int | None = None
) -> dict[str, str]:
    """TensorFlow's intra-op pool size for ``replicas`` processes sharing this machine's cores.

    On Vertex AI each replica has a machine of its own; here they share one, and each
    TensorFlow process sizes its op pool to every core: 2 replicas on 2 cores then run
    2 x 2 compute threads and lose about a third of their speed to oversubscription
    (bench/: 0.67x one process without the split, 0.97-1.04x with it). Each gets its share
    of the cores, at least 1. The inter-op pool keeps its default: at 1 thread, deleting
    the training iterator at the end of `fit` waited 10-30 s more (measured, 2 workers).
    Nothing when a single replica runs or when ``environ`` sets either variable (the user's
    choice wins).
    """
    if replicas <= 1 or any(name in environ for name in THREAD_VARIABLES):
        return {}
    return {"TF_NUM_INTRAOP_THREADS": str(max(1, (cpus or os.cpu_count() or 1) // replicas))}


@dataclasses.dataclass
class ReplicaLaunch:
    """What to start for one replica. ``env`` is its complete environment."""

    role: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    cwd: str | None = None
    header: str = ""  # written to the log file (not the sink) before the first output line


@dataclasses.dataclass
class ReplicaOutcome:
    role: str
    pid: int
    log_path: Path
    returncode: int | None = None  # negative: killed by that signal number
    stopped: bool = False  # True when the supervisor stopped it (it did not exit by itself)
    tail: list[str] = dataclasses.field(default_factory=list)
    peak_rss_bytes: int | None = None  # ru_maxrss of the exited process (None: not known)


def die_with_parent() -> None:
    """Run in the child between fork and exec: SIGKILL this process when its parent dies.

    Only an async-signal-safe system call, so it is safe as a ``preexec_fn`` in a threaded
    parent. The signal is delivered when the *thread* that forked the child exits, so a
    replica must be started by a thread that lives as long as it (`supervise`'s caller).
    """
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() == 1:  # the parent died before prctl took effect
            os._exit(137)


class _Process(subprocess.Popen):  # type: ignore[type-arg]
    """`subprocess.Popen` that reaps its child with ``wait4`` and keeps the child's peak RSS.

    Only this process's supervisor thread polls or waits for its child."""

    peak_rss_bytes: int | None = None

    def _reaped(self, pid: int, usage: Any) -> None:
        if pid == self.pid:
            self.peak_rss_bytes = usage.ru_maxrss * 1024  # Linux reports KiB

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status, usage = os.wait4(self.pid, os.WNOHANG)
            except ChildProcessError:
                return super().poll()
            self._reaped(pid, usage)
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def _try_wait(self, wait_flags: int) -> tuple[int, int]:  # CPython's hook used by wait()
        try:
            pid, status, usage = os.wait4(self.pid, wait_flags)
        except ChildProcessError:
            return (self.pid, 0)  # as Popen: the child is gone, its status unknown
        self._reaped(pid, usage)
        return (pid, status)


PROCESS_RECORD = "processes.json"


def record_processes(folder: Path, pids: Mapping[str, int]) -> None:
    """Write ``folder/processes.json``: each live replica's pid (its process group's id) and
    start time, atomically (temp file + rename), so `labkit emulator stop`, cleanup or a
    restarted service can kill what a SIGKILLed parent left (`kill_recorded`), and never a
    later process that reused the pid."""
    import psutil

    records = {}
    for role, pid in pids.items():
        try:
            records[role] = {"pid": pid, "create_time": psutil.Process(pid).create_time()}
        except psutil.NoSuchProcess:
            continue
    write_json_atomic(folder / PROCESS_RECORD, records)


def kill_recorded(folder: Path) -> list[int]:
    """SIGKILL the process groups recorded in ``folder/processes.json`` that are still those
    processes (same start time); the record is removed. Returns the pids killed."""
    import json

    import psutil

    path = folder / PROCESS_RECORD
    try:
        records = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    killed = []
    for record in records.values():
        pid = int(record["pid"])
        try:
            process = psutil.Process(pid)
            same = abs(process.create_time() - float(record["create_time"])) < 0.01
            dead = process.status() == psutil.STATUS_ZOMBIE  # exited, not yet reaped
        except psutil.NoSuchProcess:
            continue
        if same:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)  # also what a dead leader's group still runs
                if not dead:
                    killed.append(pid)
    path.unlink(missing_ok=True)
    return killed


def format_bytes(n: int | None) -> str:
    """``1.5 GiB`` style; "unknown" for None."""
    if n is None:
        return "unknown"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


@dataclasses.dataclass
class SupervisorResult:
    outcome: str  # one of OUTCOMES
    replicas: list[ReplicaOutcome]
    failed_role: str | None
    message: str
    wall_seconds: float

    @property
    def ok(self) -> bool:
        return self.outcome == "succeeded"

    @property
    def exit_codes(self) -> dict[str, int | None]:
        return {r.role: r.returncode for r in self.replicas}


class ReplicaStartError(RuntimeError):
    """A replica's command could not be started (missing program, bad working directory)."""


class _Replica:
    """A running replica: its process, its log file and the thread copying its output."""

    def __init__(self, launch: ReplicaLaunch, sink: Sink, tail_lines: int) -> None:
        self.launch = launch
        self.tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
        launch.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log: TextIO = open(launch.log_path, "a", encoding="utf-8")  # noqa: SIM115
        if launch.header:
            self.log.write(launch.header.rstrip("\n") + "\n")
            self.log.flush()
        try:
            self.proc = _Process(
                launch.argv,
                env=launch.env,
                cwd=launch.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: killpg reaches its children too
                preexec_fn=die_with_parent,  # noqa: PLW1509 - one prctl call, async-signal-safe
            )
        except OSError as err:
            self.log.write(f"cannot start: {err}\n")
            self.log.close()
            raise ReplicaStartError(
                f"cannot start replica {launch.role}: {err} (command: {' '.join(launch.argv)}, "
                f"working directory: {launch.cwd or os.getcwd()})"
            ) from err
        self.stopped = False
        self.exited_at: float | None = None
        self.reader = threading.Thread(
            target=self._copy_output, args=(sink,), name=f"log-{launch.role}", daemon=True
        )
        self.reader.start()

    def _copy_output(self, sink: Sink) -> None:
        assert self.proc.stdout is not None
        prefix = f"[{self.launch.role}] "
        for raw in iter(self.proc.stdout.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            self.tail.append(line)
            self.log.write(line + "\n")
            self.log.flush()
            sink(prefix + line)
        self.proc.stdout.close()

    def signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):  # group gone already
            os.killpg(self.proc.pid, sig)

    def finish(self) -> None:
        self.reader.join(timeout=5)
        self.log.close()

    def outcome(self) -> ReplicaOutcome:
        return ReplicaOutcome(
            role=self.launch.role,
            pid=self.proc.pid,
            log_path=self.launch.log_path,
            returncode=self.proc.returncode,
            stopped=self.stopped,
            tail=list(self.tail),
            peak_rss_bytes=self.proc.peak_rss_bytes,
        )


PYTHON_NAMES = frozenset(
    {
        "python",
        "python3",
        f"python3.{sys.version_info.minor}",
        "/usr/bin/python",
        "/usr/bin/python3",
        "/usr/local/bin/python",
        "/usr/local/bin/python3",
    }
)


def with_current_python(argv: Sequence[str]) -> list[str]:
    """``argv`` with a leading ``python`` replaced by this interpreter.

    Replicas must run in the kit's environment (its TensorFlow, its editable packages)
    even when the virtualenv is not activated, as in `make lab` or a Jupyter kernel.
    """
    argv = list(argv)
    if argv and argv[0] in PYTHON_NAMES:
        argv[0] = sys.executable
    return argv


def print_sink(stream: TextIO | None = None) -> Sink:
    """A sink that prints lines to ``stream`` (stdout by default), one writer at a time."""
    lock = threading.Lock()

    def write(line: str) -> None:
        with lock:
            out = stream or sys.stdout
            out.write(line + "\n")
            out.flush()

    return write


def _stop_replicas(replicas: Iterable[_Replica], grace_seconds: float) -> None:
    """SIGTERM every live replica's group, wait ``grace_seconds``, then SIGKILL the rest."""
    live = [r for r in replicas if r.proc.poll() is None]
    for r in live:
        r.stopped = True
        r.signal_group(signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline and any(r.proc.poll() is None for r in live):
        time.sleep(POLL_SECONDS)
    for r in live:
        if r.proc.poll() is None:
            r.signal_group(signal.SIGKILL)
            r.proc.wait()


def supervise(
    launches: Sequence[ReplicaLaunch],
    *,
    sink: Sink | None = None,
    timeout: float | None = None,
    cancel: threading.Event | None = None,
    primary_roles: Iterable[str] | None = None,
    linger_seconds: float = 60.0,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
    tail_lines: int = DEFAULT_TAIL_LINES,
    on_started: Callable[[Mapping[str, int]], None] | None = None,
) -> SupervisorResult:
    """Start every launch, wait for all of them, and stop them all on the first problem.

    - Any replica exiting non-zero stops the rest and makes the outcome ``failed``; the
      message names that replica and ends with the tail of its log.
    - ``timeout`` (seconds, for the whole group) -> ``timeout``; ``cancel`` set -> ``cancelled``.
    - ``primary_roles``: Vertex ends a job when its primary replica (pool 0) finishes, even
      if parameter servers or evaluators would run on; after all primary roles exit 0 the
      rest get ``linger_seconds`` to finish and are then stopped. None: all must exit.
    - Ctrl-C (or any exception) stops everything and re-raises.
    ``on_started`` receives ``{role: pid}`` once all are started (the emulator records them).
    """
    if not launches:
        raise ValueError("supervise needs at least one replica to launch")
    roles = [launch.role for launch in launches]
    if len(set(roles)) != len(roles):
        raise ValueError(f"replica roles must be unique, got {roles}")
    primary = set(primary_roles or ())
    if primary - set(roles):
        raise ValueError(f"primary roles {sorted(primary - set(roles))} are not replicas")

    write = sink or print_sink()
    lock = threading.Lock()

    def locked_sink(line: str) -> None:
        with lock:
            write(line)

    started = time.monotonic()
    running: list[_Replica] = []
    outcome, failed_role, message = "succeeded", None, ""
    try:
        for launch in launches:
            running.append(_Replica(launch, locked_sink, tail_lines))
        if on_started:
            on_started({r.launch.role: r.proc.pid for r in running})
        linger_deadline: float | None = None
        while True:
            now = time.monotonic()
            for r in running:
                if r.exited_at is None and r.proc.poll() is not None:
                    r.exited_at = now
            failed = sorted(
                (r for r in running if r.exited_at is not None and r.proc.returncode != 0),
                key=lambda r: r.exited_at or 0.0,
            )
            if failed:
                culprit = failed[0]
                outcome, failed_role = "failed", culprit.launch.role
                break
            if all(r.exited_at is not None for r in running):
                break
            primary_done = primary and all(
                r.exited_at is not None for r in running if r.launch.role in primary
            )
            if primary_done and linger_deadline is None:
                linger_deadline = now + linger_seconds
            if linger_deadline is not None and now >= linger_deadline:
                break  # the primary finished: Vertex ends the job; stop the rest below
            if timeout is not None and now - started >= timeout:
                outcome = "timeout"
                message = f"timed out after {timeout:g} s; stopped every replica"
                break
            if cancel is not None and cancel.is_set():
                outcome = "cancelled"
                message = "cancelled; stopped every replica"
                break
            time.sleep(POLL_SECONDS)
        _stop_replicas(running, grace_seconds)
    except BaseException:
        _stop_replicas(running, grace_seconds)
        raise
    finally:
        for r in running:
            r.signal_group(signal.SIGKILL)  # leftovers of replicas that exited by themselves
            r.finish()

    outcomes = [r.outcome() for r in running]
    if outcome == "failed":
        culprit_outcome = next(o for o in outcomes if o.role == failed_role)
        message = failure_message(culprit_outcome)
    return SupervisorResult(
        outcome=outcome,
        replicas=outcomes,
        failed_role=failed_role,
        message=message,
        wall_seconds=time.monotonic() - started,
    )


def describe_exit(returncode: int | None, tr: Callable[[str], str] = str) -> str:
    """How a replica ended, in words. ``tr`` translates the phrase (`labkit.i18n.gettext`
    for what a notebook shows); the service's job logs keep Vertex's English."""
    if returncode is None:
        return tr("did not exit")
    if returncode < 0:
        try:
            return tr("was killed by {signal}").format(signal=signal.Signals(-returncode).name)
        except ValueError:
            return tr("was killed by signal {number}").format(number=-returncode)
    return tr("exited with status {code}").format(code=returncode)


def failure_message(replica: ReplicaOutcome) -> str:
    """Names the replica and its exit, and ends with the tail of its log."""
    tail = "\n".join(replica.tail) or "(no output)"
    return (
        f"replica {replica.role} {describe_exit(replica.returncode)} "
        f"(peak memory {format_bytes(replica.peak_rss_bytes)}); "
        f"log: {replica.log_path}\n--- last lines of {replica.role} ---\n{tail}"
    )
