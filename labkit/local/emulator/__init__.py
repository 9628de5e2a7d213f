"""A local stand-in for the Vertex AI training service that the unchanged SDK drives.

``aiplatform.CustomJob(...).run()`` and ``aiplatform.CustomContainerTrainingJob(...).run()``
(a TrainingPipeline, what the console's "custom training" makes) in local mode talk to this
service instead of Google (routes served and refused: `labkit.local.emulator.server`):
it validates the job as Vertex does, runs every replica of every worker pool as a local
process with the environment Vertex sets (TF_CONFIG, CLUSTER_SPEC, AIP_*), streams their
logs, restarts replicas as Vertex does (`labkit.local.emulator.restarts`), and answers the SDK in the v1 REST JSON.

    python -m labkit emulator serve  [--port P] [--state DIR] [--image URI=BUILD_CONTEXT ...]
    python -m labkit emulator start  [same options]   # in the background, with a pid file
    python -m labkit emulator stop   [--state DIR]
    python -m labkit emulator status [--state DIR]
    python -m labkit emulator register URI=BUILD_CONTEXT [--state DIR]
    python -m labkit emulator logs JOB_NAME [--tail N] [--state DIR]
    python -m labkit emulator token [--state DIR]    # the session token (last line)

Every request needs the session token the service makes when it starts (``<state>/token``,
mode 0600; see `labkit.local.guard`): Google's clients send it as ``Authorization: Bearer``
(the SDK: ``aiplatform.init(..., credentials=google.oauth2.credentials.Credentials(token))``).

State (jobs, logs, registered images) lives in ``--state`` (default ``LAB_HOME/vertex``).
``gs://BUCKET/path`` maps to ``LAB_HOME/gcs/BUCKET/path``, or to ``<state>/gcs/...`` when
``--state`` is given. The kit's image URI (from the settings) is registered to the
repository's Dockerfile by default.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from labkit.cloud.paths import REPO_ROOT


def kit_image_uri() -> str:
    """The trainer image URI the notebooks submit, from the saved (or default) settings."""
    from labkit.cloud.settings import load_settings

    return load_settings(mode="local").image_uri


def default_port() -> int:
    from labkit.cloud.settings import Settings

    return Settings.__dataclass_fields__["emulator_port"].default


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state", help="state folder (default: LAB_HOME/vertex)")


def _add_service_options(parser: argparse.ArgumentParser) -> None:
    _add_common(parser)
    parser.add_argument(
        "--port", type=int, default=None, help=f"port on 127.0.0.1 (default {default_port()})"
    )
    parser.add_argument(
        "--image",
        action="append",
        default=[],
        metavar="URI=BUILD_CONTEXT",
        help="run image URI from this folder's Dockerfile (repeatable)",
    )
    # The old whole-cluster `--restarts N` is replaced by Vertex's documented rules
    # (labkit.local.emulator.restarts); still accepted, and ignored, so a caller started before
    # the change (a running lab) can start a service.
    parser.add_argument("--restarts", type=int, default=0, help=argparse.SUPPRESS)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m labkit emulator", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="action", required=True)
    serve = sub.add_parser("serve", help="run the service in the foreground")
    _add_service_options(serve)
    serve.add_argument("--quiet", action="store_true", help="no access log")
    _add_service_options(sub.add_parser("start", help="run the service in the background"))
    _add_common(sub.add_parser("stop", help="stop the service and every job process"))
    _add_common(sub.add_parser("status", help="is it running, where, with which images"))
    register = sub.add_parser("register", help="register an image's build context")
    register.add_argument("image", metavar="URI=BUILD_CONTEXT")
    _add_common(register)
    logs = sub.add_parser("logs", help="print a job's logs (job.log and each replica's)")
    logs.add_argument("job", help="projects/P/locations/L/{customJobs|trainingPipelines}/ID")
    logs.add_argument("--tail", type=int, help="only the last N lines of each")
    _add_common(logs)
    _add_common(sub.add_parser("token", help="print the running service's session token"))
    return parser


def _images(options: list[str]) -> dict[str, str]:
    from labkit.local.emulator.dockerfile import parse_image_option

    return dict(parse_image_option(text) for text in options)


def serve(args: argparse.Namespace) -> int:
    from labkit.local import guard
    from labkit.local.emulator import control
    from labkit.local.emulator.server import bind, service_guard
    from labkit.local.emulator.server import serve as serve_forever
    from labkit.local.emulator.service import Service

    state_dir = control.resolve_state_dir(args.state)
    state_dir.mkdir(parents=True, exist_ok=True)
    state_dir.chmod(0o700)  # jobs' arguments, logs and the token: the learner's alone
    port = default_port() if args.port is None else args.port
    try:
        sock = bind(port)
    except OSError as err:
        print(
            f"emulator: cannot listen on 127.0.0.1:{port} ({err.strerror}); another program "
            "uses it: pick a free port with --port",
            file=sys.stderr,
        )
        return 2
    try:
        service = Service(
            state_dir,
            control.gcs_root_for(state_dir, bool(args.state)),
            sock.getsockname()[1],
        )
    except ValueError as err:  # LABKIT_MAX_RUNNING_REPLICAS not a whole number >= 1
        sock.close()
        print(f"emulator: {err}", file=sys.stderr)
        return 2
    service.registry.register(kit_image_uri(), REPO_ROOT)
    for uri, context in _images(args.image).items():
        service.registry.register(uri, context)
    token = guard.new_token()
    guard.write_token(state_dir, token)  # before the pid file: whoever finds one finds both
    control.write_pid_file(state_dir, service.port)
    print(
        f"[emulator] serving on http://127.0.0.1:{service.port} state={state_dir} "
        f"gcs={service.gcs_root}",
        flush=True,
    )
    for uri, context in service.registry.images().items():
        print(f"[emulator] image {uri} -> {context}", flush=True)
    try:
        serve_forever(service, sock, service_guard(token, service.port), quiet=args.quiet)
    finally:
        control.remove_pid_file(state_dir)
    print("[emulator] stopped", flush=True)
    return 0


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        if getattr(args, "image", None) and args.action in ("serve", "start"):
            _images(args.image)  # a malformed --image fails before anything starts
    except ValueError as err:
        print(f"emulator: {err}", file=sys.stderr)
        return 2
    if args.action == "serve":
        return serve(args)

    from labkit.local.emulator import control

    if args.action == "start":
        port = default_port() if args.port is None else args.port
        images = {kit_image_uri(): str(REPO_ROOT), **_images(args.image)}
        try:
            state = control.start(args.state, port, images)
        except RuntimeError as err:
            print(f"emulator: {err}", file=sys.stderr)
            return 1
        print(f"running: {state.url} (pid {state.pid}, state {state.state_dir})")
        return 0
    if args.action == "stop":
        stopped = control.stop(args.state)
        print("stopped" if stopped else "was not running")
        return 0
    if args.action == "status":
        state = control.status(args.state)
        if state.running:
            print(
                f"running: {state.url} (pid {state.pid}, state {state.state_dir}, gcs {state.gcs_root})"
            )
            for uri, context in state.images.items():
                print(f"  image {uri} -> {context}")
            return 0
        print(state.detail)
        return 3
    state = control.status(args.state)
    if not state.running:
        print(
            f"emulator: {state.detail}; start it with `python -m labkit emulator start`",
            file=sys.stderr,
        )
        return 1
    if args.action == "register":
        from labkit.local.emulator.dockerfile import parse_image_option

        try:
            uri, context = parse_image_option(args.image)
            control.register_image(state.port or 0, uri, context)
        except ValueError as err:
            print(f"emulator: {err}", file=sys.stderr)
            return 2
        print(f"registered {uri} -> {Path(context).resolve()}")
        return 0
    if args.action == "token":
        print(f"session token of {state.url} (state {state.state_dir}):")
        print(state.token)
        return 0
    query = f"?tail={args.tail}" if args.tail else ""
    try:
        logs = control.request_json(state.port or 0, f"/labkit/v1/{args.job}/logs{query}")
    except control.ServiceError as err:
        print(f"emulator: {err}", file=sys.stderr)
        return 1
    print(logs["job"], end="")
    for role, text in logs["replicas"].items():
        print(f"\n----- {role} -----\n{text}", end="")
    return 0
