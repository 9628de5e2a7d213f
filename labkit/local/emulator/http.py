"""The local platform's HTTP plumbing, shared by every Google API it serves: JSON answers,
Google's error JSON for every failure, and request bodies read within the size limit.

One copy for the Vertex AI routes (`labkit.local.emulator.server`) and the project-level
APIs (`labkit.local.emulator.project_api`: Resource Manager, Service Usage), so every API
refuses a bad body and reports an error the same way, as Google's front end does.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse

from labkit.cloud import specs
from labkit.local.emulator import limits
from labkit.local.emulator.errors import ApiError, FieldViolation, bad_request, invalid_argument


class _ResourceId(Convertor[str]):
    """A resource id or name segment: no ``/`` and no ``:`` (``ID:cancel`` is a verb)."""

    regex = "[^/:]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("rid", _ResourceId())


def spec_error_to_api(err: specs.SpecError) -> ApiError:
    """Vertex's 400 INVALID_ARGUMENT: one field violation per problem, with its fix."""
    return invalid_argument([FieldViolation(p.field, p.advice("en")) for p in err.problems])


def json_response(payload: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(payload, status_code=status, media_type="application/json; charset=UTF-8")


def error_response(err: ApiError) -> JSONResponse:
    return json_response(err.to_json(), err.http_status)


async def read_json_body(request: Request) -> dict[str, Any]:
    """The JSON object of a request, at most `limits.MAX_BODY_BYTES` (read no further)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise bad_request(f"Invalid Content-Length header {declared!r}: expected a byte count.")
        if int(declared) > limits.MAX_BODY_BYTES:
            raise bad_request(limits.payload_too_large(int(declared)))
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limits.MAX_BODY_BYTES:
                raise bad_request(limits.payload_too_large())
            chunks.append(chunk)
    except ClientDisconnect as err:
        raise bad_request("The request body ended before its Content-Length.") from err
    raw = b"".join(chunks)
    try:
        body = json.loads(raw or b"{}")
    except json.JSONDecodeError as err:
        raise bad_request(f"Invalid JSON payload received: {err}") from err
    if not isinstance(body, dict):
        raise bad_request("Invalid JSON payload received: expected an object.")
    return body


Handler = Callable[[Request], Awaitable[Any]]


def json_endpoint(handler: Handler) -> Callable[[Request], Awaitable[JSONResponse]]:
    """Answer the handler's value as JSON; every error in Google's error JSON."""

    async def endpoint(request: Request) -> JSONResponse:
        try:
            return json_response(await handler(request))
        except specs.SpecError as err:
            return error_response(spec_error_to_api(err))
        except ApiError as err:
            return error_response(err)
        except Exception as err:  # a bug must still answer, or the SDK waits for its timeout
            return error_response(ApiError(500, "INTERNAL", f"local service error: {err!r}"))

    return endpoint


class EnabledServices(Protocol):
    def require(self, project_id: str, service: str) -> None: ...


def service_endpoint(
    services: EnabledServices, api: str, handler: Handler
) -> Callable[[Request], Awaitable[JSONResponse]]:
    """`json_endpoint` for a call to ``api``: refused first with 403 SERVICE_DISABLED while
    the request's project has that API off, as Google refuses it
    (`labkit.local.emulator.services`). One copy for every API the platform serves."""

    async def checked(request: Request) -> Any:
        services.require(request.path_params["project"], api)
        return await handler(request)

    return json_endpoint(checked)
