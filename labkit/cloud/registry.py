"""The trainer image's Artifact Registry repository, through google-cloud-artifact-registry.

Notebook 00 creates the repository, 04 makes sure it exists before the image goes in, and
cleanup lists what carries the kit's label and deletes it. The client is Google's
`ArtifactRegistryClient`, built by `labkit.local.vertex.artifact_registry_client`: Google's
endpoint in the cloud, the local platform's Artifact Registry otherwise (the same calls).
The ``gcloud artifacts ...`` commands of `labkit.cloud.images` stay, printed for the
terminal route; nothing here runs a command.

Names, as the API takes them (Artifact Registry's "Repository and image names" page):
``projects/PROJECT/locations/REGION/repositories/REPO`` for the repository,
``.../packages/IMAGE`` for an image with every version and tag, and the image's URI
``REGION-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG`` (`Settings.image_uri`).
"""

from __future__ import annotations

import dataclasses
import urllib.parse
from typing import Any

from labkit import KIT_LABEL_KEY, KIT_LABEL_VALUE, RUN_LABEL_KEY
from labkit.cloud.settings import Settings

REPOSITORY_DESCRIPTION = (
    "Cassava multi-worker lab: trainer images (delete with `python -m labkit cleanup`)"
)
OPERATION_TIMEOUT_S = 300  # a create or delete is seconds on Google; give it room


def parent(settings: Settings) -> str:
    return f"projects/{settings.project_id}/locations/{settings.region}"


def repository_name(settings: Settings, repository: str | None = None) -> str:
    return f"{parent(settings)}/repositories/{repository or settings.artifact_repo}"


def package_name(settings: Settings, repository: str | None = None) -> str:
    """The kit's image as a package: deleting it deletes every version and tag."""
    image = urllib.parse.quote(settings.image_name, safe="")
    return f"{repository_name(settings, repository)}/packages/{image}"


def ensure_repository(settings: Settings, client: Any) -> bool:
    """Create the Docker repository (the kit's labels and description) unless it exists;
    True when it was created now."""
    from google.api_core import exceptions
    from google.cloud import artifactregistry_v1

    try:
        client.get_repository(name=repository_name(settings))
        return False
    except exceptions.NotFound:
        pass
    repository = artifactregistry_v1.Repository(
        format_=artifactregistry_v1.Repository.Format.DOCKER,
        description=REPOSITORY_DESCRIPTION,
        labels=dict(settings.labels),
    )
    operation = client.create_repository(
        request={
            "parent": parent(settings),
            "repository_id": settings.artifact_repo,
            "repository": repository,
        }
    )
    operation.result(timeout=OPERATION_TIMEOUT_S)
    return True


@dataclasses.dataclass(frozen=True)
class KitRepository:
    """A repository carrying the kit's label: its run and how many image versions it holds."""

    name: str  # projects/P/locations/L/repositories/R
    run_id: str | None  # its lab-run label
    image_versions: int

    @property
    def repository_id(self) -> str:
        return self.name.rsplit("/", 1)[-1]


def kit_repositories(settings: Settings, client: Any) -> list[KitRepository]:
    """The region's repositories labelled ``lab=cassava``. Google's ``repositories.list``
    filters on the name only, so the labels are read here."""
    found = []
    for repo in client.list_repositories(parent=parent(settings)):
        labels = dict(repo.labels)
        if labels.get(KIT_LABEL_KEY) == KIT_LABEL_VALUE:
            versions = len(image_versions(client, repo.name))
            found.append(KitRepository(repo.name, labels.get(RUN_LABEL_KEY), versions))
    return found


def image_versions(client: Any, repository: str, image: str | None = None) -> list[Any]:
    """The repository's `DockerImage` versions (one per digest), or one image's only."""
    images = list(client.list_docker_images(parent=repository))
    if image is None:
        return images
    mine = f"{repository}/dockerImages/{urllib.parse.quote(image, safe='')}@"
    return [i for i in images if i.name.startswith(mine)]


def delete_repository(client: Any, name: str) -> None:
    """Delete a repository and every image in it."""
    client.delete_repository(name=name).result(timeout=OPERATION_TIMEOUT_S)


def delete_image(client: Any, package: str) -> None:
    """Delete an image (a package): every version and tag."""
    client.delete_package(name=package).result(timeout=OPERATION_TIMEOUT_S)
