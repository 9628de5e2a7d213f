"""Resource Manager's project calls on the local platform: `projects.get` and
`projects.testIamPermissions`, answered from the local project's IAM roles.

Google answers ``testIamPermissions`` with the subset of the asked permissions that the
caller holds on the project. Here the caller is whoever holds the session's token; what it
holds is the union of the permissions of its roles, read from `iam_roles.json` (each role's
permissions as Google's "IAM roles and permissions" pages list them, the lab's share of
them only, with the page beside each role). By default the caller is the project's owner,
so every check passes, as for a learner in their own project. ``set_caller`` (the control
route ``POST /labkit/v1/projects/P/caller``) makes it someone else, a service account with
two roles, say, so a test sees 00 name each missing role.

The state lives in ``<state dir>/iam.json``; a project the platform has never seen gets a
stable number (a hash of its id, as Google's numbers are fixed for a project's life) and the
default caller.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from functools import cache
from pathlib import Path
from typing import Any

from labkit.local.emulator.errors import ApiError

ROLES_FILE = Path(__file__).with_name("iam_roles.json")
DEFAULT_CALLER = "user:learner@localhost"
DEFAULT_ROLES = ("roles/owner",)


@dataclasses.dataclass(frozen=True)
class Role:
    """A predefined role, with the permissions of it that the lab's calls need."""

    name: str
    title: str
    permissions: frozenset[str]
    source: str


@cache
def known_roles() -> dict[str, Role]:
    """The roles `iam_roles.json` describes, by name (``roles/aiplatform.user``)."""
    data = json.loads(ROLES_FILE.read_text(encoding="utf-8"))
    return {
        name: Role(name, entry["title"], frozenset(entry["permissions"]), entry["source"])
        for name, entry in data["roles"].items()
    }


@dataclasses.dataclass
class Caller:
    """Who the session's token stands for on one project, and the roles it holds there."""

    member: str
    roles: list[str]

    def permissions(self) -> set[str]:
        roles = known_roles()
        return set().union(*(roles[r].permissions for r in self.roles if r in roles))


def project_number(project_id: str) -> str:
    """A stable 12-digit project number for ``project_id`` (Google's never change)."""
    digest = hashlib.sha256(project_id.encode("utf-8")).hexdigest()
    return str(100000000000 + int(digest[:12], 16) % 900000000000)


class ProjectIam:
    """The local projects' callers and roles, kept in one JSON file."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def _read(self) -> dict[str, Any]:
        if not self.path.exists():
            return {}
        return json.loads(self.path.read_text(encoding="utf-8"))

    def caller(self, project_id: str) -> Caller:
        entry = self._read().get(project_id)
        if entry is None:
            return Caller(DEFAULT_CALLER, list(DEFAULT_ROLES))
        return Caller(entry["member"], list(entry["roles"]))

    def set_caller(self, project_id: str, member: Any, roles: Any) -> dict[str, Any]:
        """Make the session's token stand for ``member`` holding ``roles`` on the project."""
        _check_member(member)
        if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
            raise _invalid('"roles" must be a list of role names, e.g. ["roles/aiplatform.user"]')
        unknown = [r for r in roles if r not in known_roles()]
        if unknown:
            raise _invalid(
                f"unknown role(s) {', '.join(unknown)}: the local platform knows "
                f"{', '.join(sorted(known_roles()))} ({ROLES_FILE.name})"
            )
        with self._lock:
            data = self._read()
            data[project_id] = {"member": member, "roles": roles}
            self.path.write_text(json.dumps(data, indent=2), encoding="utf-8")
        return {"projectId": project_id, "member": member, "roles": roles}

    def get_project(self, project_id: str) -> dict[str, Any]:
        """`projects.get`'s answer (Resource Manager v3 ``Project``)."""
        return {
            "name": f"projects/{project_number(project_id)}",
            "projectId": project_id,
            "displayName": project_id,
            "state": "ACTIVE",
        }

    def test_permissions(self, project_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """The asked permissions the caller holds, in the order asked (Google's answer)."""
        asked = body.get("permissions") or []
        if not isinstance(asked, list) or not all(isinstance(p, str) for p in asked):
            raise _invalid('"permissions" must be a list of permission names')
        wild = [p for p in asked if "*" in p]
        if wild:
            raise _invalid(
                f"Permissions with wildcards (such as * or storage.*) are not allowed: {wild}"
            )
        held = self.caller(project_id).permissions()
        granted = [p for p in asked if p in held]
        return {"permissions": granted} if granted else {}


def _check_member(member: Any) -> None:
    prefixes = ("user:", "serviceAccount:", "group:")
    if not isinstance(member, str) or not member.startswith(prefixes) or "@" not in member:
        raise _invalid(
            f'"member" must be a principal such as user:EMAIL or serviceAccount:EMAIL, got {member!r}'
        )


def _invalid(message: str) -> ApiError:
    return ApiError(400, "INVALID_ARGUMENT", message)
