"""JupyterLab on one edition of the notebooks, in the edition's language, without the news prompt.

`make jupyter EDITION=zh-CN` runs ``python -m labkit jupyter --lang zh-CN``: JupyterLab opens
on ``notebooks/zh-CN/`` with its own menus in Simplified Chinese (the official language pack,
``jupyterlab-language-pack-zh-CN``, pinned beside JupyterLab) and without "Would you like to
get notified about official Jupyter news?". Both are JupyterLab settings, shipped here as the
defaults of an ``overrides.json`` (JupyterLab's documented way to change a setting's
default), in a settings folder of the lab's own (``<lab home>/jupyterlab/<edition>``), so
the learner's own JupyterLab settings are left alone and, where they chose something in the
Settings menu, still win.

The notebooks name the kit's kernel (``cassava-mwms``, registered by `make venv` or the
README's conda steps), so each opens in it. The browser test (tests/test_jupyterlab.py)
starts JupyterLab through `server_argv`, the same arguments this command uses.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from labkit.cloud import paths
from labkit.cloud.setup_checks import KIT_ENV_NAME, kernel_registered
from labkit.i18n import LANGUAGES, normalize_language
from labkit.i18n.notebooks import edition_dir

# JupyterLab's locale names (the language pack's), by the kit's edition.
JUPYTERLAB_LOCALE = {"en": "en", "zh-CN": "zh_CN"}
NEWS_OFF = {
    # "Would you like to get notified about official Jupyter news?": answered "no" here;
    # "A newer version is available" likewise (the lab pins its JupyterLab).
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}
}


def shipped_settings(lang: str) -> dict[str, Any]:
    """The defaults the kit gives JupyterLab for an edition (``overrides.json``'s content)."""
    locale = JUPYTERLAB_LOCALE[normalize_language(lang)]
    return {**NEWS_OFF, "@jupyterlab/translation-extension:plugin": {"locale": locale}}


def write_settings(lang: str, home: Path | None = None) -> Path:
    """Write the edition's ``overrides.json`` into its own settings folder; return the folder
    (JupyterLab's ``app_settings_dir``)."""
    folder = (home or paths.lab_home()) / "jupyterlab" / normalize_language(lang)
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps(shipped_settings(lang), indent=2, ensure_ascii=False) + "\n"
    (folder / "overrides.json").write_text(text, encoding="utf-8")
    return folder


def server_argv(
    lang: str,
    root_dir: Path,
    *,
    settings_dir: Path,
    port: int | None = None,
    token: str | None = None,
    open_browser: bool = True,
) -> list[str]:
    """JupyterLab's command-line options for one edition served from ``root_dir``."""
    argv = [f"--ServerApp.root_dir={root_dir}", f"--LabApp.app_settings_dir={settings_dir}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")  # a container's root (CI, Docker): JupyterLab refuses else
    if port is not None:
        argv += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    if token is not None:
        argv.append(f"--IdentityProvider.token={token}")
    if not open_browser:
        argv.append("--no-browser")
    return argv


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m labkit jupyter",
        description="JupyterLab on one edition of the notebooks, in its language",
    )
    parser.add_argument("--lang", default="en", help=f"edition: {', '.join(LANGUAGES)}")
    parser.add_argument("--port", type=int, default=None, help="port (default: JupyterLab's)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        lang = normalize_language(args.lang)
    except ValueError as err:
        print(f"labkit jupyter: {err}", file=sys.stderr)
        return 2
    if kernel_registered() is False:
        print(
            f"labkit jupyter: no Jupyter kernel named {KIT_ENV_NAME!r}: run `make venv` (it "
            "registers it), or the README's conda steps; the notebooks open in it",
            file=sys.stderr,
        )
        return 2
    from jupyterlab.labapp import LabApp

    options = server_argv(
        lang,
        edition_dir(lang),
        settings_dir=write_settings(lang),
        port=args.port,
        open_browser=not args.no_browser,
    )
    LabApp.launch_instance(argv=options)
    return 0
