"""Notebook 00's API step (`labkit.cloud.setup_checks.enable_apis` / `check_apis`) through
the real google-cloud-service-usage client, against the local platform's Service Usage
(`labkit.local.emulator.services`): a new project's Vertex AI API refuses the real
aiplatform SDK with 403 SERVICE_DISABLED, as Google's does, until 00 enables it."""

from __future__ import annotations

import pytest
from google.api_core import exceptions
from google.cloud import aiplatform

from labkit.cloud import setup_checks
from labkit.local import vertex
from labkit.local.emulator import iam

FIVE = list(setup_checks.REQUIRED_SERVICES)


def new_project(local_vertex, enabled: list[str]) -> tuple[int, dict]:
    """Make the local project a new one, with only ``enabled`` (the control route)."""
    return local_vertex.post("/labkit/v1/projects/local-project/services", {"services": enabled})


def client(local_vertex):
    return vertex.service_usage_client(local_vertex.settings, state_dir=local_vertex.state_dir)


def test_a_new_project_refuses_vertex_until_00_enables_the_apis(local_vertex):
    status, answer = new_project(local_vertex, ["storage.googleapis.com"])
    assert status == 200 and answer["enabled"] == ["storage.googleapis.com"]
    number = iam.project_number("local-project")
    with pytest.raises(exceptions.Forbidden) as refused:  # 403 over REST, as from Google
        list(aiplatform.CustomJob.list())
    message = str(refused.value)
    assert f"Vertex AI API has not been used in project {number} before or it is disabled" in (
        message
    )
    assert refused.value.reason == "SERVICE_DISABLED"  # the ErrorInfo detail, parsed by the SDK
    assert refused.value.domain == "googleapis.com"

    service_usage = client(local_vertex)
    before = setup_checks.check_apis("local-project", service_usage)
    assert not before.ok and before.missing == FIVE
    with pytest.raises(RuntimeError, match="not enabled in local-project: compute.googleapis.com"):
        setup_checks.require_apis(before)

    assert setup_checks.enable_apis("local-project", service_usage) == FIVE
    after = setup_checks.check_apis("local-project", service_usage)
    assert after.ok and set(FIVE) <= set(after.enabled)
    assert "storage.googleapis.com" in after.enabled  # enabling adds, never replaces
    assert after.message(FIVE).splitlines() == [
        f"enabled now: {', '.join(FIVE)}",
        "all 5 APIs are enabled in local-project",
    ]
    assert list(aiplatform.CustomJob.list()) == []  # the same SDK call now goes through
    assert setup_checks.enable_apis("local-project", service_usage) == []  # nothing left to do


def test_service_usage_answers_as_google_does(local_vertex):
    new_project(local_vertex, ["aiplatform.googleapis.com"])
    service_usage = client(local_vertex)
    number = iam.project_number("local-project")
    one = service_usage.get_service(
        request={"name": "projects/local-project/services/compute.googleapis.com"}
    )
    assert one.name == f"projects/{number}/services/compute.googleapis.com"
    assert one.config.title == "Compute Engine API" and one.state.name == "DISABLED"
    listed = service_usage.list_services(
        request={"parent": "projects/local-project", "filter": "state:DISABLED"}
    )
    assert {s.config.name for s in listed} >= {
        "compute.googleapis.com",
        "cloudbuild.googleapis.com",
    }
    with pytest.raises(exceptions.BadRequest, match="at most 20 services"):
        service_usage.batch_enable_services(
            request={
                "parent": "projects/local-project",
                "service_ids": [f"api{i}.googleapis.com" for i in range(21)],
            }
        )
    with pytest.raises(exceptions.BadRequest, match="state:ENABLED or state:DISABLED"):
        list(
            service_usage.list_services(request={"parent": "projects/local-project", "filter": "x"})
        )
    enabled = service_usage.enable_service(
        request={"name": "projects/local-project/services/compute.googleapis.com"}
    ).result(timeout=10)
    assert enabled.service.state.name == "ENABLED"


def test_the_control_route_refuses_a_bad_list(local_vertex):
    status, answer = new_project(local_vertex, "aiplatform.googleapis.com")
    assert status == 400 and '"services" must be a list' in answer["error"]["message"]


def test_notebook_00_enables_and_checks_through_these_functions():
    from labkit.cloud import paths

    source = (paths.REPO_ROOT / "notebooks" / "00_environment_setup.ipynb").read_text()
    for call in (
        "vertex.service_usage_client(settings)",
        "setup_checks.enable_apis(",
        "setup_checks.check_apis(",
        "setup_checks.require_apis(",
        "setup_checks.enable_apis_command(",
        "setup_checks.list_enabled_command(",
    ):
        assert call in source, call
