"""The HTTP side: Vertex AI's v1 REST surface on 127.0.0.1 only, as a Starlette app.

Routes (``P``/``L`` = project/location; every query may carry the SDK's
``$alt=json;enum-encoding=int``, answers are the v1 camelCase JSON with enum names):

    POST   /v1/projects/P/locations/L/customJobs                    create (validated, then run)
    GET    /v1/projects/P/locations/L/customJobs                    list (filter, pageSize, pageToken)
    GET    /v1/projects/P/locations/L/customJobs/ID                 get
    POST   /v1/projects/P/locations/L/customJobs/ID:cancel          cancel
    DELETE /v1/projects/P/locations/L/customJobs/ID                 delete -> long-running operation
    POST   /v1/projects/P/locations/L/trainingPipelines             create (custom task only)
    GET    /v1/projects/P/locations/L/trainingPipelines             list (filter, pageSize, pageToken)
    GET    /v1/projects/P/locations/L/trainingPipelines/ID          get (PIPELINE_STATE_*)
    POST   /v1/projects/P/locations/L/trainingPipelines/ID:cancel   cancel (and its CustomJob)
    DELETE /v1/projects/P/locations/L/trainingPipelines/ID          delete -> long-running operation
    GET    /v1/projects/P/locations/L/operations/OP                 the operation the SDK polls
    /v3/projects/P..., /v1/projects/P/services...                  Resource Manager and Service
                                                                    Usage (`project_api`)
    /v1/projects/P/locations/L/repositories...                     Artifact Registry
                                                                    (`artifact_registry`)
    GET    /labkit/v1/info                                          pid, port, state dir, images
    GET    /labkit/v1/images, POST /labkit/v1/images                registered build contexts
    GET    /labkit/v1/projects/P/locations/L/{customJobs|trainingPipelines}/ID/logs?tail=N
                                                                    per-replica logs
    GET    /console/session?token=T&next=PATH                        sign a browser in (a cookie)
    /console/...                                                    the console page, when mounted

Guarded: every request passes `labkit.local.guard.Guard` first (Host, Origin, the session's
token as a bearer token or, under /console, the sign-in cookie; JSON bodies only), else 401
UNAUTHENTICATED / 403 PERMISSION_DENIED in Google's error JSON with nothing done.

Refused: any other method on these paths (PATCH, ...) and any other collection answer 501
UNIMPLEMENTED / 404 NOT_FOUND in Google's error JSON; a TrainingPipeline with
``modelToUpload`` (no local model registry), a managed dataset (``inputDataConfig``) or a
non-custom ``trainingTaskDefinition`` answers 501 UNIMPLEMENTED naming the field (see
`labkit.local.emulator.service`). A body Vertex would refuse answers 400 INVALID_ARGUMENT with one
field violation per `labkit.cloud.specs.Problem`.

Every route is a thin wrapper over `labkit.local.emulator.service.Service`; `create_app(service)`
builds the app (tests and the console can use it in-process), `serve` runs it with uvicorn.
Starting imports neither TensorFlow nor the SDK (bench/service.py measures the start).
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Awaitable, Callable
from contextlib import contextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from labkit.local.emulator import artifact_registry, project_api
from labkit.local.emulator.errors import ApiError, bad_request
from labkit.local.emulator.http import (
    Handler,
    error_response,
    json_endpoint,
    read_json_body,
    service_endpoint,
)
from labkit.local.emulator.service import HOST, Service
from labkit.local.emulator.store import KINDS
from labkit.local.guard import Guard, Refusal

COLLECTIONS = tuple(KINDS)  # "customJobs", "trainingPipelines"
VERTEX_API = "aiplatform.googleapis.com"
CONSOLE_PATH = "/console"
SESSION_PATH = f"{CONSOLE_PATH}/session"


_PARENT = "/projects/{project:rid}/locations/{location:rid}"


def _parent(request: Request) -> str:
    p = request.path_params
    return f"projects/{p['project']}/locations/{p['location']}"


def _name(request: Request, kind: str) -> str:
    return f"{_parent(request)}/{kind}/{request.path_params['rid']}"


def _routes(service: Service) -> list[BaseRoute]:
    creators = {
        "customJobs": service.create_custom_job,
        "trainingPipelines": service.create_training_pipeline,
    }
    routes: list[BaseRoute] = []

    def vertex_api(handler: Handler) -> Callable[[Request], Awaitable[JSONResponse]]:
        """A Vertex AI call: refused while the project has the Vertex AI API off."""
        return service_endpoint(service.services, VERTEX_API, handler)

    for kind in COLLECTIONS:

        async def create(request: Request, kind: str = kind) -> Any:
            body = await read_json_body(request)
            return await run_in_threadpool(creators[kind], _parent(request), body)

        async def list_(request: Request, kind: str = kind) -> Any:
            q = request.query_params
            return await run_in_threadpool(
                service.list,
                kind,
                _parent(request),
                q.get("filter"),
                q.get("pageSize"),
                q.get("pageToken"),
            )

        async def get(request: Request, kind: str = kind) -> Any:
            return await run_in_threadpool(service.get, _name(request, kind))

        async def cancel(request: Request, kind: str = kind) -> Any:
            return await run_in_threadpool(service.cancel, _name(request, kind))

        async def delete(request: Request, kind: str = kind) -> Any:
            return await run_in_threadpool(service.delete, _name(request, kind))

        async def logs(request: Request, kind: str = kind) -> Any:
            tail = request.query_params.get("tail")
            if tail and not (tail.isdigit() and int(tail) > 0):
                raise bad_request(
                    f"tail={tail!r}: expected a positive number of lines, e.g. tail=50"
                )
            return await run_in_threadpool(
                service.logs, _name(request, kind), int(tail) if tail else None
            )

        base = f"/v1{_PARENT}/{kind}"
        routes += [
            Route(base, vertex_api(create), methods=["POST"]),
            Route(base, vertex_api(list_), methods=["GET"]),
            Route(base + "/{rid:rid}:cancel", vertex_api(cancel), methods=["POST"]),
            Route(base + "/{rid:rid}", vertex_api(get), methods=["GET"]),
            Route(base + "/{rid:rid}", vertex_api(delete), methods=["DELETE"]),
            Route(
                f"/labkit/v1{_PARENT}/{kind}/{{rid:rid}}/logs", json_endpoint(logs), methods=["GET"]
            ),
        ]

    async def operation(request: Request) -> Any:
        name = f"{_parent(request)}/operations/{request.path_params['rid']}"
        return await run_in_threadpool(service.get_operation, name)

    async def info(request: Request) -> Any:
        return service.info()

    async def images(request: Request) -> Any:
        return service.images()

    async def register(request: Request) -> Any:
        body = await read_json_body(request)
        uri, context = body.get("imageUri"), body.get("buildContext")
        return {"images": await run_in_threadpool(service.register_image, uri, context)}

    routes += [
        Route(f"/v1{_PARENT}/operations/{{rid:rid}}", json_endpoint(operation), methods=["GET"]),
        Route("/labkit/v1/info", json_endpoint(info), methods=["GET"]),
        Route("/labkit/v1/images", json_endpoint(images), methods=["GET"]),
        Route("/labkit/v1/images", json_endpoint(register), methods=["POST"]),
    ]
    return routes


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's own 404/405 in Google's error JSON (405: a method this service lacks)."""
    status = getattr(exc, "status_code", 500)
    if status == 405:
        return error_response(
            ApiError(
                501,
                "UNIMPLEMENTED",
                f"{request.method} {request.url.path} is not implemented: the local Vertex AI "
                "service serves create, get, list, cancel and delete of customJobs and "
                "trainingPipelines, and their operations.",
            )
        )
    if status == 404:
        return error_response(ApiError(404, "NOT_FOUND", f"Resource {request.url.path} not found."))
    return error_response(ApiError(status, "UNKNOWN", str(exc)))


def service_guard(token: str, port: int) -> Guard:
    """The guard of the Vertex AI service: the console's pages take the sign-in cookie, the
    REST API only the bearer token and JSON bodies."""
    return Guard(
        token, port, cookie_paths=(CONSOLE_PATH,), json_only=True,
        service="the local Vertex AI service",
    )  # fmt: skip


class GuardedApp:
    """The app behind the guard: a refused request never reaches a route, so nothing runs.

    Also serves the console's sign-in link (`SESSION_PATH`): with the right ``token`` it sets
    the session cookie (``HttpOnly``, ``SameSite=Strict``, path /console, one per port) and
    sends the browser on to ``next`` (a console page), so the token leaves the address bar.
    """

    def __init__(self, app: Any, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if request.url.path == SESSION_PATH and request.method in ("GET", "HEAD"):
            response = self._sign_in(request)
        else:
            refusal = self.guard.check(
                request.method, request.url.path, request.headers, request.cookies
            )
            if refusal is None:
                await self.app(scope, receive, send)
                return
            response = self._refused(request, refusal)
        await response(scope, receive, send)

    def _sign_in(self, request: Request) -> Response:
        token = request.query_params.get("token")
        refusal = self.guard.check_sign_in(request.headers, token)
        if refusal:
            return self._refused(request, refusal)
        wanted = request.query_params.get("next") or ""
        next_path = wanted if wanted.startswith(f"{CONSOLE_PATH}/") else f"{CONSOLE_PATH}/training"
        response = RedirectResponse(next_path, status_code=303)
        response.set_cookie(
            self.guard.cookie_name, token or "", path=CONSOLE_PATH, httponly=True, samesite="strict"
        )
        response.headers["Cache-Control"] = "no-store"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response

    @staticmethod
    def _refused(request: Request, refusal: Refusal) -> Response:
        headers = {"Cache-Control": "no-store"}
        if refusal.http_status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="labkit"'
        if request.url.path.startswith(CONSOLE_PATH) and request.method == "GET":
            return HTMLResponse(refusal.to_html(), refusal.http_status, headers)
        return JSONResponse(refusal.to_json(), refusal.http_status, headers)


def create_app(service: Service, guard: Guard) -> GuardedApp:
    """The app serving ``service`` behind ``guard``: the REST routes, and the console at
    /console."""
    app = Starlette(
        routes=[
            *_routes(service),
            *project_api.resource_manager_routes(service),
            *project_api.service_usage_routes(service),
            *artifact_registry.routes(service.repositories, service.services),
        ],
        exception_handlers={HTTPException: _http_error},
    )
    app.state.service = service

    # ---- console mount point (issue 16): the local console page (labkit.local.console), built on
    # its first request so that starting the service does not import Jinja2 and the views
    def console() -> Any:
        from labkit.local.console import create_app as create_console_app

        return create_console_app(service)

    app.mount(CONSOLE_PATH, _BuiltOnFirstRequest(console))
    # ---- end of console mount point
    return GuardedApp(app, guard)


class _BuiltOnFirstRequest:
    """An ASGI app made by ``build()`` when its first request comes (once, under a lock).

    Why: bench/service.py measures start-to-first-response; the console's imports (Jinja2,
    its views and form) are ~40 ms that a REST-only start does not need.
    """

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build
        self._app: Any = None
        self._lock = threading.Lock()

    @property
    def app(self) -> Any:
        """The built app (built now if no request has come yet)."""
        if self._app is None:
            with self._lock:
                if self._app is None:
                    self._app = self._build()
        return self._app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


def bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:port (0 = any free port); OSError when taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


def _vertex_shaped_h11_protocol() -> type:
    """uvicorn's h11 protocol, with the 400 it sends itself in Google's JSON error shape.

    A request uvicorn cannot parse (a Content-Length of `abc` or `-5`, a broken request line)
    never reaches the app: uvicorn answers a plain-text 400 on its own. The SDK and the
    console read errors as ``{"error": {...}}``, so this answer uses that shape too.
    """
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class VertexShapedH11Protocol(H11Protocol):
        def send_400_response(self, msg: str) -> None:
            message = (
                f"Malformed HTTP request: {msg.rstrip('.')}. Send a valid request line and headers."
            )
            body = json.dumps(bad_request(message).to_json()).encode()
            headers = [
                (b"content-type", b"application/json; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ]
            for event in (
                h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                h11.Data(data=body),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event))
            self.transport.close()

    return VertexShapedH11Protocol


def serve(service: Service, sock: socket.socket, guard: Guard, quiet: bool = False) -> None:
    """Serve on ``sock`` behind ``guard`` until SIGTERM/SIGINT, then stop every job."""
    import uvicorn

    class _Server(uvicorn.Server):
        @contextmanager
        def capture_signals(self):  # type: ignore[override]
            # uvicorn re-raises a captured SIGTERM after serving, which would end the process
            # before `service.shutdown()` stops the replicas; here a signal only stops serving.
            import signal

            def stop(signum: int, frame: object) -> None:
                self.should_exit = True

            previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    config = uvicorn.Config(
        create_app(service, guard),
        log_level="warning" if quiet else "info",
        access_log=not quiet,
        lifespan="off",
        # plain asyncio + h11, no websockets: nothing to probe for at start
        loop="asyncio",
        http=_vertex_shaped_h11_protocol(),
        ws="none",
        timeout_graceful_shutdown=2,
    )
    try:
        _Server(config).run(sockets=[sock])
    finally:
        service.shutdown()
        sock.close()
        print("[emulator] every job stopped", file=sys.stderr, flush=True)
