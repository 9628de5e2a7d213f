"""Every malformed request to a real local service over real HTTP: a 400 in Vertex's error
shape (never a 500), nothing created on disk; unknown ids and path tricks 404."""

from __future__ import annotations

import json
import socket

import pytest

from labkit.local.emulator import limits

from .conftest import IMAGE, PARENT

JOBS = f"/v1/{PARENT}/customJobs"


def pool(**changes):
    base = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": "1",
        "containerSpec": {"imageUri": IMAGE, "args": ["--epochs", "1"]},
    }
    return {**base, **changes}


def job(pools=None, **changes):
    return {"displayName": "bad", "jobSpec": {"workerPoolSpecs": pools or [pool()]}, **changes}


BAD_JOBS = {
    "unknown machine type": (
        job([pool(machineSpec={"machineType": "n9-mega-4"})]),
        "machine_spec.machine_type",
    ),
    "args as one string": (
        job([pool(containerSpec={"imageUri": IMAGE, "args": "--epochs 1"})]),
        "container_spec.args",
    ),
    "containerSpec a list": (job([pool(containerSpec=[{"imageUri": IMAGE}])]), "container_spec"),
    "workerPoolSpecs a dict": (job(pools={"0": pool()}), "worker_pool_specs"),
    "display name over 128": (job(displayName="x" * 129), "display_name"),
    "display name not a string": (job(displayName=5), "display_name"),
    "env value of 100 kB": (
        job(
            [
                pool(
                    containerSpec={
                        "imageUri": IMAGE,
                        "env": [{"name": "A", "value": "v" * 100_000}],
                    }
                )
            ]
        ),
        "env[0].value",
    ),
    "arg of 100 kB": (
        job([pool(containerSpec={"imageUri": IMAGE, "args": ["a" * 100_000]})]),
        "args[0]",
    ),
    "replicaCount not a number": (job([pool(replicaCount="many")]), "replica_count"),
    "timeout not a duration": (
        {**job(), "jobSpec": {"workerPoolSpecs": [pool()], "scheduling": {"timeout": "soon"}}},
        "scheduling.timeout",
    ),
    "labels a list": (job(labels=["lab"]), "labels"),
}


def assert_vertex_400(status, answer, field=None):
    assert status == 400, answer
    error = answer["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT", error
    assert error["message"]
    if field:
        violations = error["details"][0]["fieldViolations"]
        assert any(field in v["field"] for v in violations), violations


@pytest.mark.parametrize("case", list(BAD_JOBS))
def test_each_malformed_field_is_a_400_naming_it(service, case):
    body, field = BAD_JOBS[case]
    status, answer = service.request("POST", JOBS, body)
    assert_vertex_400(status, answer, field)
    assert not list((service.state_dir / "jobs").iterdir())  # nothing created


def test_malformed_requests_are_400s_and_unknown_ids_404s(service):
    cases = []
    # body over 1 MiB: refused before it is read (Google answers 400 "Request payload size
    # exceeds the limit", see labkit.local.emulator.limits)
    status, answer = service.request("POST", JOBS, job(displayName="x" * (2 << 20)))
    assert_vertex_400(status, answer)
    assert "payload size exceeds the limit" in answer["error"]["message"]
    cases.append("body > 1 MiB")
    status, answer = service.request("POST", JOBS, b"{not json")
    assert_vertex_400(status, answer)
    status, answer = service.request("POST", JOBS, b"[1, 2]")
    assert_vertex_400(status, answer)
    status, answer = service.request("GET", f"/labkit/v1/{PARENT}/customJobs/1/logs?tail=abc")
    assert_vertex_400(status, answer)
    status, answer = service.request("GET", f"{JOBS}?pageSize=lots")
    assert_vertex_400(status, answer)
    status, answer = service.request("GET", f"{JOBS}?filter=(((")
    assert_vertex_400(status, answer)
    status, answer = service.request(
        "POST", "/labkit/v1/images", {"imageUri": 5, "buildContext": []}
    )
    assert_vertex_400(status, answer)
    for path in (
        f"{JOBS}/123456",
        f"{JOBS}/..%2F..%2Fimages.json",
        f"{JOBS}/%2e%2e",
        f"/v1/{PARENT}/trainingPipelines/999",
        f"/v1/{PARENT}/operations/..%2Fserver",
        f"/labkit/v1/{PARENT}/customJobs/..%2F..%2F/logs",
    ):
        status, answer = service.request("GET", path)
        assert status == 404, (path, answer)
        assert answer["error"]["status"] == "NOT_FOUND", (path, answer)
    assert not list((service.state_dir / "jobs").iterdir())


@pytest.mark.parametrize("length", ["abc", "-5", "99999999999"])
def test_a_bad_content_length_is_a_400(service, length):
    body = json.dumps(job()).encode()
    with socket.create_connection(("127.0.0.1", service.port), timeout=10) as sock:
        sock.sendall(
            f"POST {JOBS} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {service.token}\r\n"
            f"Content-Length: {length}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, payload = answer.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    assert status == 400, answer[:300]
    error = json.loads(payload)["error"]  # Vertex's error shape, from uvicorn's own 400s too
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT", error
    if length == "99999999999":  # reached the service
        assert str(limits.MAX_BODY_BYTES) in error["message"]
    else:  # refused by the HTTP parser before the app
        assert "Malformed HTTP request" in error["message"], error
    assert not list((service.state_dir / "jobs").iterdir())
