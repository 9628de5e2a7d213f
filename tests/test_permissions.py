"""Notebook 00's permission check (`labkit.cloud.permissions`) through the real
google-cloud-resource-manager client, against the local platform's Resource Manager
(`labkit.local.emulator.iam`), which answers from the local project's roles."""

from __future__ import annotations

import pytest
from google.api_core import exceptions

from labkit.cloud import permissions
from labkit.local import vertex
from labkit.local.emulator import iam

SERVICE_ACCOUNT = "serviceAccount:lab-sa@local-project.iam.gserviceaccount.com"


def set_caller(local_vertex, member: str, roles: list[str]) -> tuple[int, dict]:
    """The control route that says who the session's token stands for."""
    path = "/labkit/v1/projects/local-project/caller"
    return local_vertex.post(path, {"member": member, "roles": roles})


def test_the_projects_owner_holds_every_permission_the_lab_needs(local_vertex):
    client = vertex.projects_client(local_vertex.settings, state_dir=local_vertex.state_dir)
    check = permissions.check_permissions("local-project", client)
    assert check.ok and check.granted == [n.permission for n in permissions.LAB_NEEDS]
    assert check.message() == (
        f"all {len(permissions.LAB_NEEDS)} permissions the lab needs are granted in local-project"
    )
    permissions.require_permissions(check)  # does not raise


def test_a_service_account_without_editor_sees_each_missing_role_and_its_command(local_vertex):
    status, answer = set_caller(
        local_vertex, SERVICE_ACCOUNT, ["roles/aiplatform.user", "roles/viewer"]
    )
    assert status == 200 and answer["roles"] == ["roles/aiplatform.user", "roles/viewer"]
    client = vertex.projects_client(local_vertex.settings, state_dir=local_vertex.state_dir)
    check = permissions.check_permissions("local-project", client)
    assert not check.ok
    assert check.granted == ["aiplatform.customJobs.create", "aiplatform.trainingPipelines.create"]
    assert check.missing_roles() == [
        "roles/serviceusage.serviceUsageAdmin",
        "roles/storage.admin",
        "roles/artifactregistry.admin",
        "roles/cloudbuild.builds.editor",
    ]
    message = check.message(SERVICE_ACCOUNT)
    for role in check.missing_roles():
        assert (
            "gcloud projects add-iam-policy-binding local-project "
            f"--member={SERVICE_ACCOUNT} --role={role}"
        ) in message
    assert "storage.buckets.create" in message and "aiplatform.customJobs" not in message
    with pytest.raises(PermissionError, match="roles/storage.admin"):
        permissions.require_permissions(check)
    rows = {row["permission"]: row for row in check.rows()}
    assert rows["storage.buckets.create"]["granted"] is False
    assert rows["aiplatform.customJobs.create"]["granted"] is True


def test_resource_manager_answers_as_google_does(local_vertex):
    client = vertex.projects_client(local_vertex.settings, state_dir=local_vertex.state_dir)
    project = client.get_project(name="projects/local-project")
    assert project.project_id == "local-project"
    assert project.name == f"projects/{iam.project_number('local-project')}"
    assert project.name == client.get_project(name="projects/local-project").name  # stable
    assert len(project.name.removeprefix("projects/")) == 12
    with pytest.raises(exceptions.BadRequest, match="wildcards"):
        client.test_iam_permissions(
            request={"resource": "projects/local-project", "permissions": ["storage.*"]}
        )
    status, answer = set_caller(local_vertex, SERVICE_ACCOUNT, ["roles/superuser"])
    assert status == 400 and "unknown role(s) roles/superuser" in answer["error"]["message"]
    status, answer = set_caller(local_vertex, "lab-sa", ["roles/viewer"])
    assert status == 400 and "serviceAccount:EMAIL" in answer["error"]["message"]
    # nothing changed by the refused calls: the owner still holds everything
    assert permissions.check_permissions("local-project", client).ok


def test_each_need_is_granted_by_its_role_and_by_editor_on_the_local_platform():
    roles = iam.known_roles()
    for need in permissions.LAB_NEEDS:
        assert need.permission in roles[need.role].permissions, need
        assert roles[need.role].title == need.role_title, need
        assert need.permission in roles["roles/editor"].permissions, need
        assert need.source.startswith("docs.cloud.google.com/iam/docs/roles-permissions/")
