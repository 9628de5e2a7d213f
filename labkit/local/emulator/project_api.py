"""The project-level Google APIs the local platform serves beside Vertex AI:

    GET    /v3/projects/P                                   Resource Manager projects.get
    POST   /v3/projects/P:testIamPermissions                the caller's permissions
    GET    /v1/projects/P/services?filter=state:ENABLED     Service Usage services.list
    GET    /v1/projects/P/services/NAME                     services.get
    POST   /v1/projects/P/services:batchEnable              services.batchEnable (an operation)
    POST   /v1/projects/P/services/NAME:enable              services.enable
    POST   /labkit/v1/projects/P/caller                     control: who the token stands for
    POST   /labkit/v1/projects/P/services                   control: the project's enabled set

Google's own clients call them unchanged (google-cloud-resource-manager and
google-cloud-service-usage, REST transport, the local endpoint): the answers come from
`labkit.local.emulator.iam` and `labkit.local.emulator.services`.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from labkit.local.emulator.http import json_endpoint, read_json_body
from labkit.local.emulator.service import Service

_PROJECT = "/projects/{project:rid}"


def resource_manager_routes(service: Service) -> list[BaseRoute]:
    """Resource Manager v3's project calls, and the control route that says who the
    session's token stands for."""

    async def get_project(request: Request) -> Any:
        return service.iam.get_project(request.path_params["project"])

    async def test_permissions(request: Request) -> Any:
        body = await read_json_body(request)
        return await run_in_threadpool(
            service.iam.test_permissions, request.path_params["project"], body
        )

    async def set_caller(request: Request) -> Any:
        body = await read_json_body(request)
        return await run_in_threadpool(
            service.iam.set_caller,
            request.path_params["project"],
            body.get("member"),
            body.get("roles"),
        )

    return [
        Route(f"/v3{_PROJECT}:testIamPermissions", json_endpoint(test_permissions), methods=["POST"]),
        Route(f"/v3{_PROJECT}", json_endpoint(get_project), methods=["GET"]),
        Route(f"/labkit/v1{_PROJECT}/caller", json_endpoint(set_caller), methods=["POST"]),
    ]  # fmt: skip


def service_usage_routes(service: Service) -> list[BaseRoute]:
    """Service Usage v1's calls that notebook 00 makes, and the control route that gives a
    project its enabled services (a test's new project)."""
    services = service.services

    async def list_services(request: Request) -> Any:
        project = request.path_params["project"]
        return services.list(project, request.query_params.get("filter"))

    async def get_service(request: Request) -> Any:
        p = request.path_params
        return services.service(p["project"], p["name"])

    async def batch_enable(request: Request) -> Any:
        body = await read_json_body(request)
        return await run_in_threadpool(services.batch_enable, request.path_params["project"], body)

    async def enable_one(request: Request) -> Any:
        p = request.path_params
        operation = services.batch_enable(p["project"], {"serviceIds": [p["name"]]})
        operation["response"] = {
            "@type": "type.googleapis.com/google.api.serviceusage.v1.EnableServiceResponse",
            "service": operation["response"]["services"][0],
        }
        return operation

    async def set_enabled(request: Request) -> Any:
        body = await read_json_body(request)
        return services.set_enabled(request.path_params["project"], body.get("services"))

    base = f"/v1{_PROJECT}/services"
    return [
        Route(base, json_endpoint(list_services), methods=["GET"]),
        Route(base + ":batchEnable", json_endpoint(batch_enable), methods=["POST"]),
        Route(base + "/{name:rid}:enable", json_endpoint(enable_one), methods=["POST"]),
        Route(base + "/{name:rid}", json_endpoint(get_service), methods=["GET"]),
        Route(f"/labkit/v1{_PROJECT}/services", json_endpoint(set_enabled), methods=["POST"]),
    ]
