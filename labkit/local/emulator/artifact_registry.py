"""Artifact Registry v1 on the local platform: the Docker repositories and the images in them.

    GET    /v1/projects/P/locations/L/repositories                   list (``filter`` on name)
    POST   /v1/projects/P/locations/L/repositories?repositoryId=R    create (a finished operation)
    GET    /v1/projects/P/locations/L/repositories/R                 get
    DELETE /v1/projects/P/locations/L/repositories/R                 delete, its images with it
    GET    /v1/projects/P/locations/L/repositories/R/dockerImages    the images, one per digest
    DELETE /v1/projects/P/locations/L/repositories/R/packages/IMAGE  an image: every version, tag

Google's own client (google-cloud-artifact-registry, REST transport, the local endpoint)
calls them unchanged: notebook 00 creates the repository, 04 checks it, cleanup lists and
deletes what carries the kit's label. Every route answers 403 ``SERVICE_DISABLED`` while
the project has ``artifactregistry.googleapis.com`` off, as Google does.

Why the images are the local Vertex AI service's registrations: nothing is pushed here (no
Docker), and an image the local service runs is one registered to a build context
(`labkit.local.emulator.dockerfile.ImageRegistry`). Those whose URI lies under
``L-docker.pkg.dev/P/R/`` are the repository's images; a digest is the SHA-256 of the
build context's path and Dockerfile, so two tags of one context are one image with two
tags, and a changed Dockerfile is a new version. Deleting a repository or a package drops
those registrations, so a job that names a deleted image is refused, as on Vertex AI.
Limits of the local registry, said in its answers: Docker repositories only, standard mode.
"""

from __future__ import annotations

import datetime
import fnmatch
import hashlib
import json
import threading
import urllib.parse
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from labkit.cloud.paths import write_json_atomic
from labkit.local.emulator.dockerfile import ImageRegistry
from labkit.local.emulator.errors import ApiError
from labkit.local.emulator.http import Handler, read_json_body, service_endpoint
from labkit.local.emulator.services import ProjectServices

ARTIFACT_REGISTRY = "artifactregistry.googleapis.com"
_TYPES = "type.googleapis.com/google.devtools.artifactregistry.v1."
DOCKER = 1  # Repository.Format.DOCKER, as the clients send it (``enum-encoding=int``)
MANIFEST_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
_PARENT = "/v1/projects/{project:rid}/locations/{location:rid}"


def _now() -> str:
    return (
        datetime.datetime.now(datetime.UTC)
        .isoformat(timespec="microseconds")
        .replace("+00:00", "Z")
    )


def _not_found(name: str) -> ApiError:
    return ApiError(404, "NOT_FOUND", f"Requested entity was not found: {name}.")


def _finished_operation(parent: str, response: dict[str, Any] | None) -> dict[str, Any]:
    """A long-running operation that is already done (the client reads it without polling)."""
    digest = hashlib.sha256(f"{parent}{_now()}".encode()).hexdigest()[:32]
    return {
        "name": f"{parent}/operations/{digest}",
        "metadata": {"@type": _TYPES + "OperationMetadata"},
        "done": True,
        "response": response or {"@type": "type.googleapis.com/google.protobuf.Empty"},
    }


def registry_host(location: str) -> str:
    return f"{location}-docker.pkg.dev"


class Repositories:
    """The local projects' repositories in ``repositories.json``; their images from the
    local Vertex AI service's image registry."""

    def __init__(self, path: Path, images: ImageRegistry) -> None:
        self.path = Path(path)
        self.images = images
        self._lock = threading.Lock()

    def _read(self) -> dict[str, dict[str, Any]]:
        if not self.path.exists():
            return {}
        return json.loads(self.path.read_text(encoding="utf-8"))

    def _write(self, data: dict[str, dict[str, Any]]) -> None:
        write_json_atomic(self.path, data, sort_keys=True)

    def get(self, name: str) -> dict[str, Any]:
        repository = self._read().get(name)
        if repository is None:
            raise _not_found(name)
        return repository

    def list(self, parent: str, name_filter: str | None) -> dict[str, Any]:
        pattern = _name_pattern(name_filter)
        names = sorted(n for n in self._read() if n.startswith(parent + "/repositories/"))
        return {
            "repositories": [
                self.get(n) for n in names if pattern is None or fnmatch.fnmatchcase(n, pattern)
            ]
        }

    def create(self, parent: str, repository_id: str | None, body: dict[str, Any]) -> dict:
        """``repositories.create``: a Docker repository, stored; refused when it exists."""
        if not repository_id or "/" in repository_id:
            raise ApiError(
                400, "INVALID_ARGUMENT", "repositoryId is required, e.g. ?repositoryId=cassava-lab"
            )
        if body.get("format", DOCKER) not in (DOCKER, "DOCKER"):
            raise ApiError(
                501,
                "UNIMPLEMENTED",
                f"format {body.get('format')!r}: the local Artifact Registry keeps Docker "
                "repositories only (format DOCKER).",
            )
        name = f"{parent}/repositories/{repository_id}"
        location = parent.split("/")[3]
        project = parent.split("/")[1]
        now = _now()
        repository = {
            "name": name,
            "format": "DOCKER",
            "mode": "STANDARD_REPOSITORY",
            "description": str(body.get("description", "")),
            "labels": dict(body.get("labels") or {}),
            "createTime": now,
            "updateTime": now,
            "registryUri": f"{registry_host(location)}/{project}/{repository_id}",
        }
        with self._lock:
            data = self._read()
            if name in data:
                raise ApiError(409, "ALREADY_EXISTS", f"the repository already exists: {name}")
            data[name] = repository
            self._write(data)
        return _finished_operation(parent, {"@type": _TYPES + "Repository", **repository})

    def delete(self, name: str) -> dict[str, Any]:
        with self._lock:
            data = self._read()
            repository = data.pop(name, None)
            if repository is None:
                raise _not_found(name)
            self._write(data)
        self.images.unregister_under(repository["registryUri"] + "/")
        return _finished_operation(name.rsplit("/repositories/", 1)[0], None)

    def docker_images(self, name: str) -> list[dict[str, Any]]:
        """The repository's images: its registrations grouped by digest, tags gathered."""
        prefix = self.get(name)["registryUri"] + "/"
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for uri, context in sorted(self.images.images().items()):
            if not uri.startswith(prefix) or "@" in uri:
                continue
            image, _, tag = uri[len(prefix) :].rpartition(":")
            digest = image_digest(Path(context))
            entry = found.setdefault((image, digest), _docker_image(name, prefix, image, digest))
            entry["tags"].append(tag)
        return list(found.values())

    def delete_package(self, repository: str, package: str) -> dict[str, Any]:
        """``packages.delete``: the image's every version and tag."""
        registry_uri = self.get(repository)["registryUri"]
        image = urllib.parse.unquote(package)
        if not self.images.unregister_under(f"{registry_uri}/{image}:"):
            raise _not_found(f"{repository}/packages/{package}")
        return _finished_operation(repository, None)


def image_digest(context: Path) -> str:
    """``sha256:...`` of a build context's path and Dockerfile: the local image's identity."""
    dockerfile = context / "Dockerfile"
    payload = str(context).encode() + (dockerfile.read_bytes() if dockerfile.is_file() else b"")
    return "sha256:" + hashlib.sha256(payload).hexdigest()


def _docker_image(repository: str, prefix: str, image: str, digest: str) -> dict[str, Any]:
    return {
        "name": f"{repository}/dockerImages/{urllib.parse.quote(image, safe='')}@{digest}",
        "uri": f"{prefix}{image}@{digest}",
        "tags": [],
        "mediaType": MANIFEST_TYPE,
    }


def _name_pattern(text: str | None) -> str | None:
    """``name="projects/P/locations/L/repositories/my-*"``: the one filter Google documents
    for repositories.list (wildcards ``*``), as an fnmatch pattern."""
    if not text:
        return None
    key, sep, value = text.partition("=")
    value = value.strip().strip('"')
    if key.strip() != "name" or not sep or not value:
        raise ApiError(
            400,
            "INVALID_ARGUMENT",
            f"filter {text!r}: the local Artifact Registry filters repositories by name only, "
            'e.g. name="projects/P/locations/L/repositories/cassava-*"',
        )
    return value


def routes(repositories: Repositories, services: ProjectServices) -> list[BaseRoute]:
    """The routes above, each refused while the project has Artifact Registry off."""

    def checked(handler: Handler) -> Any:
        return service_endpoint(services, ARTIFACT_REGISTRY, handler)

    def parent(request: Request) -> str:
        p = request.path_params
        return f"projects/{p['project']}/locations/{p['location']}"

    def repository(request: Request) -> str:
        return f"{parent(request)}/repositories/{request.path_params['repo']}"

    async def list_repositories(request: Request) -> Any:
        return repositories.list(parent(request), request.query_params.get("filter"))

    async def create(request: Request) -> Any:
        body = await read_json_body(request)
        repository_id = request.query_params.get("repositoryId")
        return await run_in_threadpool(repositories.create, parent(request), repository_id, body)

    async def get(request: Request) -> Any:
        return repositories.get(repository(request))

    async def delete(request: Request) -> Any:
        return await run_in_threadpool(repositories.delete, repository(request))

    async def docker_images(request: Request) -> Any:
        images = await run_in_threadpool(repositories.docker_images, repository(request))
        return {"dockerImages": images}

    async def delete_package(request: Request) -> Any:
        package = request.path_params["package"]
        return await run_in_threadpool(repositories.delete_package, repository(request), package)

    base = f"{_PARENT}/repositories"
    one = base + "/{repo:rid}"
    return [
        Route(base, checked(list_repositories), methods=["GET"]),
        Route(base, checked(create), methods=["POST"]),
        Route(one, checked(get), methods=["GET"]),
        Route(one, checked(delete), methods=["DELETE"]),
        Route(one + "/dockerImages", checked(docker_images), methods=["GET"]),
        Route(one + "/packages/{package:path}", checked(delete_package), methods=["DELETE"]),
    ]
