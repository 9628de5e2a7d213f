"""The local Vertex AI service as one in-process object: what every route and form calls.

`Service` holds the jobs, training pipelines, images and runners of one state folder. The
REST routes (`labkit.local.emulator.server`) and the console page (`labkit.local.console`) are thin
wrappers over its methods, so a job made from a console form goes through exactly the same
validation (`labkit.cloud.specs`, the job-spec core) and start-up as one the SDK POSTs.

Stable interface (the console builds on these names)::

    service.create_custom_job(parent, body)         -> CustomJob JSON   (raises SpecError)
    service.create_training_pipeline(parent, body)  -> TrainingPipeline JSON (raises SpecError)
    service.get(name)                               -> the resource JSON
    service.list(kind, parent, filter=, page_size=, page_token=) -> {kind: [...], nextPageToken}
    service.cancel(name)                            -> {}
    service.delete(name)                            -> the done delete operation
    service.get_operation(name)
    service.logs(name, tail=None)                   -> {"job": ..., "replicas": {role: text}}
    service.images() / service.register_image(uri, build_context) / service.info()

``kind`` is the REST collection, ``"customJobs"`` or ``"trainingPipelines"``. Errors are
`labkit.cloud.specs.SpecError` (a body Vertex would refuse: every problem with its field path and
fix) and `labkit.local.emulator.errors.ApiError` (not found, failed precondition, unimplemented).

TrainingPipelines: only the custom task (``trainingTaskDefinition`` =
`labkit.cloud.specs.CUSTOM_TASK_SCHEMA`, what the console's "custom training (advanced)" and the
SDK's ``CustomContainerTrainingJob`` / ``CustomTrainingJob`` make). The pipeline starts its own
CustomJob from ``trainingTaskInputs`` (worker pool specs, ``baseOutputDirectory``,
scheduling) with the pipeline's labels, links it as ``trainingTaskMetadata.backingCustomJob``
(the job links back in ``labkitLocal.trainingPipeline``), and follows its state as
``PIPELINE_STATE_*``. Refused with UNIMPLEMENTED, naming the field: ``modelToUpload`` (no
local model registry: load the SavedModel from ``baseOutputDirectory``/model instead, which
is where ``AIP_MODEL_DIR`` points), ``inputDataConfig`` (no managed datasets), and any other
training task definition (AutoML).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from labkit.cloud import specs
from labkit.local.emulator import limits
from labkit.local.emulator.admission import Admission, default_limit
from labkit.local.emulator.errors import (
    ApiError,
    FieldViolation,
    bad_request,
    failed_precondition,
    invalid_argument,
)
from labkit.local.emulator.iam import ProjectIam
from labkit.local.emulator.services import ProjectServices
from labkit.local.emulator.store import (
    KINDS,
    TERMINAL_STATES,
    JobStore,
    new_numeric_id,
    now_rfc3339,
)

if TYPE_CHECKING:
    from labkit.local.emulator.dockerfile import ImageRegistry
    from labkit.local.emulator.runner import JobRunner

HOST = "127.0.0.1"
DEFAULT_PAGE_SIZE = 100
CODE_UNAVAILABLE = 14
CODE_CANCELLED = 1
PIPELINE_POLL_S = 0.2
# The backing CustomJob's state -> the pipeline's.
PIPELINE_STATE_OF_JOB = {
    "JOB_STATE_PENDING": "PIPELINE_STATE_PENDING",
    "JOB_STATE_QUEUED": "PIPELINE_STATE_QUEUED",
    "JOB_STATE_RUNNING": "PIPELINE_STATE_RUNNING",
    "JOB_STATE_CANCELLING": "PIPELINE_STATE_CANCELLING",
    "JOB_STATE_SUCCEEDED": "PIPELINE_STATE_SUCCEEDED",
    "JOB_STATE_FAILED": "PIPELINE_STATE_FAILED",
    "JOB_STATE_CANCELLED": "PIPELINE_STATE_CANCELLED",
    "JOB_STATE_EXPIRED": "PIPELINE_STATE_FAILED",
}


def unimplemented_field(field: str, why: str) -> ApiError:
    """501 UNIMPLEMENTED for a request field the local service does not model."""
    return ApiError(
        501, "UNIMPLEMENTED", f"{field} is not implemented by the local Vertex AI service: {why}"
    )


def _raise_for_limits(violations: list[FieldViolation]) -> None:
    """400 INVALID_ARGUMENT for a field over its size limit (`labkit.local.emulator.limits`)."""
    if violations:
        raise invalid_argument(violations)


def kind_of(name: str) -> str:
    from labkit.local.emulator.store import split_name

    return split_name(name)[1]


class Service:
    """Jobs, pipelines, images and runners of one state folder; one per running service."""

    def __init__(
        self,
        state_dir: Path,
        gcs_root: Path,
        port: int,
        grace_seconds: float = 5.0,
        max_running_replicas: int | None = None,
    ) -> None:
        """``max_running_replicas``: None reads `admission.default_limit` (env or cores)."""
        from labkit.local.emulator.artifact_registry import Repositories
        from labkit.local.emulator.dockerfile import ImageRegistry

        self.state_dir = Path(state_dir).resolve()
        self.gcs_root = Path(gcs_root).resolve()
        self.port = port
        self.grace_seconds = grace_seconds
        self.store = JobStore(self.state_dir)
        self.registry: ImageRegistry = ImageRegistry(self.state_dir / "images.json")
        self.iam = ProjectIam(self.state_dir / "iam.json")
        self.services = ProjectServices(self.state_dir / "services.json")
        self.repositories = Repositories(self.state_dir / "repositories.json", self.registry)
        self.stopping = threading.Event()
        self._runners: dict[str, JobRunner] = {}
        self._watchers: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        self.admission = Admission(
            default_limit() if max_running_replicas is None else max_running_replicas
        )
        self.recover_interrupted_jobs()

    # ---- lifecycle ----
    def recover_interrupted_jobs(self) -> None:
        """Jobs and pipelines left running by a service that died: stop their processes,
        mark them FAILED."""
        for kind, failed, what in (
            ("customJobs", "JOB_STATE_FAILED", "job"),
            ("trainingPipelines", "PIPELINE_STATE_FAILED", "pipeline"),
        ):
            message = f"The local Vertex AI service stopped while this {what} ran. Submit it again."
            for job in self.store.all_jobs(kind):
                if job.get("state") in TERMINAL_STATES:
                    continue
                if kind == "customJobs":
                    from labkit.local.emulator.control import kill_recorded_processes

                    kill_recorded_processes(self.store.job_dir(job["name"]))
                self.store.update(
                    job["name"],
                    state=failed,
                    endTime=now_rfc3339(),
                    error={"code": CODE_UNAVAILABLE, "message": message},
                )

    def shutdown(self) -> None:
        """Stop every running job (their processes end within the grace period)."""
        self.stopping.set()
        with self._lock:
            runners = list(self._runners.values())
            watchers = list(self._watchers.values())
        for job_runner in runners:
            job_runner.cancel.set()
        for job_runner in runners:
            job_runner.join(timeout=self.grace_seconds + 10)
        for watcher in watchers:
            watcher.join(timeout=5)

    def _refuse_when_stopping(self) -> None:
        if self.stopping.is_set():
            raise ApiError(503, "UNAVAILABLE", "The local Vertex AI service is stopping.")

    # ---- creating ----
    def create_custom_job(
        self, parent: str, body: dict[str, Any], *, pipeline: str | None = None
    ) -> dict[str, Any]:
        """Validate (raises `specs.SpecError`), record and start a CustomJob."""
        self._refuse_when_stopping()
        _raise_for_limits(limits.custom_job_violations(body))
        job = specs.camel_keys(body)
        specs.raise_for_problems(specs.validate_custom_job(job), vertex_only=True)
        if pipeline:
            job["labkitLocal"] = {"trainingPipeline": pipeline}
        created = self.store.create(parent, job)
        self.store.append_event(created["name"], "[emulator] state JOB_STATE_PENDING")
        from labkit.local.emulator.runner import JobRunner

        job_runner = JobRunner(
            created["name"],
            self.store,
            self.registry,
            self.gcs_root,
            self.stopping,
            grace_seconds=self.grace_seconds,
            admission=self.admission,
        )
        self.admission.enqueue(created["name"])  # the line follows creation order
        with self._lock:
            self._runners[created["name"]] = job_runner
        job_runner.start()
        return created

    def create_training_pipeline(self, parent: str, body: dict[str, Any]) -> dict[str, Any]:
        """Validate (raises `specs.SpecError`), record a TrainingPipeline and start its job."""
        self._refuse_when_stopping()
        _raise_for_limits(limits.training_pipeline_violations(body))
        # trainingTaskInputs is a Struct: kept as the client wrote it, as Vertex echoes it.
        pipeline = {
            specs.camel_name(k): v
            if k in ("trainingTaskInputs", "training_task_inputs", "labels")
            else specs.camel_keys(v)
            for k, v in body.items()
        }
        if pipeline.get("modelToUpload"):
            raise unimplemented_field(
                "modelToUpload",
                "there is no local model registry. Leave out model_serving_container_image_uri "
                "(the SDK then sends no model) and load the SavedModel the trainer wrote under "
                "baseOutputDirectory/model/ (AIP_MODEL_DIR).",
            )
        if (pipeline.get("inputDataConfig") or {}).get("datasetId"):
            raise unimplemented_field(
                "inputDataConfig.datasetId",
                "there are no managed datasets locally; the trainer reads its own data "
                "(the console's 'no managed dataset').",
            )
        definition = pipeline.get("trainingTaskDefinition")
        if definition and definition != specs.CUSTOM_TASK_SCHEMA:
            raise unimplemented_field(
                "trainingTaskDefinition",
                f"only custom training ({specs.CUSTOM_TASK_SCHEMA}) runs locally, not {definition}.",
            )
        specs.raise_for_problems(specs.validate_training_pipeline(pipeline), vertex_only=True)
        created = self.store.create(parent, pipeline, kind="trainingPipelines")
        inputs = specs.camel_keys(pipeline.get("trainingTaskInputs") or {})
        job_spec = {
            k: v
            for k, v in inputs.items()
            if k in ("workerPoolSpecs", "baseOutputDirectory", "scheduling", "serviceAccount")
        }
        if isinstance(job_spec.get("scheduling"), dict):
            job_spec["scheduling"] = {
                k: v for k, v in job_spec["scheduling"].items() if v not in (None, "", 0)
            }
        job_body = {
            "displayName": pipeline["displayName"][: limits.MAX_DISPLAY_NAME_CHARS - 11]
            + "-custom-job",
            "jobSpec": job_spec,
            "labels": dict(pipeline.get("labels") or {}),
        }
        try:
            job = self.create_custom_job(parent, job_body, pipeline=created["name"])
        except Exception:
            self.store.delete(created["name"])
            raise
        created = self.store.update(
            created["name"], trainingTaskMetadata={"backingCustomJob": job["name"]}
        )
        watcher = threading.Thread(
            target=self._follow_pipeline,
            args=(created["name"], job["name"]),
            name=f"pipeline-{created['name'].rsplit('/', 1)[-1]}",
            daemon=True,
        )
        with self._lock:
            self._watchers[created["name"]] = watcher
        watcher.start()
        return created

    def _follow_pipeline(self, name: str, job_name: str) -> None:
        """Mirror the backing CustomJob's state into the pipeline until both are terminal."""
        while True:
            try:
                job = self.store.get(job_name)
            except ApiError:  # the job was deleted under the pipeline
                self.store.update(
                    name,
                    state="PIPELINE_STATE_CANCELLED",
                    endTime=now_rfc3339(),
                    error={"code": CODE_CANCELLED, "message": "Its CustomJob was deleted."},
                )
                return
            state = PIPELINE_STATE_OF_JOB.get(job["state"], "PIPELINE_STATE_RUNNING")
            pipeline = self.store.get(name) if self.store.exists(name) else None
            if pipeline is None:
                return
            changes: dict[str, Any] = {}
            if pipeline["state"] != state and not (
                state == "PIPELINE_STATE_RUNNING"
                and pipeline["state"] == "PIPELINE_STATE_CANCELLING"
            ):
                changes["state"] = state
            if job.get("startTime") and not pipeline.get("startTime"):
                changes["startTime"] = job["startTime"]
            if state in TERMINAL_STATES:
                changes["endTime"] = job.get("endTime") or now_rfc3339()
                if job.get("error"):
                    changes["error"] = job["error"]
            if changes:
                self.store.update(name, **changes)
            if state in TERMINAL_STATES:
                with self._lock:
                    self._watchers.pop(name, None)
                return
            time.sleep(PIPELINE_POLL_S)

    # ---- reading ----
    def get(self, name: str) -> dict[str, Any]:
        return self.store.get(name)

    def list(
        self,
        kind: str,
        parent: str,
        filter: str | None = None,  # noqa: A002 (the REST parameter's name)
        page_size: int | str | None = None,
        page_token: str | None = None,
    ) -> dict[str, Any]:
        """One page of ``kind`` under ``parent``, newest first, matching the AIP-160 filter."""
        from labkit.local.emulator.filters import compile_filter

        if kind not in KINDS:
            raise bad_request(f"unknown collection {kind!r}: use one of {', '.join(KINDS)}")
        matches = compile_filter(filter)
        found = [job for job in self.store.list(parent, kind) if matches(job)]
        try:
            size = int(page_size or DEFAULT_PAGE_SIZE)
            start = int(page_token or 0)
        except ValueError as err:
            raise bad_request(f"pageSize and pageToken must be integers: {err}") from err
        size = size if size > 0 else DEFAULT_PAGE_SIZE
        answer: dict[str, Any] = {kind: found[start : start + size]}
        if start + size < len(found):
            answer["nextPageToken"] = str(start + size)
        return answer

    def get_operation(self, name: str) -> dict[str, Any]:
        return self.store.get_operation(name)

    def logs(self, name: str, tail: int | None = None) -> dict[str, Any]:
        """The job's own log and each replica's (a pipeline: its backing job's)."""
        resource = self.store.get(name)
        if kind_of(name) == "trainingPipelines":
            backing = (resource.get("trainingTaskMetadata") or {}).get("backingCustomJob")
            if not backing or not self.store.exists(backing):
                return {"job": "", "replicas": {}, "logsDir": None}
            name = backing
        folder = self.store.job_dir(name)

        def read(path: Path) -> str:
            text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
            return "\n".join(text.splitlines()[-tail:]) if tail else text

        replicas = {p.stem: read(p) for p in sorted((folder / "logs").glob("*.log"))}
        return {
            "job": read(folder / "job.log"),
            "replicas": replicas,
            "logsDir": str(folder / "logs"),
        }

    # ---- changing ----
    def _running_backing_job(self, pipeline: dict[str, Any]) -> str | None:
        """The name of the pipeline's CustomJob while that job has not ended."""
        backing = (pipeline.get("trainingTaskMetadata") or {}).get("backingCustomJob")
        running = backing and self.store.exists(backing)
        return (
            backing if running and self.store.get(backing)["state"] not in TERMINAL_STATES else None
        )

    def cancel(self, name: str) -> dict[str, Any]:
        job = self.store.get(name)
        if job["state"] in TERMINAL_STATES:
            raise failed_precondition(
                f"Cannot cancel {name}: it is already in the terminal state {job['state']}."
            )
        if kind_of(name) == "trainingPipelines":
            self.store.update(name, state="PIPELINE_STATE_CANCELLING")
            backing = self._running_backing_job(job)
            if backing:
                self.cancel(backing)
            return {}
        self.store.update(name, state="JOB_STATE_CANCELLING")
        self.store.append_event(name, "[emulator] cancel requested: state JOB_STATE_CANCELLING")
        with self._lock:
            job_runner = self._runners.get(name)
        if job_runner is not None:
            job_runner.cancel.set()
        return {}

    def delete(self, name: str) -> dict[str, Any]:
        """Delete a job (its processes first) or a pipeline (and its job while it still runs);
        answers the finished long-running operation the SDK polls."""
        resource = self.store.get(name)  # 404 before anything else
        parent, kind, _ = name.rsplit("/", 2)
        if kind == "trainingPipelines":
            backing = self._running_backing_job(resource)
            if backing:
                self.delete(backing)
            with self._lock:
                watcher = self._watchers.pop(name, None)
            self.store.delete(name)
            if watcher is not None:
                watcher.join(timeout=5)
        else:
            with self._lock:
                job_runner = self._runners.pop(name, None)
            if job_runner is not None and job_runner.is_alive():
                job_runner.deleting = True
                job_runner.cancel.set()
                job_runner.join(timeout=self.grace_seconds + 10)
            self.store.delete(name)
        operation = {
            "name": f"{parent}/operations/{new_numeric_id()}",
            "metadata": {
                "@type": "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata",
                "genericMetadata": {"createTime": now_rfc3339(), "updateTime": now_rfc3339()},
            },
            "done": True,
            "response": {"@type": "type.googleapis.com/google.protobuf.Empty"},
        }
        self.store.save_operation(operation)
        return operation

    # ---- the kit's own endpoints ----
    def images(self) -> dict[str, str]:
        """Registered image URIs -> their build contexts."""
        return self.registry.images()

    def register_image(self, image_uri: str, build_context: str | Path) -> dict[str, str]:
        from labkit.local.emulator.dockerfile import ImageError

        if isinstance(build_context, Path):  # in-process callers may pass a Path
            build_context = str(build_context)
        if not isinstance(image_uri, str) or not isinstance(build_context, str):
            raise bad_request('Send {"imageUri": URI, "buildContext": FOLDER} (two strings).')
        if not image_uri or not build_context:
            raise bad_request('Send {"imageUri": URI, "buildContext": FOLDER}.')
        try:
            self.registry.register(image_uri, build_context)
        except ImageError as err:
            raise bad_request(str(err)) from err
        return self.registry.images()

    def info(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "port": self.port,
            "url": f"http://{HOST}:{self.port}",
            "stateDir": str(self.state_dir),
            "gcsRoot": str(self.gcs_root),
            "images": self.registry.images(),
            "python": sys.executable,
        }
