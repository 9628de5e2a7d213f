"""Notebook 00's set-up checks, offline: the five APIs and the gcloud commands printed for
the terminal route (the client calls themselves: tests/test_service_usage.py), and one
install story whose environment, kernel and `make jupyter` share one name."""

from __future__ import annotations

import re

import pytest
import yaml

from labkit.cloud import paths, setup_checks
from labkit.cloud.settings import Settings

FIVE = [
    "compute.googleapis.com",
    "artifactregistry.googleapis.com",
    "aiplatform.googleapis.com",
    "notebooks.googleapis.com",
    "cloudbuild.googleapis.com",
]
CLOUD = Settings(mode="cloud", project_id="cassava-lab-4711", run_id="run-a")


def test_the_enable_step_names_the_five_apis():
    assert list(setup_checks.REQUIRED_SERVICES) == FIVE
    command = setup_checks.enable_apis_command(CLOUD.project_id)
    assert command == ["gcloud", "services", "enable", *FIVE, "--project=cassava-lab-4711"]


def test_one_list_call_checks_them():
    assert setup_checks.list_enabled_command("cassava-lab-4711") == [
        "gcloud",
        "services",
        "list",
        "--enabled",
        "--project=cassava-lab-4711",
        "--format=value(config.name)",
    ]


def test_the_message_names_every_missing_api_and_the_command():
    found = setup_checks.ApiCheck("cassava-lab-4711", [], FIVE[3:])
    message = found.message()
    assert "not enabled in cassava-lab-4711: notebooks.googleapis.com, cloudbuild" in message
    assert "gcloud services enable compute.googleapis.com" in message
    assert [row["enabled"] for row in found.rows()] == [True, True, True, False, False]
    with pytest.raises(RuntimeError, match="not enabled in cassava-lab-4711: notebooks"):
        setup_checks.require_apis(found)


# --------------------------------------------------------------------------- install story


def test_one_name_for_the_environment_the_kernel_and_make_jupyter():
    env = yaml.safe_load((paths.REPO_ROOT / "environment.yml").read_text())
    assert env["name"] == setup_checks.KIT_ENV_NAME
    makefile = (paths.REPO_ROOT / "Makefile").read_text()
    assert re.search(rf"^KERNEL\s*:=\s*{setup_checks.KIT_ENV_NAME}\s*$", makefile, re.M)
    stamp = makefile[makefile.index("\n$(STAMP):") :].split("\n\n")[0]  # make venv
    assert (
        'ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python ($(KERNEL))"'
        in (stamp)
    )
    jupyter = makefile[makefile.index("\njupyter:") :].split("\n\n")[0]
    assert "-m labkit jupyter" in jupyter  # which starts JupyterLab once the kernel is there
    assert f"Python ({setup_checks.KIT_ENV_NAME})" == setup_checks.KERNEL_DISPLAY_NAME


def test_environment_yml_installs_the_kit_itself():
    env = yaml.safe_load((paths.REPO_ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert any(line.startswith("-e .") for line in pip)


def test_readme_shows_both_install_stories():
    readme = (paths.REPO_ROOT / "README.md").read_text()
    for command in setup_checks.workbench_install_commands():
        assert command in readme, command
    assert "make venv" in readme and "make jupyter" in readme


def test_environment_check_recognises_the_two_kit_environments(tmp_path):
    venv = setup_checks.environment_checks(prefix=paths.REPO_ROOT / ".venv")
    assert venv.ok and venv.environment == "make venv (.venv)" and venv.advice == ""
    conda = setup_checks.environment_checks(prefix="/opt/conda/envs/cassava-mwms")
    assert conda.ok and conda.environment == "conda env cassava-mwms"


def test_another_kernel_gets_advice_not_an_error(tmp_path):
    other = setup_checks.environment_checks(prefix="/opt/conda")
    assert not other.ok
    assert "Kernel > Change Kernel > Python (cassava-mwms)" in other.advice
    assert "conda env create -f environment.yml" in other.advice
    assert other.rows()[-1]["value"] == other.advice
    elsewhere = setup_checks.environment_checks(
        prefix=paths.REPO_ROOT / ".venv", kit_file=tmp_path / "labkit" / "__init__.py"
    )
    assert not elsewhere.ok and "not from this checkout" in elsewhere.advice
