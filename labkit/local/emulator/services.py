"""Service Usage on the local platform: which APIs each local project has enabled, and the
403 ``SERVICE_DISABLED`` every other local API answers while its own is off.

Google refuses a call to an API its project has not enabled with 403 PERMISSION_DENIED, its
message "<title> has not been used in project <number> before or it is disabled. Enable it
by visiting <the API's console page> then retry. ...", and an ``ErrorInfo`` detail whose
reason is ``SERVICE_DISABLED`` (the answers quoted in googleapis and Vertex AI samples
issues, e.g. GoogleCloudPlatform/vertex-ai-samples#476). The local platform does the same, so
notebook 00's ``batchEnable`` through google-cloud-service-usage is what lets 04 submit.

A project the platform has never seen starts with the lab's services enabled, as in a
project where 00 already ran (tools and tests that start at 04 keep working); `set_enabled`
(the control route ``POST /labkit/v1/projects/P/services``) gives it another set, e.g. none,
so a test sees the refusal and 00 lifting it. The state lives in ``<state dir>/services.json``.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from labkit.cloud.setup_checks import REQUIRED_APIS
from labkit.local.emulator.errors import ApiError
from labkit.local.emulator.iam import project_number

SERVICE_USAGE = "serviceusage.googleapis.com"
# The titles Google's answers use ("Vertex AI API has not been used in project ...").
TITLES = {api.service: f"{api.what} API" for api in REQUIRED_APIS}
TITLES[SERVICE_USAGE] = "Service Usage API"
TITLES["notebooks.googleapis.com"] = "Notebooks API"  # its title in the API Library
DEFAULT_ENABLED = (*(api.service for api in REQUIRED_APIS), SERVICE_USAGE)
BATCH_LIMIT = 20  # at most 20 per services.batchEnable (Service Usage v1 REST reference)
ENABLED, DISABLED = "ENABLED", "DISABLED"
RESPONSE_TYPE = "type.googleapis.com/google.api.serviceusage.v1.BatchEnableServicesResponse"
METADATA_TYPE = "type.googleapis.com/google.api.serviceusage.v1.OperationMetadata"


def service_disabled(project_id: str, service: str) -> ApiError:
    """Google's refusal of a call to an API the project has not enabled."""
    number = project_number(project_id)
    page = f"console.developers.google.com/apis/api/{service}/overview?project={number}"
    title = TITLES.get(service, service)
    return ApiError(
        403,
        "PERMISSION_DENIED",
        f"{title} has not been used in project {number} before or it is disabled. Enable it "
        f"by visiting {page} then retry. If you enabled this API recently, wait a few "
        "minutes for the action to propagate to our systems and retry.",
        details=[
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "SERVICE_DISABLED",
                "domain": "googleapis.com",
                "metadata": {
                    "service": service,
                    "consumer": f"projects/{number}",
                    "serviceTitle": title,
                },
            }
        ],
    )


class ProjectServices:
    """The local projects' enabled services, kept in one JSON file."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def _read(self) -> dict[str, list[str]]:
        if not self.path.exists():
            return {}
        return json.loads(self.path.read_text(encoding="utf-8"))

    def _write(self, data: dict[str, list[str]]) -> None:
        self.path.write_text(json.dumps(data, indent=2), encoding="utf-8")

    def enabled(self, project_id: str) -> list[str]:
        return list(self._read().get(project_id, DEFAULT_ENABLED))

    def require(self, project_id: str, service: str) -> None:
        """Refuse, as Google does, a call to ``service`` while the project has it off."""
        if service not in self.enabled(project_id):
            raise service_disabled(project_id, service)

    def set_enabled(self, project_id: str, services: Any) -> dict[str, Any]:
        """Give the project exactly ``services`` (the control route; [] is a new project)."""
        if not isinstance(services, list) or not all(isinstance(s, str) for s in services):
            raise _invalid(
                '"services" must be a list of service names, e.g. ["aiplatform.googleapis.com"]'
            )
        with self._lock:
            data = self._read()
            data[project_id] = sorted(set(services))
            self._write(data)
        return {"projectId": project_id, "enabled": data[project_id]}

    def service(self, project_id: str, name: str) -> dict[str, Any]:
        """Service Usage v1's ``Service``: its name under the project's number, and state."""
        number = project_number(project_id)
        state = ENABLED if name in self.enabled(project_id) else DISABLED
        return {
            "name": f"projects/{number}/services/{name}",
            "parent": f"projects/{number}",
            "config": {"name": name, "title": TITLES.get(name, name)},
            "state": state,
        }

    def list(self, project_id: str, state_filter: str | None) -> dict[str, Any]:
        """``services.list``: the known services, or those in one state (``state:ENABLED``)."""
        wanted = _parse_state_filter(state_filter)
        names = sorted({*TITLES, *self.enabled(project_id)})
        services = [self.service(project_id, n) for n in names]
        return {"services": [s for s in services if wanted is None or s["state"] == wanted]}

    def batch_enable(self, project_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """``services.batchEnable``: all of them or none (Google's is atomic), answered as a
        finished long-running operation whose response lists the services."""
        ids = body.get("serviceIds")
        if not isinstance(ids, list) or not ids or not all(isinstance(s, str) for s in ids):
            raise _invalid(
                '"serviceIds" must name at least one service, e.g. "aiplatform.googleapis.com"'
            )
        if len(ids) > BATCH_LIMIT:
            raise _invalid(f"at most {BATCH_LIMIT} services per batchEnable call, got {len(ids)}")
        unknown = [s for s in ids if not s.endswith(".googleapis.com")]
        if unknown:
            raise _invalid(f"Not found or permission denied for service(s): {', '.join(unknown)}.")
        with self._lock:
            data = self._read()
            data[project_id] = sorted({*data.get(project_id, DEFAULT_ENABLED), *ids})
            self._write(data)
        return {
            "name": f"operations/batchEnable.{project_number(project_id)}.{len(ids)}",
            "metadata": {"@type": METADATA_TYPE, "resourceNames": []},
            "done": True,
            "response": {
                "@type": RESPONSE_TYPE,
                "services": [self.service(project_id, s) for s in ids],
            },
        }


def _parse_state_filter(text: str | None) -> str | None:
    if not text:
        return None
    key, _, value = text.replace(" ", "").partition(":")
    if key != "state" or value not in (ENABLED, DISABLED):
        raise _invalid(
            f"filter {text!r}: the local Service Usage takes state:ENABLED or state:DISABLED"
        )
    return value


def _invalid(message: str) -> ApiError:
    return ApiError(400, "INVALID_ARGUMENT", message)
