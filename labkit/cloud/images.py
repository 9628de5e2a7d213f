"""The trainer image: the exact commands that build it and push it to Artifact Registry.

Two routes, both ending at ``REGION-docker.pkg.dev/PROJECT/REPOSITORY/IMAGE:TAG``
(`Settings.image_uri`; Container Registry, gcr.io, takes no pushes since 2025-03-18):

- ``docker``: build with the local Docker engine (Workbench instances have one) and push.
- ``cloud-build``: ``gcloud builds submit`` with ``cloudbuild.yaml``; nothing runs locally.

Both first make sure the repository exists (`labkit.cloud.registry`, through Google's
Artifact Registry client), creating it with the kit's labels, and label the image itself
(``LABEL lab=cassava`` in the Dockerfile, ``lab-run=<run id>`` at build time).
Every function returns commands as argv lists, so a notebook can show them
(`format_commands`) and `run_commands` can run them in cloud mode. In local mode nothing is
run: the local Vertex AI service resolves the kit's image URI to this repository's
Dockerfile by itself.
"""

from __future__ import annotations

import dataclasses
import shlex
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from labkit.cloud import paths, registry
from labkit.cloud.settings import Settings
from labkit.i18n import gettext

ROUTES = ("docker", "cloud-build")
Command = list[str]


def _labels_flag(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in labels.items())


def registry_host(settings: Settings) -> str:
    return f"{settings.region}-docker.pkg.dev"


def repository_path(settings: Settings) -> str:
    """``REGION-docker.pkg.dev/PROJECT/REPOSITORY``: where the kit's images live."""
    return f"{registry_host(settings)}/{settings.project_id}/{settings.artifact_repo}"


def image_path(settings: Settings) -> str:
    """The image without its tag, the unit Artifact Registry lists and deletes."""
    return f"{repository_path(settings)}/{settings.image_name}"


# --------------------------------------------------------------------------- repository


def describe_repository_command(settings: Settings) -> Command:
    """Succeeds (exit 0, JSON with ``labels``) when the repository exists."""
    return [
        "gcloud", "artifacts", "repositories", "describe", settings.artifact_repo,
        f"--location={settings.region}", f"--project={settings.project_id}", "--format=json",
    ]  # fmt: skip


def create_repository_command(settings: Settings) -> Command:
    return [
        "gcloud", "artifacts", "repositories", "create", settings.artifact_repo,
        "--repository-format=docker",
        f"--location={settings.region}",
        f"--project={settings.project_id}",
        f"--description={registry.REPOSITORY_DESCRIPTION}",
        f"--labels={_labels_flag(settings.labels)}",
    ]  # fmt: skip


def list_kit_repositories_command(settings: Settings) -> Command:
    """The repositories carrying the kit's label, as JSON."""
    from labkit import KIT_LABEL_KEY, KIT_LABEL_VALUE

    return [
        "gcloud", "artifacts", "repositories", "list",
        f"--location={settings.region}", f"--project={settings.project_id}",
        f"--filter=labels.{KIT_LABEL_KEY}={KIT_LABEL_VALUE}", "--format=json",
    ]  # fmt: skip


# --------------------------------------------------------------------------- build and push


def configure_docker_command(settings: Settings) -> Command:
    """Let the local Docker push to the region's Artifact Registry host."""
    return ["gcloud", "auth", "configure-docker", registry_host(settings), "--quiet"]


def docker_build_command(settings: Settings, context: Path | None = None) -> Command:
    context = Path(context or paths.REPO_ROOT)
    run = settings.labels.get("lab-run", settings.run_id)
    return [
        "docker", "build",
        f"--build-arg=LAB_RUN={run}",
        *[f"--label={k}={v}" for k, v in settings.labels.items()],
        f"--tag={settings.image_uri}",
        str(context),
    ]  # fmt: skip


def docker_push_command(settings: Settings) -> Command:
    return ["docker", "push", settings.image_uri]


def cloud_build_command(settings: Settings, context: Path | None = None) -> Command:
    """``gcloud builds submit`` with the repository's cloudbuild.yaml.

    The source tarball is staged in the kit's bucket (not Cloud Build's default
    ``PROJECT_cloudbuild`` bucket), so cleanup removes it with the bucket.
    """
    context = Path(context or paths.REPO_ROOT)
    return [
        "gcloud", "builds", "submit", str(context),
        f"--config={context / 'cloudbuild.yaml'}",
        "--ignore-file=.dockerignore",
        f"--project={settings.project_id}",
        f"--region={settings.region}",
        f"--gcs-source-staging-dir={settings.bucket_uri}/cloudbuild-source",
        f"--substitutions=_IMAGE_URI={settings.image_uri},_LAB_RUN={settings.run_id}",
    ]  # fmt: skip


@dataclasses.dataclass(frozen=True)
class PublishPlan:
    """The commands that put the trainer image into Artifact Registry, in order.

    ``ensure_repository``: run ``describe``; only when it fails, run ``create``.
    """

    route: str
    describe_repository: Command
    create_repository: Command
    build_and_push: list[Command]

    def all_commands(self) -> list[Command]:
        return [self.describe_repository, self.create_repository, *self.build_and_push]

    def __str__(self) -> str:
        return "\n".join(
            [
                "# " + gettext("route: {route}").format(route=self.route),
                "# "
                + gettext("1. the Artifact Registry repository, created only if `describe` fails:"),
                format_commands([self.describe_repository]) + " \\",
                "  || " + format_commands([self.create_repository]),
                "# " + gettext("2. build and push the trainer image:"),
                format_commands(self.build_and_push),
            ]
        )


def publish_plan(
    settings: Settings, route: str = "docker", context: Path | None = None
) -> PublishPlan:
    if route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}, got {route!r}.")
    if route == "docker":
        steps = [
            configure_docker_command(settings),
            docker_build_command(settings, context),
            docker_push_command(settings),
        ]
    else:
        steps = [cloud_build_command(settings, context)]
    return PublishPlan(
        route, describe_repository_command(settings), create_repository_command(settings), steps
    )


def format_commands(commands: Sequence[Command]) -> str:
    """Shell-quoted, one command per line, for a notebook cell or a terminal."""
    return "\n".join(shlex.join(cmd) for cmd in commands)


# --------------------------------------------------------------------------- running


Runner = Callable[[Command], subprocess.CompletedProcess]


def default_runner(cmd: Command) -> subprocess.CompletedProcess:
    """Run a command, echoing it, capturing its output as text."""
    print("$", shlex.join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


class CommandError(RuntimeError):
    """A gcloud or docker command failed; the message carries its output."""


def run_commands(
    commands: Sequence[Command], settings: Settings, *, runner: Runner = default_runner
) -> list[subprocess.CompletedProcess]:
    """Run the commands in order in cloud mode, stopping at the first failure.

    In local mode this refuses: nothing is built there (no Docker engine is needed; the local
    Vertex AI service runs the Dockerfile's entrypoint itself). Show the commands instead.
    """
    if settings.mode != "cloud":
        raise RuntimeError(
            "run_commands runs gcloud/docker against Google Cloud and only in cloud mode. In "
            "local mode show them with format_commands(); the local Vertex AI service runs the "
            "image's Dockerfile entrypoint directly."
        )
    settings.check_cloud_ready()
    results = []
    for cmd in commands:
        result = runner(list(cmd))
        results.append(result)
        if result.returncode != 0:
            raise CommandError(
                f"`{shlex.join(cmd)}` failed with exit code {result.returncode}:\n"
                f"{(result.stderr or result.stdout or '').strip()[-2000:]}"
            )
    return results


def publish_image(
    settings: Settings,
    registry_client: Any,
    route: str = "docker",
    *,
    runner: Runner = default_runner,
) -> PublishPlan:
    """Cloud mode: make sure the repository exists (through ``registry_client``), then build
    and push. Local mode: return the plan without running anything (print it to show the
    learner)."""
    plan = publish_plan(settings, route)
    if settings.mode == "cloud":
        registry.ensure_repository(settings, registry_client)
        run_commands(plan.build_and_push, settings, runner=runner)
    return plan
