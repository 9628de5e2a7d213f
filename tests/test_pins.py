"""The pins in pyproject.toml and environment.yml agree, and TensorFlow matches tf-keras."""

from __future__ import annotations

import re
from importlib import metadata

import tomllib
import yaml

from labkit.paths import REPO_ROOT

PIN = re.compile(r"^([A-Za-z0-9_.\-\[\]]+)==([^\s;#]+)$")


def pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    specs = project["dependencies"] + project["optional-dependencies"]["dev"]
    pins = {}
    for spec in specs:
        m = PIN.match(spec.strip())
        assert m, f"{spec!r} in pyproject.toml is not pinned with =="
        pins[m.group(1).lower()] = m.group(2)
    return pins


def environment_pins() -> dict[str, str]:
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text())
    pip_lists = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert pip_lists, "environment.yml has no pip: section"
    pins = {}
    for spec in pip_lists[0]:
        if spec.startswith("-e"):
            continue
        m = PIN.match(spec.strip())
        assert m, f"{spec!r} in environment.yml is not pinned with =="
        pins[m.group(1).lower()] = m.group(2)
    return pins


def test_environment_yml_has_the_same_pins_as_pyproject():
    assert environment_pins() == pyproject_pins()


def test_tensorflow_and_tf_keras_are_the_same_release():
    pins = pyproject_pins()
    assert pins["tensorflow"] == pins["tf-keras"]


def test_installed_versions_match_the_pins():
    pins = pyproject_pins()
    for name in ("tensorflow", "tf-keras", "tensorflow-datasets", "google-cloud-aiplatform"):
        assert metadata.version(name) == pins[name], (
            f"installed {name} differs from its pin: run `make test` to reinstall"
        )
