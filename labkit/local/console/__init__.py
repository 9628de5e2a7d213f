"""The local console: the codelab's console route (Vertex AI → Training → Create) on this machine.

A page served by the local Vertex AI service at ``/console``, modelled on the real console's
Training section: the *Training pipelines* and *Custom jobs* tabs, the *Create* flow with the
real steps and field names (training method, model details, training container with the
**model output directory**, hyperparameter tuning, compute and pricing with worker pools 0-3
and the kit's cost estimate, prediction container), and a job page with the state timeline,
each replica's TF_CONFIG, live per-replica logs, the output directory's files and Cancel.
*Start training* creates a training pipeline through the same service call as the REST API
(``POST .../trainingPipelines``), validated by the same job-spec core (`labkit.cloud.specs`).

    python -m labkit console [--no-open] [--hl zh-CN]   # start the service if needed, open the page

Modules: `views` (the Starlette sub-app and its pages), `form` (the Create form and the
pipeline it becomes), `client` (the notebook's side: submit the form, find the job, take
screenshots), `browser` (Debian's Chromium through Playwright). Templates and the one script
are in ``templates/`` and ``static/``; every label goes through `labkit.i18n` (``?hl=zh-CN``).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from labkit.cloud.settings import Settings

PATH = "/console"


def create_app(service: Any, settings: Settings | None = None) -> Any:
    """The console as an ASGI app over a `labkit.local.emulator.service.Service`, to mount at
    `PATH` (``settings`` default: the lab's saved settings, read on each request)."""
    from labkit.local.console.views import create_app as _create

    return _create(service, settings)


def console_url(port: int, lang: str | None = None, page: str = "/training") -> str:
    """A console page (default: Training) on the local service at ``port``."""
    query = f"?hl={lang}" if lang and lang != "en" else ""
    return f"http://127.0.0.1:{port}{PATH}{page}{query}"


def sign_in_url(port: int, token: str, page_url: str | None = None) -> str:
    """The address that signs a browser in to the console and then opens ``page_url``
    (default: Training): it sets the session cookie (`labkit.local.guard`), as Jupyter's
    ``?token=`` link does. Valid until the service stops; print it only to its user."""
    from urllib.parse import urlencode, urlsplit

    target = urlsplit(page_url or console_url(port))
    next_path = target.path + (f"?{target.query}" if target.query else "")
    return f"http://127.0.0.1:{port}{PATH}/session?" + urlencode(
        {"token": token, "next": next_path}
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labkit console", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--no-open", action="store_true", help="print the address only")
    parser.add_argument("--hl", default=None, help="page language: en (default) or zh-CN")
    args = parser.parse_args(argv)
    from labkit.cloud.settings import load_settings
    from labkit.local.vertex import ensure_local_service

    settings = load_settings(mode="local")
    try:
        status = ensure_local_service(settings)
    except RuntimeError as err:
        print(f"console: {err}", file=sys.stderr)
        return 1
    port = status.port or settings.emulator_port
    url = sign_in_url(port, status.token or "", console_url(port, args.hl))
    print(f"local console (this link signs your browser in): {url}")
    print("(served by the local Vertex AI service; stop it with `python -m labkit emulator stop`)")
    if not args.no_open:
        import webbrowser

        with contextlib.suppress(webbrowser.Error):
            webbrowser.open(url)
    return 0
