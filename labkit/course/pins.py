"""The kit's pins, read in one place: ``pyproject.toml``'s ``==`` requirements.

Notebook 00 compares them with what is installed, the Dockerfile exercise lints against
them, and tests/test_pins.py keeps ``environment.yml`` in step with them. Python 3.10 has no
``tomllib``; there the pinned ``tomli`` (same API, installed only below 3.11) reads the file.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib

from labkit.cloud import paths

KIT_DISTRIBUTION = "cassava-mwms-lab"
# name==version, then an optional environment marker ("; python_version < '3.11'").
PIN = re.compile(r"^\s*([A-Za-z0-9_.\-\[\]]+)\s*==\s*([^\s;#]+)\s*(?:;\s*(.+?))?\s*$")


def parse_pin(spec: str) -> tuple[str, str, str | None]:
    """``"name==version; marker"`` -> (lower-case name, version, marker or None).

    Raises ValueError for a requirement that is not pinned with ``==``: the kit pins
    every package so that a laptop, CI and Workbench install the same versions.
    """
    m = PIN.match(spec)
    if not m:
        raise ValueError(f"{spec!r} is not pinned with == (the kit pins every package)")
    return m.group(1).lower(), m.group(2), m.group(3)


def requirement_lines(pyproject: Path | None = None, *, dev: bool = False) -> list[str]:
    """The kit's requirements: pyproject.toml's, or the installed kit's outside a checkout."""
    path = pyproject or paths.REPO_ROOT / "pyproject.toml"
    if path.is_file():
        project = tomllib.loads(path.read_text())["project"]
        lines = list(project["dependencies"])
        if dev:
            lines += project.get("optional-dependencies", {}).get("dev", [])
        return lines
    try:
        return [r for r in metadata.requires(KIT_DISTRIBUTION) or [] if dev or "extra" not in r]
    except metadata.PackageNotFoundError:
        return []


def pinned_versions(pyproject: Path | None = None, *, dev: bool = False) -> dict[str, str]:
    """``name -> version`` of the kit's ``==`` pins (runtime ones; ``dev=True`` adds the
    test and lint tools)."""
    pins = {}
    for line in requirement_lines(pyproject, dev=dev):
        name, version, _ = parse_pin(line)
        pins[name] = version
    return pins


def image_requirements(path: Path | None = None) -> dict[str, str]:
    """``name -> version`` of what the trainer image installs on top of its base:
    ``trainer/requirements.txt``, the one list the Dockerfile's ``pip install -r`` reads."""
    path = path or paths.REPO_ROOT / "trainer" / "requirements.txt"
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version, _ = parse_pin(line)
            found[name] = version
    return found
