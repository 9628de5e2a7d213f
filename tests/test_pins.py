"""The pins in pyproject.toml and environment.yml agree, and TensorFlow matches tf-keras.

pyproject.toml is read by `labkit.course.pins` (tomllib, or the pinned tomli on Python 3.10), the
same reader notebook 00 and the Dockerfile exercise use.
"""

from __future__ import annotations

from importlib import metadata

import pytest
import yaml

from labkit.cloud.paths import REPO_ROOT
from labkit.course import pins


def pyproject_pins() -> dict[str, tuple[str, str | None]]:
    """name -> (version, environment marker) of every runtime and dev requirement."""
    return {
        name: (version, marker)
        for name, version, marker in map(pins.parse_pin, pins.requirement_lines(dev=True))
    }


def environment_pins() -> dict[str, tuple[str, str | None]]:
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text())
    pip_lists = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert pip_lists, "environment.yml has no pip: section"
    found = {}
    for spec in pip_lists[0]:
        if spec.startswith("-e"):
            continue
        name, version, marker = pins.parse_pin(spec)
        found[name] = (version, marker)
    return found


def test_environment_yml_has_the_same_pins_as_pyproject():
    assert environment_pins() == pyproject_pins()


def test_the_images_requirements_are_pinned_alike_in_all_three_files():
    """trainer/requirements.txt is what the container installs (the Dockerfile's
    `pip install -r`); the kit's venv and the Workbench conda env install the same versions."""
    image = pins.image_requirements()
    assert {"tf-keras", "tensorflow-datasets", "importlib-resources"} <= set(image)
    kit, conda = pyproject_pins(), environment_pins()
    for name, version in image.items():
        assert kit.get(name, (None,))[0] == version, f"pyproject.toml: pin {name}=={version}"
        assert conda.get(name, (None,))[0] == version, f"environment.yml: pin {name}=={version}"


def test_every_requirement_is_pinned_and_a_loose_one_is_named():
    assert len(pyproject_pins()) == len(pins.requirement_lines(dev=True))
    with pytest.raises(ValueError, match="'numpy>=1.0' is not pinned with =="):
        pins.parse_pin("numpy>=1.0")
    assert pins.parse_pin("tomli==2.5.0; python_version < '3.11'") == (
        "tomli",
        "2.5.0",
        "python_version < '3.11'",
    )


def test_python_310_reads_pyproject_through_the_pinned_tomli():
    """README promises Python 3.10-3.12: on 3.10, `labkit.course.pins` imports tomli instead of
    tomllib, so tomli must be a pinned requirement for exactly those Pythons."""
    version, marker = pyproject_pins()["tomli"]
    assert marker is not None and marker.replace('"', "'") == "python_version < '3.11'"
    requires = pins.tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert requires["requires-python"] == ">=3.10,<3.13"


def test_tensorflow_and_tf_keras_are_the_same_release():
    found = pins.pinned_versions()
    assert found["tensorflow"] == found["tf-keras"]


def test_installed_versions_match_the_pins():
    found = pins.pinned_versions()
    for name in ("tensorflow", "tf-keras", "tensorflow-datasets", "google-cloud-aiplatform"):
        assert metadata.version(name) == found[name], (
            f"installed {name} differs from its pin: run `make test` to reinstall"
        )
