"""Image resolution without Docker, list filters and the service's request validation (the
job-spec core, `labkit.cloud.specs`, turned into Vertex's error JSON): fast unit tests."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from labkit.cloud import specs
from labkit.cloud.paths import REPO_ROOT
from labkit.local.emulator import dockerfile, filters
from labkit.local.emulator.errors import ApiError


def write_context(folder: Path, text: str, files: dict[str, str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Dockerfile").write_text(text)
    for name, content in (files or {}).items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return folder


def test_final_stage_settings_and_docker_argv_rules(tmp_path):
    context = write_context(
        tmp_path / "ctx",
        "ARG BASE=python:3.11\n"
        "FROM ${BASE} AS build\n"
        "ENV BUILD_ONLY=1\n"
        "RUN pip install something\n"
        "FROM build AS final\n"
        'ENV GREETING="two words" CONFIG=/srv/conf.yaml\n'
        "WORKDIR /srv\n"
        "WORKDIR app\n"
        'COPY ["src/", "/srv/app/"]\n'
        "COPY --chown=1:1 conf.yaml /srv/\n"
        "COPY --from=build /usr/lib/x /x\n"
        'ENTRYPOINT ["python3", "-m", "pkg.main"]\n'
        'CMD ["--epochs", "2"]\n',
        {"src/pkg/__init__.py": "", "src/pkg/main.py": "print('hi')\n", "conf.yaml": "a: 1\n"},
    )
    plan = dockerfile.read_dockerfile("img:1", context)
    assert plan.workdir == "/srv/app"
    assert plan.env == {"BUILD_ONLY": "1", "GREETING": "two words", "CONFIG": "/srv/conf.yaml"}
    assert plan.copies == [(["src/"], "/srv/app/"), (["conf.yaml"], "/srv/")]
    assert any("--from=build" in note for note in plan.notes)
    assert plan.base == "python:3.11", "the ARG before FROM is substituted; stages are followed"
    assert [run.command for run in plan.runs] == ["pip install something"]
    assert plan.runs[0].workdir == "/" and plan.runs[0].copies == ()

    assert dockerfile.container_argv(plan, None, None) == [
        "python3",
        "-m",
        "pkg.main",
        "--epochs",
        "2",
    ]
    assert dockerfile.container_argv(plan, None, ["--epochs", "5"]) == [
        "python3", "-m", "pkg.main", "--epochs", "5",
    ]  # fmt: skip
    assert dockerfile.container_argv(plan, ["bash", "-c", "env"], None) == ["bash", "-c", "env"]

    root = tmp_path / "rootfs"
    cwd = dockerfile.build_rootfs(plan, root)
    assert cwd == root / "srv" / "app"
    assert (cwd / "pkg" / "main.py").read_text() == "print('hi')\n"
    assert (root / "srv" / "conf.yaml").resolve() == (context / "conf.yaml").resolve()
    env = dockerfile.container_env(plan, root)
    assert env["CONFIG"] == str(root / "srv" / "conf.yaml")  # a container path, mapped
    assert env["GREETING"] == "two words"


def test_rootfs_never_writes_into_the_build_context(tmp_path):
    context = write_context(
        tmp_path / "ctx",
        "FROM scratch\nCOPY . /app\nCOPY extra/cfg.txt /app/sub/cfg.txt\nWORKDIR /app/sub\n"
        "ENTRYPOINT python run.py\n",
        {"run.py": "", "sub/keep.txt": "k", "extra/cfg.txt": "c"},
    )
    before = sorted(p.relative_to(context) for p in context.rglob("*"))
    plan = dockerfile.read_dockerfile("img", context)
    cwd = dockerfile.build_rootfs(plan, tmp_path / "root")
    assert sorted(p.relative_to(context) for p in context.rglob("*")) == before
    assert (cwd / "cfg.txt").read_text() == "c" and (cwd / "keep.txt").read_text() == "k"
    assert (tmp_path / "root" / "app" / "run.py").exists()
    # Shell form runs under /bin/sh -c and ignores args, as in Docker.
    assert dockerfile.container_argv(plan, None, ["--x"]) == ["/bin/sh", "-c", "python run.py"]


def test_the_kits_dockerfile_runs_the_trainer_module(tmp_path):
    if not (REPO_ROOT / "Dockerfile").is_file():
        pytest.skip("the repository's Dockerfile is not written yet")
    plan = dockerfile.read_dockerfile("kit:1", REPO_ROOT)
    assert dockerfile.container_argv(plan, None, None) == ["python", "-m", "trainer.task"]
    assert plan.base.startswith("tensorflow/tensorflow:")
    root = tmp_path / "rootfs"
    cwd = dockerfile.build_rootfs(plan, root)
    env = dockerfile.container_env(plan, root)
    search = [str(cwd), *env.get("PYTHONPATH", "").split(os.pathsep)]
    assert any((Path(p) / "trainer" / "task.py").is_file() for p in search if p)
    assert "PATH" not in env  # the host's PATH stays


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("FROM python:3.11\nWORKDIR /app\n", "neither ENTRYPOINT nor CMD"),
        ("WORKDIR /app\n", "no FROM instruction"),
    ],
)
def test_unusable_dockerfiles_say_why(tmp_path, text, message):
    context = write_context(tmp_path / "ctx", text)
    with pytest.raises(dockerfile.ImageError, match=message):
        dockerfile.read_dockerfile("img", context)


def test_registry_persists_and_explains_unknown_images(tmp_path):
    context = write_context(tmp_path / "ctx", 'FROM x\nENTRYPOINT ["python"]\n')
    registry = dockerfile.ImageRegistry(tmp_path / "images.json")
    registry.register("europe-docker.pkg.dev/p/r/img", context)
    again = dockerfile.ImageRegistry(tmp_path / "images.json")
    assert again.resolve("europe-docker.pkg.dev/p/r/img:latest").context == context.resolve()
    with pytest.raises(dockerfile.ImageError, match="emulator register other:1=PATH"):
        again.resolve("other:1")
    with pytest.raises(dockerfile.ImageError, match="is not a folder"):
        registry.register("a:1", tmp_path / "missing")
    registry.register("b:1", tmp_path)  # a folder, but without a Dockerfile
    with pytest.raises(dockerfile.ImageError, match="has no Dockerfile"):
        registry.resolve("b:1")
    assert dockerfile.parse_image_option("host:5000/img:tag=./ctx") == (
        "host:5000/img:tag",
        "./ctx",
    )
    with pytest.raises(ValueError, match="URI=BUILD_CONTEXT"):
        dockerfile.parse_image_option("no-context")


JOBS = [
    {"displayName": "a", "state": "JOB_STATE_SUCCEEDED", "labels": {"lab": "cassava"},
     "createTime": "2026-01-02T00:00:00Z"},
    {"displayName": "b", "state": "JOB_STATE_RUNNING", "labels": {"lab": "cassava", "x": "1"},
     "createTime": "2026-01-03T00:00:00Z"},
    {"displayName": "c", "state": "JOB_STATE_FAILED", "labels": {}, "createTime": "2026-01-04T00:00:00Z"},
]  # fmt: skip


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ('labels.lab="cassava"', ["a", "b"]),
        ("labels.lab=cassava AND state=JOB_STATE_RUNNING", ["b"]),
        ('state="JOB_STATE_FAILED" OR labels.x:*', ["b", "c"]),
        ('NOT labels.lab="cassava"', ["c"]),
        ('-labels.lab:* OR (display_name="a" AND state!="JOB_STATE_RUNNING")', ["a", "c"]),
        ('create_time>"2026-01-02T12:00:00Z"', ["b", "c"]),
        ("", ["a", "b", "c"]),
    ],
)
def test_list_filters(expression, names):
    predicate = filters.compile_filter(expression)
    assert [job["displayName"] for job in JOBS if predicate(job)] == names


@pytest.mark.parametrize("expression", ['colour="red"', 'labels.lab="x" AND', '(state="X"'])
def test_bad_filters_are_400(expression):
    with pytest.raises(ApiError) as err:
        filters.compile_filter(expression)
    assert err.value.http_status == 400


def valid_job(**spec_changes):
    pool = {
        "replicaCount": "1",
        "machineSpec": {"machineType": "n1-standard-4"},
        "containerSpec": {"imageUri": "img:1"},
    }
    spec = {"workerPoolSpecs": [pool, dict(pool, replicaCount="2")], **spec_changes}
    return {"displayName": "ok", "jobSpec": spec, "labels": {"lab": "cassava"}}


def test_validation_collects_every_problem():
    from labkit.local.emulator.http import spec_error_to_api

    assert specs.validate_custom_job(valid_job()) == []
    bad = valid_job(scheduling={"timeout": "soon"})
    bad["labels"] = {"Lab": "Cassava"}
    bad["jobSpec"]["workerPoolSpecs"].append({"replicaCount": 0, "machineSpec": {}})
    with pytest.raises(specs.SpecError) as err:
        specs.raise_for_problems(specs.validate_custom_job(bad), vertex_only=True)
    api = spec_error_to_api(err.value)
    assert (api.http_status, api.status) == (400, "INVALID_ARGUMENT")
    fields = [v.field for v in api.violations]
    assert fields == [
        "labels.Lab",
        "job_spec.worker_pool_specs[2].replica_count",
        "job_spec.worker_pool_specs[2].machine_spec.machine_type",
        "job_spec.worker_pool_specs[2].container_spec",
        "job_spec.scheduling.timeout",
    ]
    assert api.message.startswith("List of found errors:\t1.Field: labels.Lab")
    assert all("Fix: " in v.description for v in api.violations)
    paths = [p.path for p in err.value.problems]
    assert paths[2] == "jobSpec.workerPoolSpecs[2].machineSpec.machineType"


def test_snake_case_bodies_are_accepted_and_job_field_is_snake_case():
    body = {"display_name": "x", "job_spec": {"worker_pool_specs": [{"replica_count": 1}]},
            "labels": {"lab_run": "r"}}  # fmt: skip
    camel = specs.camel_keys(body)
    assert camel == {"displayName": "x", "jobSpec": {"workerPoolSpecs": [{"replicaCount": 1}]},
                     "labels": {"lab_run": "r"}}  # fmt: skip
    assert specs.snake_keys({k: v for k, v in camel.items() if k != "labels"}) == {
        k: v for k, v in body.items() if k != "labels"
    }
    assert specs.parse_duration("1.5s") == 1.5


def test_service_module_starts_without_tensorflow_or_the_sdk(tmp_path):
    """Issue 15: the service starts fast because its start imports neither."""
    import subprocess

    code = (
        "import sys; from pathlib import Path\n"
        "from labkit.local.emulator.server import create_app, service_guard\n"
        "from labkit.local.emulator.service import Service\n"
        f"service = Service(Path({str(tmp_path)!r}), Path({str(tmp_path / 'gcs')!r}), 0)\n"
        "create_app(service, service_guard('t', 0))\n"
        "heavy = [m for m in ('tensorflow', 'google.cloud.aiplatform', 'keras') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# Starlette 1.10's TestClient prefers the httpx2 package; the kit has httpx (via jupyterlab) and
# no other use for httpx2, so its deprecation notice is expected here.
@pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
def test_app_factory_in_process_routes_and_errors(tmp_path):
    """`create_app(service, guard)` as the console uses it: same routes, Google's error JSON."""
    from conftest import in_process_client

    from labkit.local.emulator.service import Service

    service = Service(tmp_path / "state", tmp_path / "gcs", 0)
    client = in_process_client(service)
    assert client.get("/labkit/v1/info").json()["stateDir"] == str((tmp_path / "state").resolve())
    parent = "/v1/projects/p/locations/us-central1"
    bad = valid_job()
    bad["jobSpec"]["workerPoolSpecs"][1]["machineSpec"] = {
        "machineType": "n1-standard-4",
        "acceleratorType": "NVIDIA_H100_80GB",
        "acceleratorCount": 1,
    }
    answer = client.post(f"{parent}/customJobs?%24alt=json%3Benum-encoding%3Dint", json=bad)
    assert answer.status_code == 400
    (violation,) = answer.json()["error"]["details"][0]["fieldViolations"]
    assert violation["field"] == "job_spec.worker_pool_specs[1].machine_spec.accelerator_type"
    with pytest.raises(specs.SpecError) as err:  # the same check, in process
        service.create_custom_job("projects/p/locations/us-central1", bad)
    assert err.value.problems[0].path == "jobSpec.workerPoolSpecs[1].machineSpec.acceleratorType"
    assert (
        client.patch(f"{parent}/customJobs/1", json={}).json()["error"]["status"] == "UNIMPLEMENTED"
    )
    assert client.get(f"{parent}/customJobs/1").status_code == 404
    assert client.get(f"{parent}/trainingPipelines").json() == {"trainingPipelines": []}
    assert client.get("/nowhere").json()["error"]["status"] == "NOT_FOUND"
