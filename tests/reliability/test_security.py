"""The local services refuse what a foreign web page, another name or another user would send.

Each test drives a real service (``python -m labkit emulator serve`` in a temp state folder,
the `service` fixture) or the real storage emulator, the way an attacker's page or process
would, and checks that nothing was created or run (`labkit.local.guard` says why each check
exists).
"""

from __future__ import annotations

import http.client
import http.server
import json
import stat
import threading
import time
from pathlib import Path

import pytest

from labkit.local import guard
from labkit.local.console import browser

from .conftest import IMAGE, PARENT

JOBS = f"/v1/{PARENT}/customJobs"


def pwn_job(marker: Path) -> dict:
    """The issue's probe: a job whose command writes a marker file, if it ever runs."""
    return {
        "displayName": "x",
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "replicaCount": "1",
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "containerSpec": {
                        "imageUri": IMAGE,
                        "command": ["/bin/sh", "-c", f"echo PWNED > {marker}"],
                    },
                }
            ]
        },
    }


def raw(service, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> tuple:
    """A request with exactly these headers (no token unless given): (status, JSON)."""
    return service.request(method, path, body, headers, signed=False)


def no_jobs(service) -> bool:
    jobs_dir = service.state_dir / "jobs"
    return not jobs_dir.exists() or not list(jobs_dir.iterdir())


def test_the_token_file_is_the_learners_alone(service):
    token_file = service.state_dir / guard.TOKEN_FILE
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(service.state_dir.stat().st_mode) == 0o700
    assert len(guard.read_token(service.state_dir)) >= 40


def test_the_cross_origin_text_plain_job_creates_and_runs_nothing(service, tmp_path):
    marker = tmp_path / "pwned.txt"
    body = json.dumps(pwn_job(marker)).encode()
    attempts = [
        {"Content-Type": "text/plain", "Origin": "http://evil.example"},  # the probe
        {"Content-Type": "text/plain"},  # no Origin at all (a non-browser on the machine)
        {"Content-Type": "application/json", "Authorization": "Bearer wrong"},
        {  # the right token cannot help a foreign page
            "Content-Type": "text/plain",
            "Origin": "http://evil.example",
            "Authorization": f"Bearer {service.token}",
        },
        {"Content-Type": "text/plain", "Authorization": f"Bearer {service.token}"},
    ]
    statuses = [raw(service, "POST", JOBS, headers, body) for headers in attempts]
    assert [s for s, _ in statuses] == [403, 401, 401, 403, 415], statuses
    assert all(a["error"]["status"] in {"PERMISSION_DENIED", "UNAUTHENTICATED",
                                        "INVALID_ARGUMENT"} for _, a in statuses)  # fmt: skip
    assert "python -m labkit emulator token" in statuses[1][1]["error"]["message"]
    time.sleep(3)  # the issue saw the marker 6 s after its 200; a refused job never starts
    assert not marker.exists() and no_jobs(service)


def test_a_foreign_host_gets_no_data(service):
    service.create_job()
    auth = {"Authorization": f"Bearer {service.token}"}
    status, answer = raw(service, "GET", JOBS, {**auth, "Host": f"attacker.example:{service.port}"})
    assert status == 403 and "customJobs" not in answer, answer
    assert "attacker.example" in answer["error"]["message"]
    status, answer = raw(service, "GET", JOBS, auth)  # the kit's own address still works
    assert status == 200 and len(answer["customJobs"]) == 1


@pytest.mark.parametrize(
    "path",
    [
        JOBS,
        f"/v1/{PARENT}/trainingPipelines",
        f"/v1/{PARENT}/customJobs/1",
        f"/v1/{PARENT}/operations/1",
        f"/labkit/v1/{PARENT}/customJobs/1/logs",
        "/labkit/v1/info",
        "/labkit/v1/images",
        "/console/training",
        "/console/training/create",
        "/console/training/customJobs/1",
        "/nowhere",
    ],
)
def test_every_route_refuses_a_request_without_the_token(service, path):
    status, answer = raw(service, "GET", path, {})
    assert status == 401, (path, answer)
    text = json.dumps(answer) if isinstance(answer, dict) else answer
    assert "token" in text or "python -m labkit console" in text


def test_no_image_is_registered_without_the_token(service, tmp_path):
    body = json.dumps({"imageUri": "x/y:z", "buildContext": str(tmp_path)}).encode()
    status, _ = raw(
        service, "POST", "/labkit/v1/images", {"Content-Type": "application/json"}, body
    )
    assert status == 401
    images = service.request("GET", "/labkit/v1/images")[1]
    assert "x/y:z" not in images


def _sign_in_cookie(service) -> str:
    """The console's cookie, as the sign-in link sets it (``name=value``)."""
    path = f"/console/session?token={service.token}&next=/console/training"
    conn = http.client.HTTPConnection("127.0.0.1", service.port, timeout=30)
    conn.request("GET", path)
    answer = conn.getresponse()
    answer.read()
    cookie = answer.getheader("Set-Cookie")
    conn.close()
    assert answer.status == 303 and answer.getheader("Location") == "/console/training"
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/console" in cookie
    return cookie.split(";")[0]


def test_the_sign_in_link_needs_the_right_token(service):
    status, page = raw(service, "GET", "/console/session?token=guess&next=/console/training", {})
    assert status == 401 and "python -m labkit console" in page
    cookie = _sign_in_cookie(service)
    assert raw(service, "GET", "/console/training", {"Cookie": cookie})[0] == 200
    # the cookie is the console's: the REST API still wants the bearer token
    assert raw(service, "GET", JOBS, {"Cookie": cookie})[0] == 401


def test_a_cross_site_console_form_post_creates_nothing(service):
    cookie = _sign_in_cookie(service)
    form = b"model_name=x&image_uri=" + IMAGE.encode()
    form_type = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie}
    own = f"http://127.0.0.1:{service.port}"
    for extra in (
        {"Origin": "http://evil.example"},
        {"Origin": "http://127.0.0.1:9"},  # another port: same-site, so the cookie is sent
        {"Origin": "null"},  # a sandboxed frame or a file:// page
        {"Referer": "http://evil.example/page"},  # an old browser: no Origin, a Referer
        {"Origin": own, "Sec-Fetch-Site": "cross-site"},
        {},  # neither: cannot be told from a forged post, so refused
    ):
        status, _ = raw(service, "POST", "/console/training/create", {**form_type, **extra}, form)
        assert status == 403, extra
    name = f"{PARENT}/customJobs/1"
    status, _ = raw(service, "POST", "/console/training/customJobs/1/cancel", form_type)
    assert status == 403
    assert no_jobs(service), name


def test_the_storage_emulator_keeps_the_same_guard(tmp_path):
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as auth_exceptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage as gcs

    from labkit.cloud import storage

    server = storage.LocalStorageServer(root=tmp_path / "gcs", port=0).start()
    try:
        kit = gcs.Client(
            project="p", credentials=server.credentials(),
            client_options={"api_endpoint": server.host},
        )  # fmt: skip
        kit.create_bucket("kit-bucket")
        anonymous = gcs.Client(
            project="p", credentials=AnonymousCredentials(),
            client_options={"api_endpoint": server.host},
        )  # fmt: skip
        # a 401 makes the client try to refresh its credentials, which anonymous ones cannot
        refused = (gexc.Unauthorized, auth_exceptions.InvalidOperation)
        with pytest.raises(refused):
            anonymous.create_bucket("foreign-bucket")
        with pytest.raises(refused):
            list(anonymous.list_buckets())
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        auth = {"Authorization": f"Bearer {server.guard.token}"}
        for headers in (
            {**auth, "Host": f"attacker.example:{server.port}"},
            {**auth, "Origin": "http://evil.example", "Content-Type": "text/plain"},
        ):
            conn.request("POST", "/storage/v1/b?project=p", body=b'{"name":"x-bucket"}',
                         headers=headers)  # fmt: skip
            answer = conn.getresponse()
            answer.read()
            assert answer.status == 403, headers
        conn.close()
        assert [b.name for b in kit.list_buckets()] == ["kit-bucket"]
    finally:
        server.stop()


class _AttackerPage(http.server.BaseHTTPRequestHandler):
    """Another origin on 127.0.0.1 (its own port): a page that tries everything a page can."""

    html = ""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = self.html.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


ATTACK = """<!doctype html><title>attacker</title>
<form id="f" method="post" action="{console}/training/create" target="sink">
<input name="model_name" value="evil"><input name="image_uri" value="{image}"></form>
<iframe name="sink"></iframe>
<script>
const job = {job};
const results = [];
async function attempt(label, url, init) {{
  try {{ const r = await fetch(url, init); results.push(label + ":" + r.status); }}
  catch (e) {{ results.push(label + ":blocked"); }}
}}
(async () => {{
  await attempt("text-plain", "{api}", {{method: "POST", mode: "no-cors",
    headers: {{"Content-Type": "text/plain"}}, body: JSON.stringify(job)}});
  await attempt("json", "{api}", {{method: "POST",
    headers: {{"Content-Type": "application/json"}}, body: JSON.stringify(job)}});
  await attempt("read-jobs", "{api}", {{}});
  await attempt("console-fetch", "{console}/training/create", {{method: "POST",
    mode: "no-cors", credentials: "include", body: new URLSearchParams({{model_name: "e"}})}});
  document.getElementById("f").submit();
  document.title = "done " + results.join(",");
}})();
</script>"""


def test_a_page_from_another_origin_changes_nothing_in_a_real_browser(service, tmp_path):
    reason = browser.unavailable_reason()
    if reason:
        pytest.skip(reason)
    from labkit.local.console import sign_in_url

    marker = tmp_path / "pwned-from-browser.txt"
    base = f"http://127.0.0.1:{service.port}"
    _AttackerPage.html = ATTACK.format(
        api=f"{base}{JOBS}", console=f"{base}/console", image=IMAGE,
        job=json.dumps(pwn_job(marker)),
    )  # fmt: skip
    attacker = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AttackerPage)
    thread = threading.Thread(target=attacker.serve_forever, daemon=True)
    thread.start()
    try:
        with browser.open_browser() as context:
            page = context.new_page()
            # the learner is signed in to the console (its cookie is in this browser) ...
            assert page.goto(sign_in_url(service.port, service.token)).status == 200
            # ... and then opens another page, served from another port of 127.0.0.1
            page.goto(f"http://127.0.0.1:{attacker.server_address[1]}/")
            page.wait_for_function("document.title.startsWith('done')", timeout=30_000)
            page.wait_for_timeout(1500)  # the form post lands in the iframe
            results = page.title()
    finally:
        attacker.shutdown()
        attacker.server_close()
    assert "json:blocked" in results and "read-jobs:blocked" in results, results
    time.sleep(2)
    assert not marker.exists() and no_jobs(service), results
    pipelines = service.request("GET", f"/v1/{PARENT}/trainingPipelines")[1]
    assert pipelines == {"trainingPipelines": []}
