"""Shared fixtures. Each is self-contained; names say which tests they serve."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import pytest

# `make test-fast` (pytest -m "not slow") leaves these out. Marked here, by file and by
# fixture, rather than in each file: a test joins the slow set by what it runs.
# Files whose every test starts several processes, a TensorFlow training, or a notebook
# kernel (measured: each takes from 10 s to minutes on the 2-core CI machine).
SLOW_FILES = {
    "test_cluster.py",  # real multi-process clusters and their supervisors, signals, timeouts
    "test_multiworker.py",  # 2-worker MWMS training
    "test_restarts.py",  # Vertex's restart rules with real replicas
    "test_model_output_dir.py",  # the kit's and the codelab's trainers as processes
    "test_trainer_bad_input.py",  # the trainer as a process on corrupt data
    "test_exercise_notebooks.py",  # notebook 03/04's exercise cells in a kernel
    "test_sdk_cells.py",  # notebook 04's SDK cells run a 2-replica job from a bare kernel
    "test_jupyterlab.py",  # notebook 03 run cell by cell in JupyterLab, in Chromium
}
# Fixtures that run the whole lab (several minutes): any test using one is slow.
SLOW_FIXTURES = {"nbval_lab", "other_lab"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in SLOW_FILES or SLOW_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.slow)


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def assert_gone() -> Callable[[Iterable[int]], None]:
    """``assert_gone(pids)``: fails if any of these processes still runs after a few seconds.

    Killed processes take a moment to be reaped by init, hence the short wait.
    """

    def check(pids: Iterable[int], within: float = 5.0) -> None:
        pids = list(pids)
        assert pids, "no process ids to check: the test did not find the replicas"
        deadline = time.monotonic() + within
        while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
            time.sleep(0.1)
        survivors = [pid for pid in pids if _alive(pid)]
        assert not survivors, f"processes outlived their job: {survivors}"

    return check


@pytest.fixture(scope="session")
def sample_for_jobs():
    """The kit's synthetic cassava sample (made once, reused): for trainer-backed job tests."""
    from labkit.course.sample import ensure_sample

    return ensure_sample()


@pytest.fixture(scope="session")
def nbval_lab(tmp_path_factory, sample_for_jobs):
    """The six zh-CN notebooks executed once under nbval (tests/lab_runs.py): the notebook tests
    check its cells and records, tests/test_training.py the model notebook 02 trained."""
    from lab_runs import run_lab_under_nbval

    return run_lab_under_nbval(
        tmp_path_factory.mktemp("lab-home"), tmp_path_factory.mktemp("notebooks"), sample_for_jobs
    )


@pytest.fixture(scope="session")
def other_lab(tmp_path_factory, sample_for_jobs):
    """The English 00-03 run by `python -m labkit lab` with parameters no other test uses
    (tests/lab_runs.py `OTHER_PARAMETERS`): the claims must hold there too."""
    from lab_runs import run_lab_with_other_parameters

    return run_lab_with_other_parameters(
        tmp_path_factory.mktemp("other-home"),
        tmp_path_factory.mktemp("other-run") / "run",
        sample_for_jobs,
    )


# ---- the local Vertex AI service (tests/test_emulator*.py) ----

DEMO_IMAGE_URI = "us-central1-docker.pkg.dev/local-project/demo/app:1"
DEMO_DOCKERFILE = """\
FROM python:3.11-slim AS base
ENV GREETING="hello from the image"
WORKDIR /app
COPY app.py /app/app.py
ENTRYPOINT ["python", "app.py"]
CMD ["--sleep", "0"]
"""
# A replica without TensorFlow: prints what Vertex gave it, then sleeps / fails as asked.
# FAIL_TASK=worker:0 fails that replica (after FAIL_AFTER s); FAIL_ONCE=1 only on the first
# attempt (a marker in AIP_CHECKPOINT_DIR, as the trainer's fault hook does).
DEMO_APP = """\
import json, os, sys, time
tf = json.loads(os.environ["TF_CONFIG"])
task = f"{tf['task']['type']}:{tf['task']['index']}"
print(f"task={task} pid={os.getpid()} greeting={os.environ.get('GREETING')}", flush=True)
print("tf_config=" + os.environ["TF_CONFIG"], flush=True)
print("cluster_spec=" + os.environ["CLUSTER_SPEC"], flush=True)
print("model_dir=" + os.environ.get("AIP_MODEL_DIR", ""), flush=True)
print("argv=" + json.dumps(sys.argv[1:]), flush=True)
print("cwd=" + os.getcwd(), flush=True)
marker = os.path.join(os.environ.get("AIP_CHECKPOINT_DIR", "."), "failed-once-" + task)
if os.environ.get("FAIL_TASK") == task and not (os.environ.get("FAIL_ONCE") and os.path.exists(marker)):
    time.sleep(float(os.environ.get("FAIL_AFTER", "0.5")))
    os.makedirs(os.path.dirname(marker), exist_ok=True)
    open(marker, "w").close()
    code = int(os.environ.get("FAIL_CODE", "3"))
    print(f"preempted: exiting with {code}", flush=True)
    sys.exit(code)
time.sleep(float(sys.argv[sys.argv.index("--sleep") + 1]))
print("finished", flush=True)
"""


@pytest.fixture
def demo_build_context(tmp_path_factory):
    """A build context of its own (Dockerfile + script): image resolution is general."""
    folder = tmp_path_factory.mktemp("demo-image")
    (folder / "Dockerfile").write_text(DEMO_DOCKERFILE)
    (folder / "app.py").write_text(DEMO_APP)
    return folder


class LocalVertex:
    """A running local service in a temp state dir, and the SDK pointed at it."""

    def __init__(self, state_dir, settings, images):
        self.state_dir = state_dir
        self.settings = settings
        self.images = images
        self.status = None

    @property
    def port(self) -> int:
        return self.settings.emulator_port

    @property
    def gcs_root(self):
        return self.state_dir / "gcs"

    @property
    def token(self) -> str:
        """The session token the running service made (its state folder's ``token``)."""
        from labkit.local.guard import read_token

        return read_token(self.state_dir)

    def auth(self) -> dict[str, str]:
        """The header every request to the service needs."""
        return {"Authorization": f"Bearer {self.token}"}

    def post(self, path: str, body: dict) -> tuple[int, dict]:
        """POST JSON to one of the service's routes, signed; (HTTP status, answer)."""
        import json
        import urllib.error
        import urllib.request

        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=json.dumps(body).encode(),
            headers={**self.auth(), "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def start(self):
        from labkit.local.vertex import ensure_local_service, init_vertex

        self.status = ensure_local_service(
            self.settings, state_dir=self.state_dir, images=self.images
        )
        init_vertex(self.settings, ensure_service=False)
        return self.status

    def stop(self) -> list[int]:
        """Stop the service; returns the pid that was serving (to check it is gone)."""
        from labkit.local.emulator import control

        pid = control.status(self.state_dir).pid
        control.stop(self.state_dir)
        return [pid] if pid else []


IN_PROCESS_PORT = 8765
IN_PROCESS_TOKEN = "in-process-test-token"


def in_process_client(service, **kwargs):
    """A Starlette TestClient on ``create_app(service, guard)``, addressed and signed as the
    kit's clients are (127.0.0.1:PORT, the bearer token); ``headers`` replace the token."""
    import warnings

    with warnings.catch_warnings():  # Starlette 1.10 prefers httpx2; the kit has httpx only
        warnings.filterwarnings("ignore", "Using `httpx` with `starlette.testclient`")
        from starlette.testclient import TestClient

    from labkit.local.emulator.server import create_app, service_guard

    app = create_app(service, service_guard(IN_PROCESS_TOKEN, IN_PROCESS_PORT))
    headers = kwargs.pop("headers", {"Authorization": f"Bearer {IN_PROCESS_TOKEN}"})
    return TestClient(
        app, base_url=f"http://127.0.0.1:{IN_PROCESS_PORT}", headers=headers, **kwargs
    )


@pytest.fixture
def local_vertex(tmp_path, demo_build_context, assert_gone):
    """The local Vertex AI service on a free port, state in tmp; stopped, leaving nothing."""
    from labkit.cloud.paths import REPO_ROOT
    from labkit.cloud.settings import Settings
    from labkit.local import vertex_env

    settings = Settings(
        mode="local",
        project_id="local-project",
        bucket="emu-test-bucket",
        emulator_port=vertex_env.free_ports(1)[0],
    )
    service = LocalVertex(
        tmp_path / "vertex",
        settings,
        {DEMO_IMAGE_URI: str(demo_build_context), settings.image_uri: str(REPO_ROOT)},
    )
    service.start()
    yield service
    pids = service.stop()
    for processes in (service.state_dir / "jobs").glob("*/processes.json"):
        raise AssertionError(f"replica processes still recorded after stop: {processes}")
    if pids:
        assert_gone(pids)
