"""The trainer image's repository through the real google-cloud-artifact-registry client
(`labkit.cloud.registry`, what notebooks 00 and 04 and cleanup call), against the local
platform's Artifact Registry (`labkit.local.emulator.artifact_registry`): refused with 403
SERVICE_DISABLED until 00 enables the API, created once with the kit's labels, listing the
images the local Vertex AI service runs, and deleted by cleanup, the kit's alone."""

from __future__ import annotations

import dataclasses

import pytest
from google.api_core import exceptions
from google.cloud import artifactregistry_v1

from labkit.cloud import cleanup, registry
from labkit.cloud.settings import Settings
from labkit.local import vertex
from labkit.local.emulator import artifact_registry, control
from tests.conftest import DEMO_IMAGE_URI


def client(local_vertex):
    return vertex.artifact_registry_client(local_vertex.settings, state_dir=local_vertex.state_dir)


def kit_settings(local_vertex) -> Settings:
    return dataclasses.replace(local_vertex.settings, run_id="run-a")


def test_refused_until_enabled_then_created_once_with_the_kit_labels(local_vertex):
    settings = kit_settings(local_vertex)
    local_vertex.post(
        "/labkit/v1/projects/local-project/services", {"services": ["aiplatform.googleapis.com"]}
    )
    ar = client(local_vertex)
    with pytest.raises(exceptions.Forbidden) as refused:
        registry.ensure_repository(settings, ar)
    assert refused.value.reason == "SERVICE_DISABLED"
    assert "Artifact Registry API has not been used in project" in str(refused.value)

    local_vertex.post(
        "/labkit/v1/projects/local-project/services",
        {"services": ["aiplatform.googleapis.com", artifact_registry.ARTIFACT_REGISTRY]},
    )
    assert registry.ensure_repository(settings, ar) is True
    assert registry.ensure_repository(settings, ar) is False  # exists: left as it is
    repo = ar.get_repository(name=registry.repository_name(settings))
    assert repo.format_ == artifactregistry_v1.Repository.Format.DOCKER
    assert dict(repo.labels) == settings.labels
    assert repo.description == registry.REPOSITORY_DESCRIPTION
    with pytest.raises(exceptions.Conflict, match="already exists"):
        ar.create_repository(
            parent=registry.parent(settings), repository=repo, repository_id=settings.artifact_repo
        ).result()


def test_the_repository_lists_the_images_the_local_service_runs(local_vertex):
    settings = kit_settings(local_vertex)
    ar = client(local_vertex)
    with pytest.raises(exceptions.NotFound):  # no repository yet: its images are not found
        list(ar.list_docker_images(parent=registry.repository_name(settings)))
    registry.ensure_repository(settings, ar)
    (image,) = ar.list_docker_images(parent=registry.repository_name(settings))
    assert list(image.tags) == [settings.image_tag]
    assert image.uri.startswith(f"{settings.image_uri.rsplit(':', 1)[0]}@sha256:")
    assert image.name.startswith(registry.repository_name(settings) + "/dockerImages/multiworker@")
    second_tag = settings.image_uri.rsplit(":", 1)[0] + ":v2"
    vertex.register_image(second_tag, local_vertex.images[settings.image_uri], settings)
    (same,) = ar.list_docker_images(parent=registry.repository_name(settings))
    assert sorted(same.tags) == ["cassava", "v2"] and same.uri == image.uri  # one digest
    named = ar.list_repositories(
        request={"parent": registry.parent(settings), "filter": 'name="*/cassava-*"'}
    )
    assert [r.name for r in named] == [registry.repository_name(settings)]


def test_cleanup_deletes_the_kit_repository_whole(local_vertex):
    settings = kit_settings(local_vertex)
    ar = client(local_vertex)
    registry.ensure_repository(settings, ar)
    plan = cleanup.CleanupPlan("local")
    (item,) = cleanup._plan_artifact_registry(settings, plan, "run-a", ar)
    assert (item.kind, item.name) == ("repository", "us-central1/cassava-lab")
    assert "1 image version(s)" in item.detail
    assert cleanup._plan_artifact_registry(settings, plan, "run-b", ar) == []  # another run's
    item.run()
    with pytest.raises(exceptions.NotFound):
        ar.get_repository(name=registry.repository_name(settings))
    info = control.fetch_info(local_vertex.port, local_vertex.token)
    assert settings.image_uri not in info["images"]  # the local service runs it no more
    assert DEMO_IMAGE_URI in info["images"]  # another repository's image stays
    assert cleanup._plan_artifact_registry(settings, plan, None, ar) == []  # second run: none


def test_in_a_repository_the_kit_did_not_create_only_its_image_goes(local_vertex):
    settings = kit_settings(local_vertex)
    ar = client(local_vertex)
    theirs = artifactregistry_v1.Repository(
        format_=artifactregistry_v1.Repository.Format.DOCKER, labels={"team": "ml"}
    )
    ar.create_repository(
        parent=registry.parent(settings), repository=theirs, repository_id=settings.artifact_repo
    ).result()
    demo = dataclasses.replace(settings, artifact_repo="demo")
    ar.create_repository(
        parent=registry.parent(settings), repository=theirs, repository_id="demo"
    ).result()
    plan = cleanup.CleanupPlan("local")
    (item,) = cleanup._plan_artifact_registry(settings, plan, None, ar)
    assert (item.kind, item.name) == ("image", settings.image_uri.rsplit(":", 1)[0])
    item.run()
    assert list(ar.list_docker_images(parent=registry.repository_name(settings))) == []
    ar.get_repository(name=registry.repository_name(settings))  # their repository stays
    (kept,) = ar.list_docker_images(parent=registry.repository_name(demo))
    assert kept.uri.startswith(DEMO_IMAGE_URI.rsplit(":", 1)[0] + "@")


def test_unreachable_registry_is_a_note_with_the_command_to_run(local_vertex):
    settings = kit_settings(local_vertex)
    local_vertex.post("/labkit/v1/projects/local-project/services", {"services": []})
    plan = cleanup.CleanupPlan("local")
    assert cleanup._plan_artifact_registry(settings, plan, None, client(local_vertex)) == []
    assert "Artifact Registry API has not been used" in plan.notes[0]
    assert "gcloud artifacts repositories list" in plan.notes[0]
