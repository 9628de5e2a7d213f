"""The HTTP side: Vertex AI's v1 REST surface for custom jobs, on 127.0.0.1 only.

Routes (every query may carry the SDK's ``$alt=json;enum-encoding=int``):

    POST   /v1/projects/P/locations/L/customJobs              create (validated, then run)
    GET    /v1/projects/P/locations/L/customJobs              list (filter, pageSize, pageToken)
    GET    /v1/projects/P/locations/L/customJobs/ID           get
    POST   /v1/projects/P/locations/L/customJobs/ID:cancel    cancel
    DELETE /v1/projects/P/locations/L/customJobs/ID           delete -> long-running operation
    GET    /v1/projects/P/locations/L/operations/OP           the operation the SDK polls
    GET    /labkit/v1/info                                    pid, port, state dir, images
    GET    /labkit/v1/images, POST /labkit/v1/images          registered build contexts
    GET    /labkit/v1/projects/.../customJobs/ID/logs?tail=N  per-replica logs for notebooks

Standard library only (`http.server.ThreadingHTTPServer`): nothing to install, and the
service starts in well under a second because it imports neither TensorFlow nor the SDK.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from labkit.emulator import dockerfile, runner
from labkit.emulator.errors import (
    ApiError,
    bad_request,
    failed_precondition,
    not_found,
    unimplemented,
)
from labkit.emulator.filters import compile_filter
from labkit.emulator.store import TERMINAL_STATES, JobStore, new_numeric_id, now_rfc3339
from labkit.emulator.validation import normalize_keys, validate_custom_job

HOST = "127.0.0.1"
DEFAULT_PAGE_SIZE = 100
_PARENT = r"projects/[^/]+/locations/[^/]+"
_ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    ("POST", re.compile(rf"^/v1/(?P<parent>{_PARENT})/customJobs$"), "create_job"),
    ("GET", re.compile(rf"^/v1/(?P<parent>{_PARENT})/customJobs$"), "list_jobs"),
    ("GET", re.compile(rf"^/v1/(?P<name>{_PARENT}/customJobs/[^/:]+)$"), "get_job"),
    ("POST", re.compile(rf"^/v1/(?P<name>{_PARENT}/customJobs/[^/:]+):cancel$"), "cancel_job"),
    ("DELETE", re.compile(rf"^/v1/(?P<name>{_PARENT}/customJobs/[^/:]+)$"), "delete_job"),
    ("GET", re.compile(rf"^/v1/(?P<name>{_PARENT}/operations/[^/:]+)$"), "get_operation"),
    ("GET", re.compile(r"^/labkit/v1/info$"), "info"),
    ("GET", re.compile(r"^/labkit/v1/images$"), "list_images"),
    ("POST", re.compile(r"^/labkit/v1/images$"), "register_image"),
    ("GET", re.compile(rf"^/labkit/v1/(?P<name>{_PARENT}/customJobs/[^/:]+)/logs$"), "job_logs"),
]


class Service:
    """Jobs, images and runners behind the HTTP handler; one per state dir."""

    def __init__(
        self,
        state_dir: Path,
        gcs_root: Path,
        port: int,
        restarts: int = 0,
        grace_seconds: float = 5.0,
    ) -> None:
        self.state_dir = Path(state_dir).resolve()
        self.gcs_root = Path(gcs_root).resolve()
        self.port = port
        self.restarts = restarts
        self.grace_seconds = grace_seconds
        self.store = JobStore(self.state_dir)
        self.registry = dockerfile.ImageRegistry(self.state_dir / "images.json")
        self.stopping = threading.Event()
        self._runners: dict[str, runner.JobRunner] = {}
        self._lock = threading.Lock()
        self.recover_interrupted_jobs()

    # ---- lifecycle ----
    def recover_interrupted_jobs(self) -> None:
        """Jobs left RUNNING by a service that died: stop their processes, mark them FAILED."""
        from labkit.emulator.control import kill_recorded_processes

        for job in self.store.all_jobs():
            if job.get("state") in TERMINAL_STATES:
                continue
            kill_recorded_processes(self.store.job_dir(job["name"]))
            self.store.update(
                job["name"],
                state="JOB_STATE_FAILED",
                endTime=now_rfc3339(),
                error={
                    "code": runner.CODE_UNAVAILABLE,
                    "message": "The local Vertex AI service stopped while this job ran. "
                    "Submit the job again.",
                },
            )

    def shutdown(self) -> None:
        """Stop every running job (their processes end within the grace period)."""
        self.stopping.set()
        with self._lock:
            runners = list(self._runners.values())
        for job_runner in runners:
            job_runner.cancel.set()
        for job_runner in runners:
            job_runner.join(timeout=self.grace_seconds + 10)

    # ---- custom jobs ----
    def create_job(self, parent: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.stopping.is_set():
            raise ApiError(503, "UNAVAILABLE", "The local Vertex AI service is stopping.")
        job = normalize_keys(body)
        validate_custom_job(job)
        created = self.store.create(parent, job)
        self.store.append_event(created["name"], "[emulator] state JOB_STATE_PENDING")
        job_runner = runner.JobRunner(
            created["name"],
            self.store,
            self.registry,
            self.gcs_root,
            self.restarts,
            self.stopping,
            grace_seconds=self.grace_seconds,
        )
        with self._lock:
            self._runners[created["name"]] = job_runner
        job_runner.start()
        return created

    def get_job(self, name: str) -> dict[str, Any]:
        return self.store.get(name)

    def list_jobs(self, parent: str, query: dict[str, str]) -> dict[str, Any]:
        matches = compile_filter(query.get("filter"))
        jobs = [job for job in self.store.list(parent) if matches(job)]
        try:
            size = int(query.get("pageSize") or DEFAULT_PAGE_SIZE)
            start = int(query.get("pageToken") or 0)
        except ValueError as err:
            raise bad_request(f"pageSize and pageToken must be integers: {err}") from err
        size = size if size > 0 else DEFAULT_PAGE_SIZE
        page = jobs[start : start + size]
        answer: dict[str, Any] = {"customJobs": page}
        if start + size < len(jobs):
            answer["nextPageToken"] = str(start + size)
        return answer

    def cancel_job(self, name: str) -> dict[str, Any]:
        job = self.store.get(name)
        if job["state"] in TERMINAL_STATES:
            raise failed_precondition(
                f"Cannot cancel {name}: it is already in the terminal state {job['state']}."
            )
        self.store.update(name, state="JOB_STATE_CANCELLING")
        self.store.append_event(name, "[emulator] cancel requested: state JOB_STATE_CANCELLING")
        with self._lock:
            job_runner = self._runners.get(name)
        if job_runner is not None:
            job_runner.cancel.set()
        return {}

    def delete_job(self, name: str) -> dict[str, Any]:
        self.store.get(name)  # 404 before anything else
        with self._lock:
            job_runner = self._runners.pop(name, None)
        if job_runner is not None and job_runner.is_alive():
            job_runner.deleting = True
            job_runner.cancel.set()
            job_runner.join(timeout=self.grace_seconds + 10)
        self.store.delete(name)
        parent = name.split("/customJobs/")[0]
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

    def get_operation(self, name: str) -> dict[str, Any]:
        return self.store.get_operation(name)

    # ---- the kit's own endpoints ----
    def info(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "port": self.port,
            "url": f"http://{HOST}:{self.port}",
            "stateDir": str(self.state_dir),
            "gcsRoot": str(self.gcs_root),
            "restarts": self.restarts,
            "images": self.registry.images(),
            "python": sys.executable,
        }

    def register_image(self, body: dict[str, Any]) -> dict[str, Any]:
        uri, context = body.get("imageUri"), body.get("buildContext")
        if not uri or not context:
            raise bad_request('Send {"imageUri": URI, "buildContext": FOLDER}.')
        try:
            self.registry.register(uri, context)
        except dockerfile.ImageError as err:
            raise bad_request(str(err)) from err
        return {"images": self.registry.images()}

    def job_logs(self, name: str, query: dict[str, str]) -> dict[str, Any]:
        self.store.get(name)
        tail = int(query["tail"]) if query.get("tail") else None
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


class Handler(BaseHTTPRequestHandler):
    """Routes requests to the `Service`; every error answers Google's error JSON."""

    service: Service  # set on the subclass `make_server` creates
    quiet = False
    protocol_version = "HTTP/1.1"

    def _dispatch(self, method: str) -> None:
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        try:
            for route_method, pattern, action in _ROUTES:
                match = pattern.match(parts.path)
                if match and route_method == method:
                    answer = self._call(action, match.groupdict(), query)
                    self._send(200, answer)
                    return
            if any(p.match(parts.path) for _, p, _ in _ROUTES):
                raise unimplemented(method, parts.path)
            raise not_found(f"Resource {parts.path}")
        except ApiError as err:
            self._send(err.http_status, err.to_json())
        except Exception as err:  # a bug must still answer, or the SDK waits for its timeout
            self._send(500, ApiError(500, "INTERNAL", f"local service error: {err!r}").to_json())

    def _call(self, action: str, params: dict[str, str], query: dict[str, str]) -> Any:
        method: Callable[..., Any] = getattr(self.service, action)
        if action in ("create_job", "register_image"):
            body = self._read_json()
            return method(params["parent"], body) if "parent" in params else method(body)
        if action in ("list_jobs",):
            return method(params["parent"], query)
        if action == "job_logs":
            return method(params["name"], query)
        return method(**params)

    def _read_json(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as err:
            raise bad_request(f"Invalid JSON payload received: {err}") from err
        if not isinstance(body, dict):
            raise bad_request("Invalid JSON payload received: expected an object.")
        return body

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def do_DELETE(self) -> None:  # noqa: N802
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:  # noqa: N802
        self._dispatch("PATCH")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        if not self.quiet:
            sys.stderr.write(f"{now_rfc3339()} {self.address_string()} {format % args}\n")


def make_server(service: Service, port: int, quiet: bool = False) -> ThreadingHTTPServer:
    """Bind 127.0.0.1:port (0 = any free port) with a handler class bound to ``service``."""
    handler = type("BoundHandler", (Handler,), {"service": service, "quiet": quiet})
    server = ThreadingHTTPServer((HOST, port), handler)
    server.daemon_threads = True
    service.port = server.server_address[1]
    return server


def serve_until_stopped(service: Service, server: ThreadingHTTPServer) -> None:
    """Serve until SIGTERM/SIGINT, then stop every job before returning."""

    def request_stop(signum: int, frame: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        service.shutdown()
        server.server_close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
