"""Start, stop and inspect the local service as a background process with a pid file.

The service must outlive one notebook kernel (04 submits, 05 cleans up), so `start` runs
``python -m labkit emulator serve`` in its own session with its output in
``<state>/server.log``, and waits until it answers. `stop` sends SIGTERM (the service then
stops every job's replicas), falls back to SIGKILL, and finally kills any replica process
group still recorded under ``jobs/*/processes.json``, so nothing is left behind even when
the service itself could not clean up.

Every request to the service carries its session token (`labkit.local.guard`): `request_json`
is the one place the kit's own HTTP calls add it. The token is read from the state folder of
the service (`status` remembers it per port), so callers that know only a port
(`labkit.local.vertex`, the console client) find it with `token_for`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from labkit.cloud.paths import REPO_ROOT, emulator_state_dir, local_gcs_root
from labkit.local.guard import read_token
from labkit.local.vertex_env import without_vertex_variables

PID_FILE = "emulator.pid"
SERVER_LOG = "server.log"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0
# port -> the session token of the service found there (filled by `status`)
_TOKENS: dict[int, str] = {}


class ServiceError(RuntimeError):
    """The service answered an error: its HTTP status and Google's error message."""

    def __init__(self, http_status: int, message: str) -> None:
        super().__init__(message)
        self.http_status = http_status


@dataclasses.dataclass
class ServiceStatus:
    running: bool
    state_dir: Path
    pid: int | None = None
    port: int | None = None
    gcs_root: str | None = None
    images: dict[str, str] = dataclasses.field(default_factory=dict)
    detail: str = ""
    token: str | None = dataclasses.field(default=None, repr=False)

    @property
    def url(self) -> str | None:
        return f"http://127.0.0.1:{self.port}" if self.port else None


def resolve_state_dir(state_dir: str | Path | None) -> Path:
    return Path(state_dir).expanduser().resolve() if state_dir else emulator_state_dir()


def gcs_root_for(state_dir: Path, explicit_state: bool) -> Path:
    """The kit's local bucket root, unless a state dir was chosen: then ``<state>/gcs``.

    The default keeps job outputs where the rest of the kit (notebooks, cleanup) looks for
    `gs://` paths; a chosen state dir (tests, a second service) keeps everything inside it.
    """
    return state_dir / "gcs" if explicit_state else local_gcs_root()


def token_for(port: int) -> str:
    """The session token of the service on ``port``: the one `status` last found there, else
    the default state folder's when its service runs on that port."""
    if port not in _TOKENS:
        record = _read_pid_file(emulator_state_dir())
        token = read_token(emulator_state_dir())
        if record and int(record.get("port", -1)) == port and token:
            _TOKENS[port] = token
    if port not in _TOKENS:
        raise RuntimeError(
            f"no session token known for the local service on port {port}: start it with "
            "`python -m labkit emulator start`, or read it with "
            "`python -m labkit emulator token --state DIR`"
        )
    return _TOKENS[port]


def request_json(
    port: int,
    path: str,
    *,
    method: str = "GET",
    body: Any = None,
    token: str | None = None,
    timeout: float = 10.0,
) -> Any:
    """Call the service with its session token; the answer's JSON. Raises ServiceError with
    the service's own message for an error answer, OSError when nothing answers."""
    import urllib.error  # lazily: the service's start stays fast
    import urllib.request

    headers = {"Authorization": f"Bearer {token or token_for(port)}"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, headers=headers, method=method
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as err:
        try:
            message = json.loads(err.read() or b"{}").get("error", {}).get("message", str(err))
        except ValueError:
            message = str(err)
        raise ServiceError(err.code, message) from None


def fetch_info(port: int, token: str, timeout: float = 2.0) -> dict[str, Any] | None:
    """The service's ``/labkit/v1/info``, or None when nothing (or something else) answers."""
    try:
        return request_json(port, "/labkit/v1/info", token=token, timeout=timeout)
    except (ServiceError, OSError, ValueError):
        return None


def register_image(port: int, image_uri: str, build_context: str | Path) -> dict[str, str]:
    """Register an image with a running service; returns every registered image."""
    body = {"imageUri": image_uri, "buildContext": str(Path(build_context).resolve())}
    try:
        return request_json(port, "/labkit/v1/images", method="POST", body=body)["images"]
    except ServiceError as err:
        raise ValueError(str(err)) from None


def _pid_alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _read_pid_file(state_dir: Path) -> dict[str, Any] | None:
    path = state_dir / PID_FILE
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_pid_file(state_dir: Path, port: int) -> None:
    from labkit.local.emulator.store import write_json_atomic

    write_json_atomic(state_dir / PID_FILE, {"pid": os.getpid(), "port": port})


def remove_pid_file(state_dir: Path) -> None:
    record = _read_pid_file(state_dir)
    if record and record.get("pid") == os.getpid():
        (state_dir / PID_FILE).unlink(missing_ok=True)


def status(state_dir: str | Path | None = None) -> ServiceStatus:
    """Running means: the pid file's process lives and answers on its port as that pid."""
    folder = resolve_state_dir(state_dir)
    record = _read_pid_file(folder)
    if not record:
        return ServiceStatus(False, folder, detail=f"not running (no {PID_FILE} in {folder})")
    pid, port = int(record["pid"]), int(record["port"])
    token = read_token(folder)
    info = fetch_info(port, token) if token else None
    if info and info.get("pid") == pid and token:
        _TOKENS[port] = token
        return ServiceStatus(
            True, folder, pid, port, info.get("gcsRoot"), info.get("images", {}), "running", token
        )
    if _pid_alive(pid):
        return ServiceStatus(
            False, folder, pid, port, detail=f"pid {pid} lives but does not answer on port {port}"
        )
    return ServiceStatus(
        False, folder, pid, port, detail=f"not running (stale pid file for pid {pid})"
    )


def start(
    state_dir: str | Path | None = None,
    port: int = 8765,
    images: dict[str, str] | None = None,
    timeout: float = START_TIMEOUT_S,
) -> ServiceStatus:
    """Start the service in the background unless it already runs for this state dir."""
    folder = resolve_state_dir(state_dir)
    current = status(folder)
    if current.running:
        if images:
            for uri, context in images.items():
                register_image(current.port or port, uri, context)
            current = status(folder)
        return current
    if current.pid and _pid_alive(current.pid):
        raise RuntimeError(
            f"the service for {folder} (pid {current.pid}) does not answer; stop it with "
            f"`python -m labkit emulator stop --state {folder}` and start it again"
        )
    folder.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "labkit", "emulator", "serve", "--port", str(port)]
    if state_dir is not None:  # only then does gs:// map under <state>/gcs (see gcs_root_for)
        argv += ["--state", str(folder)]
    for uri, context in (images or {}).items():
        argv += ["--image", f"{uri}={context}"]
    log_path = folder / SERVER_LOG
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            env=without_vertex_variables(os.environ),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives the notebook kernel or shell that started it
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
            raise RuntimeError(f"the local Vertex AI service exited at start:\n{tail}")
        now = status(folder)
        if now.running and now.pid == proc.pid:
            return now
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(
        f"the local Vertex AI service did not answer within {timeout:g} s; see {log_path}"
    )


def kill_recorded_processes(job_dir: Path) -> list[int]:
    """Kill the process groups recorded for a job, if they are still those processes."""
    from labkit.local.supervisor import kill_recorded

    return kill_recorded(job_dir)


def stop(state_dir: str | Path | None = None, timeout: float = STOP_TIMEOUT_S) -> bool:
    """Stop the service and every job process; True if a service was running."""
    import psutil

    folder = resolve_state_dir(state_dir)
    record = _read_pid_file(folder)
    was_running = False
    if record:
        pid = int(record["pid"])
        try:
            proc = psutil.Process(pid)
            is_ours = "emulator" in " ".join(proc.cmdline()) and "labkit" in " ".join(
                proc.cmdline()
            )
        except psutil.NoSuchProcess:
            is_ours = False
        if is_ours:
            was_running = True
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except psutil.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        (folder / PID_FILE).unlink(missing_ok=True)
    for job_dir in sorted((folder / "jobs").glob("*")):
        kill_recorded_processes(job_dir)
    return was_running
