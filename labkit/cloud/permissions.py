"""The permissions the lab needs on the project, checked before notebook 00 creates anything.

One Resource Manager call, ``projects.testIamPermissions`` (google-cloud-resource-manager's
`ProjectsClient.test_iam_permissions`), answers which of the permissions below the caller
holds. For each missing one, 00 names the predefined role that grants it and the
``gcloud projects add-iam-policy-binding`` command, instead of failing later, halfway
through, on a 403 the learner must decode. Where an organisation policy keeps the default
service accounts from getting Editor ("Restrict service account usage"), a Workbench
instance's service account may hold none of these.

Each `Need` cites the Google page that lists its role's permissions. The same call runs in
local mode against the local platform (`labkit.local.emulator.iam`), whose answer comes
from the local project's roles: only the endpoint and the credentials differ.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Sequence
from typing import Any

from labkit.i18n import gettext


@dataclasses.dataclass(frozen=True)
class Need:
    """One permission a step of the lab needs, and the least role that grants it."""

    permission: str
    step: str  # which notebook step needs it (a catalog message)
    role: str
    role_title: str
    source: str  # the Google page that lists the role's permissions


LAB_NEEDS: tuple[Need, ...] = (
    Need(
        "serviceusage.services.enable",
        "00: enable the five APIs",
        "roles/serviceusage.serviceUsageAdmin",
        "Service Usage Admin",
        "docs.cloud.google.com/iam/docs/roles-permissions/serviceusage",
    ),
    Need(
        "storage.buckets.create",
        "00: create the bucket",
        "roles/storage.admin",
        "Storage Admin",
        "docs.cloud.google.com/iam/docs/roles-permissions/storage",
    ),
    Need(
        "artifactregistry.repositories.create",
        "00: create the image repository",
        "roles/artifactregistry.admin",
        "Artifact Registry Administrator",
        "docs.cloud.google.com/iam/docs/roles-permissions/artifactregistry",
    ),
    Need(
        "cloudbuild.builds.create",
        "04: build the image with Cloud Build",
        "roles/cloudbuild.builds.editor",
        "Cloud Build Editor",
        "docs.cloud.google.com/iam/docs/roles-permissions/cloudbuild",
    ),
    Need(
        "aiplatform.customJobs.create",
        "04: submit the SDK's CustomJob",
        "roles/aiplatform.user",
        "Vertex AI User",
        "docs.cloud.google.com/iam/docs/roles-permissions/aiplatform",
    ),
    Need(
        "aiplatform.trainingPipelines.create",
        "04: create the console's training pipeline",
        "roles/aiplatform.user",
        "Vertex AI User",
        "docs.cloud.google.com/iam/docs/roles-permissions/aiplatform",
    ),
)
# Who to grant the roles to: the learner's account, or the service account the Workbench
# instance runs as (its notebooks call Google with that account's credentials).
MEMBER_PLACEHOLDER = "user:YOUR_EMAIL"


@dataclasses.dataclass
class PermissionCheck:
    """What one ``testIamPermissions`` call said about the lab's permissions."""

    project_id: str
    granted: list[str]
    missing: list[Need]

    @property
    def ok(self) -> bool:
        return not self.missing

    def missing_roles(self) -> list[str]:
        """The roles to grant, once each, in the lab's order."""
        return list(dict.fromkeys(need.role for need in self.missing))

    def grant_commands(self, member: str = MEMBER_PLACEHOLDER) -> list[list[str]]:
        """One ``gcloud projects add-iam-policy-binding`` per missing role."""
        return [
            ["gcloud", "projects", "add-iam-policy-binding", self.project_id,
             f"--member={member}", f"--role={role}"]
            for role in self.missing_roles()
        ]  # fmt: skip

    def rows(self) -> list[dict[str, Any]]:
        """One row per permission, for a `labkit.course.views.Table`."""
        return [
            {
                "permission": need.permission,
                "for": gettext(need.step),
                "granted": need.permission in self.granted,
                "role": f"{need.role} ({need.role_title})",
            }
            for need in LAB_NEEDS
        ]

    def message(self, member: str = MEMBER_PLACEHOLDER) -> str:
        """The verdict notebook 00 prints, in the edition's words (also the error's text)."""
        if self.ok:
            return gettext("all {n} permissions the lab needs are granted in {project}").format(
                n=len(LAB_NEEDS), project=self.project_id
            )
        lines = [
            gettext(
                "missing in {project}: {permissions}. Ask the project's owner to grant these "
                "roles to your account (user:EMAIL) or to the Workbench instance's service "
                "account (serviceAccount:EMAIL):"
            ).format(
                project=self.project_id,
                permissions=", ".join(need.permission for need in self.missing),
            )
        ]
        lines += [f"  {shlex.join(cmd)}" for cmd in self.grant_commands(member)]
        return "\n".join(lines)


def check_permissions(
    project_id: str, client: Any = None, needs: Sequence[Need] = LAB_NEEDS
) -> PermissionCheck:
    """Ask Resource Manager which of ``needs`` the caller holds on the project.

    ``client``: a `google.cloud.resourcemanager_v3.ProjectsClient`; None builds one with
    Google's endpoint and the default credentials (the learner's, in Workbench).
    """
    if client is None:
        from google.cloud import resourcemanager_v3

        client = resourcemanager_v3.ProjectsClient()
    response = client.test_iam_permissions(
        request={"resource": f"projects/{project_id}", "permissions": [n.permission for n in needs]}
    )
    granted = list(response.permissions)
    return PermissionCheck(project_id, granted, [n for n in needs if n.permission not in granted])


def require_permissions(check: PermissionCheck) -> None:
    """Stop before anything is created, naming each missing role and its command."""
    if not check.ok:
        raise PermissionError(check.message())
