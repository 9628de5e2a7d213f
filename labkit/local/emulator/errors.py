"""Errors in Google's JSON error format, so the SDK raises the same exceptions as on Vertex.

`google.api_core` turns ``{"error": {"code", "message", "status", "details"}}`` into
`BadRequest` / `NotFound` / ...; a learner sees the message exactly as Vertex would show it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"


@dataclasses.dataclass
class FieldViolation:
    field: str  # snake_case path as the SDK user wrote it, e.g. job_spec.worker_pool_specs[0]
    description: str


class ApiError(Exception):
    """An error answer: HTTP status, gRPC status name, message, optional field violations."""

    def __init__(
        self,
        http_status: int,
        status: str,
        message: str,
        violations: list[FieldViolation] | None = None,
        details: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.status = status
        self.message = message
        self.violations = violations or []
        self.details = details or []  # other google.rpc details (ErrorInfo), as Google sends

    def to_json(self) -> dict[str, Any]:
        error: dict[str, Any] = {
            "code": self.http_status,
            "message": self.message,
            "status": self.status,
        }
        details = list(self.details)
        if self.violations:
            details.append(
                {
                    "@type": BAD_REQUEST_TYPE,
                    "fieldViolations": [dataclasses.asdict(v) for v in self.violations],
                }
            )
        if details:
            error["details"] = details
        return {"error": error}


def invalid_argument(violations: list[FieldViolation]) -> ApiError:
    """400 INVALID_ARGUMENT listing every violation, in the format Vertex uses."""
    found = "".join(
        f"{i}.Field: {v.field}; Message: {v.description}\t" for i, v in enumerate(violations, 1)
    )
    return ApiError(400, "INVALID_ARGUMENT", f"List of found errors:\t{found}", violations)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "INVALID_ARGUMENT", message)


def not_found(what: str) -> ApiError:
    return ApiError(404, "NOT_FOUND", f"{what} not found.")


def failed_precondition(message: str) -> ApiError:
    return ApiError(400, "FAILED_PRECONDITION", message)


def unimplemented(method: str, path: str) -> ApiError:
    return ApiError(
        501,
        "UNIMPLEMENTED",
        f"{method} {path} is not implemented: the local Vertex AI service serves custom jobs "
        "(create, get, list, cancel, delete) and their operations only.",
    )
