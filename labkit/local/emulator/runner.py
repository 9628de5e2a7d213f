"""Runs one CustomJob: every replica of every pool as a local process, as Vertex would.

A container pool's replicas run in its image's environment
(`labkit.local.emulator.image_env`: the Dockerfile's base and its RUN pip installs, built once
and cached), with the files its COPY steps put in the image, never in the kit's own Python.
Per attempt the whole cluster gets fresh ports and the Vertex environment of
`labkit.local.vertex_env`; each replica runs under its own `labkit.local.supervisor` so that one can be
restarted alone, in place, as Vertex does. What a replica's exit leads to (a restart in place,
a restart of every replica with ``scheduling.restartJobOnWorkerRestart``, a whole-job retry, or
the job's failure) follows Vertex's documented rules, cited in `labkit.local.emulator.restarts`.
Because AIP_CHECKPOINT_DIR stays the same across attempts, a trainer using BackupAndRestore
resumes where it was.

``gs://BUCKET/path`` in the base output directory, args and env values becomes
``<gcs root>/BUCKET/path`` (`labkit.cloud.paths.gcs_to_local`): `tf.io.gfile` cannot be pointed at
a Cloud Storage emulator, so the trainer gets local paths.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import tarfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from labkit.cloud.paths import gcs_to_local
from labkit.cloud.specs import as_int, is_empty_pool, parse_duration, snake_keys
from labkit.local import supervisor, vertex_env
from labkit.local.emulator import dockerfile, image_env, pip_steps, restarts
from labkit.local.emulator.admission import LIMIT_VARIABLE, Admission
from labkit.local.emulator.restarts import RestartPolicy, is_permanent
from labkit.local.emulator.store import TERMINAL_STATES, JobStore, now_rfc3339

DEFAULT_JOB_TIMEOUT_S = 7 * 24 * 3600.0  # Vertex's default scheduling.timeout
LINGER_AFTER_CHIEF_S = 60.0
ATTEMPT_POLL_S = 0.1
_GCS_RE = re.compile(r"gs://[^\s,;\"']+")

# google.rpc.Code values in CustomJob.error (Vertex reports a failed replica with 3)
CODE_CANCELLED = 1
CODE_INVALID_ARGUMENT = 3
CODE_DEADLINE_EXCEEDED = 4
CODE_INTERNAL = 13
CODE_UNAVAILABLE = 14


class JobSetupError(Exception):
    """The job cannot start (unknown image, missing package...); it fails with this message."""


@dataclasses.dataclass
class PoolPlan:
    """How to start the replicas of one worker pool."""

    pool: int
    replica_count: int
    argv: list[str]
    env: dict[str, str]  # image ENV and the spec's env (gs:// mapped), not yet the cluster's
    cwd: str
    description: str
    image: dockerfile.ImagePlan | None = None  # a container pool's image (None: a package)


def map_gcs(text: str, gcs_root: Path) -> str:
    """Every ``gs://...`` in ``text`` replaced by the local folder standing for it."""
    return _GCS_RE.sub(lambda m: gcs_to_local(m.group(0), gcs_root), text)


def _env_list(items: list[dict[str, Any]] | None, gcs_root: Path) -> dict[str, str]:
    return {item["name"]: map_gcs(str(item.get("value", "")), gcs_root) for item in items or []}


@dataclasses.dataclass(frozen=True)
class SetupContext:
    """What preparing a job's pools needs besides the job: where things go, the job's log,
    and the event that cancels an image build."""

    registry: dockerfile.ImageRegistry
    job_dir: Path
    gcs_root: Path
    log: Any = print
    cancel: threading.Event | None = None


def _container_pool(index: int, pool: dict[str, Any], setup: SetupContext) -> PoolPlan:
    spec = pool["containerSpec"]
    try:
        plan = setup.registry.resolve(spec["imageUri"])
        environment = image_env.ensure_environment(plan, setup.log, setup.cancel)
        root = setup.job_dir / "rootfs" / f"workerpool{index}"
        cwd = dockerfile.build_rootfs(plan, root)
    except image_env.BuildCancelled:
        raise
    except dockerfile.ImageError as err:
        raise JobSetupError(f"worker_pool_specs[{index}]: {err}") from err
    args = [map_gcs(a, setup.gcs_root) for a in spec.get("args") or []]
    command = [map_gcs(a, setup.gcs_root) for a in spec.get("command") or []]
    argv = environment.argv(dockerfile.container_argv(plan, command or None, args or None))
    env = {
        **dockerfile.container_env(plan, root),
        **_env_list(spec.get("env"), setup.gcs_root),
        "PATH": environment.path_variable(),
    }
    notes = "; ".join(plan.notes)
    description = (
        f"image {spec['imageUri']} -> build context {plan.context} "
        f"(WORKDIR {plan.workdir} at {cwd}; Python {environment.prefix or 'none'})"
        f"{'; ' + notes if notes else ''}"
    )
    return PoolPlan(
        index, as_int(pool.get("replicaCount")), argv, env, str(cwd), description, image=plan
    )


def _unpack_package(uri: str, target: Path, gcs_root: Path) -> str:
    """A package URI as a PYTHONPATH entry: a folder, a wheel/zip, or an unpacked sdist."""
    local = Path(gcs_to_local(uri, gcs_root))
    if not local.exists():
        raise JobSetupError(
            f"python package {uri} not found (local path {local}); copy the package there first."
        )
    if local.is_dir() or local.suffix in (".whl", ".zip", ".egg"):
        return str(local)
    if local.name.endswith((".tar.gz", ".tgz", ".tar")):
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(local) as archive:
            archive.extractall(target, filter="data")
        tops = [p for p in target.iterdir() if p.is_dir()]
        return str(tops[0] if len(tops) == 1 else target)
    raise JobSetupError(f"python package {uri}: expected a .tar.gz sdist, a wheel or a folder")


def _package_pool(index: int, pool: dict[str, Any], job_dir: Path, gcs_root: Path) -> PoolPlan:
    spec = pool["pythonPackageSpec"]
    work = job_dir / "work" / f"workerpool{index}"
    work.mkdir(parents=True, exist_ok=True)
    entries = [
        _unpack_package(uri, job_dir / "packages" / f"{index}-{n}", gcs_root)
        for n, uri in enumerate(spec.get("packageUris") or [])
    ]
    env = _env_list(spec.get("env"), gcs_root)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    if entries:
        env["PYTHONPATH"] = os.pathsep.join(entries + [os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        )
    argv = [sys.executable, "-m", spec["pythonModule"]] + [
        map_gcs(a, gcs_root) for a in spec.get("args") or []
    ]
    description = (
        f"python package {', '.join(spec.get('packageUris') or [])}: python -m {spec['pythonModule']} "
        f"(executor image {spec.get('executorImageUri')} stands for the current Python)"
    )
    return PoolPlan(index, as_int(pool.get("replicaCount")), argv, env, str(work), description)


def prepare_pools(job: dict[str, Any], setup: SetupContext) -> list[PoolPlan]:
    plans = []
    for index, pool in enumerate(job["jobSpec"]["workerPoolSpecs"]):
        if is_empty_pool(pool):
            continue
        if pool.get("containerSpec"):
            plans.append(_container_pool(index, pool, setup))
        else:
            plans.append(_package_pool(index, pool, setup.job_dir, setup.gcs_root))
    return plans


def _error(code: int, message: str) -> dict[str, Any]:
    return {"code": code, "message": message}


@dataclasses.dataclass
class AttemptResult:
    """How one attempt ended: succeeded, cancelled, timeout, failed (a permanent exit),
    restart_job (restartJobOnWorkerRestart), retry_job (a replica past its restarts in place)
    or stalled (no end after a replica restarted alone)."""

    outcome: str
    culprit: supervisor.ReplicaOutcome | None = None
    culprit_name: str | None = None
    lone_restarts: list[str] = dataclasses.field(default_factory=list)


class _Slot(threading.Thread):
    """One replica's process under its own supervisor, until it exits or ``stop`` is set."""

    def __init__(
        self,
        launch: supervisor.ReplicaLaunch,
        sink: supervisor.Sink,
        deadline: float,
        grace_seconds: float,
        on_started: Any,
    ) -> None:
        super().__init__(name=f"replica-{launch.role}", daemon=True)
        self.launch = launch
        self.sink = sink
        self.deadline = deadline
        self.grace_seconds = grace_seconds
        self.on_started = on_started
        self.stop = threading.Event()
        self.outcome: supervisor.ReplicaOutcome | None = None
        self.ended_at: float | None = None
        self.error: BaseException | None = None
        self._launched = threading.Event()

    def start(self) -> None:
        super().start()
        self._launched.wait()  # a start error (missing program) surfaces in the caller
        if self.error is not None:
            raise self.error

    def run(self) -> None:
        def started(pids: Any) -> None:
            self._launched.set()
            self.on_started(pids)

        try:
            result = supervisor.supervise(
                [self.launch],
                sink=self.sink,
                timeout=max(self.deadline - time.monotonic(), 0.001),
                cancel=self.stop,
                grace_seconds=self.grace_seconds,
                on_started=started,
            )
            self.outcome = result.replicas[0]
        except BaseException as err:  # noqa: BLE001 - handed to the caller
            self.error = err
        finally:
            self._launched.set()
            self.ended_at = time.monotonic()


class JobRunner(threading.Thread):
    """Runs one job to a terminal state in a background thread of the service."""

    def __init__(
        self,
        name: str,
        store: JobStore,
        registry: dockerfile.ImageRegistry,
        gcs_root: Path,
        service_stopping: threading.Event,
        grace_seconds: float = supervisor.DEFAULT_GRACE_SECONDS,
        admission: Admission | None = None,
    ) -> None:
        super().__init__(name=f"job-{name.rsplit('/', 1)[-1]}", daemon=True)
        self.admission = admission
        self._admitted = 0  # replicas this job holds in `admission`
        self.job_name = name
        self.store = store
        self.registry = registry
        self.gcs_root = gcs_root
        self.service_stopping = service_stopping
        self.grace_seconds = grace_seconds
        self.cancel = threading.Event()
        self.deleting = False
        self.job_dir = store.job_dir(name)
        self._pool_of_role: dict[str, PoolPlan] = {}

    # ---- bookkeeping ----
    def event(self, line: str) -> None:
        """A line in the job's own log, echoed to the service's output (server.log)."""
        self.store.append_event(self.job_name, f"[emulator] {line}")
        print(f"{now_rfc3339()} [job {self.job_name.rsplit('/', 1)[-1]}] {line}", flush=True)

    def set_state(self, state: str, **fields: Any) -> None:
        if state in TERMINAL_STATES:
            fields.setdefault("endTime", now_rfc3339())
        self.store.update(self.job_name, state=state, **fields)
        self.event(
            f"state {state}" + (f": {fields['error']['message']}" if "error" in fields else "")
        )

    def _record_processes(self, pids: dict[str, int], new: dict[str, int] | None = None) -> None:
        """processes.json holds every live replica (``pids``); the log names the ``new`` ones."""
        if self.job_dir.is_dir():
            supervisor.record_processes(self.job_dir, pids)
        started = pids if new is None else new
        self.event("started " + ", ".join(f"{role} (pid {pid})" for role, pid in started.items()))

    def _job_sink(self) -> supervisor.Sink:
        """Every replica's lines, time-stamped, in one file (like the job's Cloud Logging view)."""
        path = self.job_dir / "job.log"

        def write(line: str) -> None:
            if self.job_dir.is_dir():
                with open(path, "a", encoding="utf-8") as log:
                    log.write(f"{now_rfc3339()} {line}\n")

        return write

    # ---- the run ----
    def run(self) -> None:
        try:
            self._run()
        except Exception:  # never leave a job RUNNING because of a bug here
            self.set_state(
                "JOB_STATE_FAILED",
                error=_error(CODE_INTERNAL, "local service error:\n" + traceback.format_exc()),
            )
        finally:
            (self.job_dir / "processes.json").unlink(missing_ok=True)
            if self.admission is not None:
                self.admission.leave(self.job_name)
                self.admission.release(self._admitted)
                self._admitted = 0

    def _wait_for_admission(self, replicas: int) -> bool:
        """Queue (JOB_STATE_QUEUED) until the service's replica limit lets the job run
        (`labkit.local.emulator.admission`); False when it was cancelled while waiting."""
        if self.admission is None:
            return True
        if self.admission.would_wait(self.job_name, replicas):
            self.store.update(self.job_name, state="JOB_STATE_QUEUED")
            self.event(
                f"state JOB_STATE_QUEUED: {self.admission.running} replica(s) of other jobs "
                f"run and the service runs at most {self.admission.limit} at once "
                f"({LIMIT_VARIABLE}); this job's {replicas} start when they fit"
            )
            if not self.admission.admit(self.job_name, replicas, self.cancel):
                return False
            self.store.update(self.job_name, state="JOB_STATE_PENDING")
            self.event("state JOB_STATE_PENDING: admitted")
        elif not self.admission.admit(self.job_name, replicas, self.cancel):
            return False
        self._admitted = replicas
        return True

    def _map_output_dir(self, spec: dict[str, Any]) -> str | None:
        """The local folder for the base output directory, recorded in the job (both names)."""
        base_uri = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
        if not base_uri:
            return None
        base_local = gcs_to_local(base_uri, self.gcs_root)
        Path(base_local).mkdir(parents=True, exist_ok=True)
        linked = (self.store.get(self.job_name).get("labkitLocal") or {}).copy()
        self.store.update(
            self.job_name,
            labkitLocal={
                **linked,
                "baseOutputDirectory": base_uri,
                "localOutputDirectory": base_local,
                "logsDirectory": str(self.job_dir / "logs"),
            },
        )
        self.event(f"output {base_uri} -> {base_local}")
        return base_local

    def _run(self) -> None:
        job = self.store.get(self.job_name)
        spec = job["jobSpec"]
        scheduling = spec.get("scheduling") or {}
        timeout = (
            parse_duration(scheduling["timeout"])
            if scheduling.get("timeout")
            else DEFAULT_JOB_TIMEOUT_S
        )
        policy = RestartPolicy.from_scheduling(scheduling)
        base_local = self._map_output_dir(spec)
        setup = SetupContext(self.registry, self.job_dir, self.gcs_root, self.event, self.cancel)
        try:
            pools = prepare_pools(job, setup)
        except JobSetupError as err:
            self.set_state("JOB_STATE_FAILED", error=_error(CODE_INVALID_ARGUMENT, str(err)))
            return
        except image_env.BuildCancelled:
            self._finish_cancelled()
            return
        for plan in pools:
            self.event(f"workerpool{plan.pool} x{plan.replica_count}: {plan.description}")
            self.event(f"workerpool{plan.pool} command: {' '.join(plan.argv)}")
        self.event(f"restarts: {policy.describe()}")
        if not self._wait_for_admission(sum(plan.replica_count for plan in pools)):
            self._finish_cancelled()
            return

        deadline = time.monotonic() + timeout
        job_restarts = job_retries = 0
        attempt = 0
        while True:
            attempt += 1
            if self.cancel.is_set():
                self._finish_cancelled()
                return
            fields = {} if job.get("startTime") else {"startTime": now_rfc3339()}
            job = self.store.update(self.job_name, state="JOB_STATE_RUNNING", **fields) or job
            self.event(f"state JOB_STATE_RUNNING (attempt {attempt})")
            try:
                result = self._attempt(job, pools, base_local, attempt, deadline, policy)
            except supervisor.ReplicaStartError as err:
                self.set_state("JOB_STATE_FAILED", error=_error(CODE_INVALID_ARGUMENT, str(err)))
                return
            if result.outcome == "succeeded":
                self.set_state("JOB_STATE_SUCCEEDED")
                return
            if result.outcome == "cancelled":
                self._finish_cancelled()
                return
            if result.outcome == "timeout":
                self.set_state(
                    "JOB_STATE_FAILED",
                    error=_error(
                        CODE_DEADLINE_EXCEEDED,
                        f"The job ran past its scheduling.timeout of {timeout:g}s; every "
                        "replica was stopped.",
                    ),
                )
                return
            culprit, name = result.culprit, result.culprit_name
            assert culprit is not None
            if result.outcome == "restart_job" and job_restarts < restarts.REPLICA_RESTART_LIMIT:
                job_restarts += 1
                self.event(
                    f"replica {name} ({culprit.role}) {restarts.exit_kind(culprit.returncode)}: "
                    f"restartJobOnWorkerRestart restarts every replica (job restart "
                    f"{job_restarts} of at most {restarts.REPLICA_RESTART_LIMIT})"
                )
                continue
            if result.outcome == "retry_job" and job_retries < policy.job_retries:
                job_retries += 1
                self.event(
                    f"replica {name} ({culprit.role}) failed again after "
                    f"{restarts.REPLICA_RESTART_LIMIT} restarts in place: retrying the whole job "
                    f"(retry {job_retries} of {policy.job_retries})"
                )
                continue
            message = self._failure(culprit, name)
            if result.outcome == "restart_job":
                message += (
                    f" The job had restarted {job_restarts} times "
                    "(restartJobOnWorkerRestart); it is not restarted again."
                )
            elif result.outcome == "retry_job":
                message += (
                    f" It had been restarted {restarts.REPLICA_RESTART_LIMIT} times in place and "
                    f"the job retried {job_retries} times."
                )
            if result.lone_restarts:
                message = message.rstrip() + restarts.lone_restart_note(result.lone_restarts)
            if result.outcome == "stalled":
                message = (
                    f"The job made no progress for {restarts.LONE_RESTART_STALL_S:g} s after "
                    f"{', '.join(result.lone_restarts)} restarted alone; the local service stopped "
                    "every replica (on Vertex the job would wait until its scheduling.timeout). "
                    f"A MultiWorkerMirroredStrategy cluster cannot take one worker back. Fix: "
                    f"{restarts.FLAG_FIX}."
                )
            self.set_state("JOB_STATE_FAILED", error=_error(CODE_INVALID_ARGUMENT, message))
            return

    def _launches(
        self, job: dict[str, Any], pools: list[PoolPlan], base_local: str | None, attempt: int
    ) -> tuple[list[supervisor.ReplicaLaunch], dict[str, str], bool]:
        """Every replica's launch for one attempt (fresh ports), their Vertex names, and
        whether pool 0 has a replica (the primary)."""
        counts = [0] * (max(p.pool for p in pools) + 1)
        for plan in pools:
            counts[plan.pool] = plan.replica_count
        layout = vertex_env.plan_cluster(counts)
        by_pool = {plan.pool: plan for plan in pools}
        job_field = snake_keys(
            {
                "workerPoolSpecs": job["jobSpec"]["workerPoolSpecs"],
                "baseOutputDirectory": job["jobSpec"].get("baseOutputDirectory", {}),
            }
        )
        # Nothing of the kit's Python reaches a replica: each pool sets its own PATH.
        base_env = image_env.without_kit_python(vertex_env.without_vertex_variables(os.environ))
        base_env["PYTHONUNBUFFERED"] = "1"  # logs arrive line by line, as Cloud Logging shows them
        base_env.update(supervisor.co_located_thread_env(len(layout.replicas), base_env))
        launches, pool_names = [], {}
        for replica in layout.replicas:
            plan = by_pool[replica.pool]
            cluster_vars = vertex_env.replica_env(
                layout, replica, job=job_field, base_output_dir=base_local
            )
            env = {**base_env, **cluster_vars, **plan.env}
            pool_names[replica.role] = f"{replica.pool_name}-{replica.index}"
            self._pool_of_role[replica.role] = plan
            launches.append(
                supervisor.ReplicaLaunch(
                    role=replica.role,
                    argv=plan.argv,
                    env=env,
                    log_path=self.job_dir / "logs" / f"{replica.role}.log",
                    cwd=plan.cwd,
                    header=(
                        f"===== {now_rfc3339()} attempt {attempt}: {replica.role} "
                        f"({replica.pool_name}-{replica.index}) TF_CONFIG={cluster_vars['TF_CONFIG']}"
                    ),
                )
            )
        return launches, pool_names, bool(counts[0])

    def _attempt(
        self,
        job: dict[str, Any],
        pools: list[PoolPlan],
        base_local: str | None,
        attempt: int,
        deadline: float,
        policy: RestartPolicy,
    ) -> AttemptResult:
        """One run of the whole cluster, each replica under its own supervisor so that one
        can be restarted alone, in place, as Vertex does (`labkit.local.emulator.restarts`)."""
        launches, pool_names, has_primary = self._launches(job, pools, base_local, attempt)
        sink = self._job_sink()
        pids: dict[str, int] = {}
        pid_lock = threading.Lock()

        def started(role_pids: Any) -> None:
            with pid_lock:
                pids.update(role_pids)
                self._record_processes(dict(pids), new=dict(role_pids))

        def start(launch: supervisor.ReplicaLaunch) -> _Slot:
            slot = _Slot(launch, sink, deadline, self.grace_seconds, started)
            slot.start()
            return slot

        slots = {launch.role: start(launch) for launch in launches}
        by_role = {launch.role: launch for launch in launches}
        restarts_in_place = dict.fromkeys(slots, 0)
        lone: list[str] = []
        lone_since: float | None = None
        done: set[str] = set()
        linger_deadline: float | None = None
        result = AttemptResult("succeeded")
        try:
            while True:
                now = time.monotonic()
                if self.cancel.is_set():
                    result = AttemptResult("cancelled")
                    break
                if now >= deadline:
                    result = AttemptResult("timeout")
                    break
                ended = sorted(
                    (s for r, s in slots.items() if r not in done and s.ended_at is not None),
                    key=lambda s: s.ended_at or 0.0,
                )
                verdict = None
                for slot in ended:
                    role = slot.launch.role
                    code = slot.outcome.returncode if slot.outcome else None
                    if slot.outcome is not None and slot.outcome.stopped:
                        continue  # stopped at the job's deadline: handled above
                    if code == 0:
                        done.add(role)
                        continue
                    name = pool_names[role]
                    if is_permanent(code):
                        verdict = AttemptResult("failed", slot.outcome, name, lone)
                    elif policy.restart_job_on_worker_restart:
                        verdict = AttemptResult("restart_job", slot.outcome, name, lone)
                    elif restarts_in_place[role] >= restarts.REPLICA_RESTART_LIMIT:
                        verdict = AttemptResult("retry_job", slot.outcome, name, lone)
                    else:
                        restarts_in_place[role] += 1
                        self.event(
                            f"replica {name} ({role}) {restarts.exit_kind(code)}: restarting it "
                            f"alone, in place (restart {restarts_in_place[role]} of "
                            f"{restarts.REPLICA_RESTART_LIMIT})"
                        )
                        if len(slots) > 1 and name not in lone:
                            lone.append(name)
                        lone_since = now
                        slots[role] = start(by_role[role])
                        continue
                    break
                if verdict is not None:
                    result = verdict
                    break
                if len(done) == len(slots):
                    break
                primary_done = has_primary and "chief-0" in done
                if primary_done and linger_deadline is None:
                    linger_deadline = now + LINGER_AFTER_CHIEF_S
                if linger_deadline is not None and now >= linger_deadline:
                    break  # the primary finished: Vertex ends the job; the rest are stopped
                if lone_since is not None and now - lone_since >= restarts.LONE_RESTART_STALL_S:
                    result = AttemptResult("stalled", None, None, lone)
                    break
                time.sleep(ATTEMPT_POLL_S)
        finally:
            for slot in slots.values():
                slot.stop.set()
            for slot in slots.values():
                slot.join()
            (self.job_dir / "processes.json").unlink(missing_ok=True)
        for role, slot in slots.items():
            if slot.outcome is not None:
                self.event(
                    f"attempt {attempt}: {role} {supervisor.describe_exit(slot.outcome.returncode)}"
                    + (" (stopped by the service)" if slot.outcome.stopped else "")
                )
        if result.outcome == "stalled":
            result.culprit = next(iter(s.outcome for s in slots.values() if s.outcome), None)
        return result

    def _failure(self, culprit: supervisor.ReplicaOutcome, name: str | None) -> str:
        """Vertex's wording, plus the replica's role and the tail of its log."""
        code = culprit.returncode
        if code is not None and code > 0:
            what = f"exited with a non-zero status of {code}"
        else:
            what = supervisor.describe_exit(code)
        tail = "\n".join(culprit.tail) or "(no output)"
        peak = supervisor.format_bytes(culprit.peak_rss_bytes)
        pool = self._pool_of_role.get(culprit.role)
        fix = None
        if pool is not None and pool.image is not None:
            fix = pip_steps.missing_module_fix(culprit.tail, pool.image)
        fix = f"{fix}\n" if fix else ""
        return (
            f"The replica {name} ({culprit.role}) {what} (peak memory {peak}). {fix}"
            f"Its log: {culprit.log_path}\n--- last lines of {culprit.role} ---\n{tail}\n"
        )

    def _finish_cancelled(self) -> None:
        if self.deleting:
            return
        if self.service_stopping.is_set():
            self.set_state(
                "JOB_STATE_FAILED",
                error=_error(
                    CODE_UNAVAILABLE,
                    "The local Vertex AI service was stopped while this job ran; every replica "
                    "was stopped. Submit the job again.",
                ),
            )
        else:
            self.set_state("JOB_STATE_CANCELLED", error=_error(CODE_CANCELLED, "CANCELED"))


def read_processes(job_dir: Path) -> dict[str, dict[str, Any]]:
    path = job_dir / "processes.json"
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
