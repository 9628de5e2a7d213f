"""Debian's Chromium, driven by Playwright: for the console's browser tests and screenshots.

The browser is the one `.ci/install-browser` installs with apt-get (``/usr/bin/chromium``, or
``$LABKIT_CHROMIUM``); Playwright's own browser download (``playwright install``) is never
used, so nothing is fetched from outside the package archives. Each launch gets a fresh
profile folder and the flags that keep a headless Chromium from calling home.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
VIEWPORT = {"width": 1280, "height": 900}


def chromium_path() -> str:
    """Where the browser is expected (``$LABKIT_CHROMIUM`` overrides)."""
    return os.environ.get("LABKIT_CHROMIUM") or CHROMIUM


def unavailable_reason() -> str | None:
    """None when a browser can be driven here, else what is missing and how to fix it."""
    path = chromium_path()
    if not (Path(path).is_file() and os.access(path, os.X_OK)):
        return (
            f"no Chromium at {path}: run `make browser` (.ci/install-browser installs Debian's "
            "chromium with apt-get; it needs root) or set LABKIT_CHROMIUM"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is missing: `pip install -e .` installs the pinned one"
    return None


@contextlib.contextmanager
def open_browser(**context_options: Any) -> Iterator[Any]:
    """A Playwright browser context on Debian's Chromium with a fresh profile, closed (and
    its profile removed) on exit. Raises RuntimeError naming the fix when there is none."""
    reason = unavailable_reason()
    if reason:
        raise RuntimeError(reason)
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="labkit-chromium-")
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile,
                executable_path=chromium_path(),
                headless=True,
                args=list(FLAGS),
                viewport=context_options.pop("viewport", VIEWPORT),
                **context_options,
            )
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
