"""Notebook 00's set-up checks, offline: the five APIs enabled and checked with one gcloud
call (a recorded output goes through the real parser), and one install story whose
environment, kernel and `make jupyter` share one name."""

from __future__ import annotations

import json
import re
import subprocess

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

# What `gcloud services list --enabled --format='value(config.name)'` prints: one name a line.
RECORDED_VALUE_OUTPUT = """\
aiplatform.googleapis.com
analyticshub.googleapis.com
artifactregistry.googleapis.com
bigquery.googleapis.com
compute.googleapis.com
logging.googleapis.com
storage.googleapis.com
"""
# The same listing with --format=json (abridged objects, as the Service Usage API returns).
RECORDED_JSON_OUTPUT = json.dumps(
    [
        {
            "config": {"name": name, "title": name.split(".")[0]},
            "name": f"projects/123456789012/services/{name}",
            "parent": "projects/123456789012",
            "state": "ENABLED",
        }
        for name in RECORDED_VALUE_OUTPUT.split()
    ]
)


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


@pytest.mark.parametrize("output", [RECORDED_VALUE_OUTPUT, RECORDED_JSON_OUTPUT])
def test_a_recorded_listing_parses_and_names_the_missing(output):
    enabled = setup_checks.parse_enabled(output)
    assert "storage.googleapis.com" in enabled and "compute.googleapis.com" in enabled
    assert setup_checks.missing_apis(enabled) == [
        "notebooks.googleapis.com",
        "cloudbuild.googleapis.com",
    ]


def test_check_apis_runs_the_one_call_and_the_message_names_the_fix():
    calls = []

    def runner(cmd):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout=RECORDED_VALUE_OUTPUT, stderr="")

    found = setup_checks.check_apis("cassava-lab-4711", runner=runner)
    assert calls == [setup_checks.list_enabled_command("cassava-lab-4711")]
    assert not found.ok
    assert found.missing == ["notebooks.googleapis.com", "cloudbuild.googleapis.com"]
    message = found.message()
    assert "notebooks.googleapis.com, cloudbuild.googleapis.com" in message
    assert "gcloud services enable compute.googleapis.com" in message
    assert {row["service"]: row["enabled"] for row in found.rows()} == {
        "compute.googleapis.com": True,
        "artifactregistry.googleapis.com": True,
        "aiplatform.googleapis.com": True,
        "notebooks.googleapis.com": False,
        "cloudbuild.googleapis.com": False,
    }
    with pytest.raises(RuntimeError, match="not enabled in cassava-lab-4711: notebooks"):
        setup_checks.require_apis(found)


def test_all_enabled_passes():
    listing = RECORDED_VALUE_OUTPUT + "notebooks.googleapis.com\ncloudbuild.googleapis.com\n"

    def runner(cmd):
        return subprocess.CompletedProcess(cmd, 0, stdout=listing, stderr="")

    found = setup_checks.check_apis("p", runner=runner)
    assert found.ok and found.missing == []
    setup_checks.require_apis(found)


def test_a_failing_gcloud_says_why():
    def runner(cmd):
        return subprocess.CompletedProcess(cmd, 1, stdout="", stderr="ERROR: (gcloud) no auth")

    with pytest.raises(RuntimeError, match="no auth"):
        setup_checks.check_apis("p", runner=runner)

    def missing(cmd):
        raise FileNotFoundError("gcloud")

    with pytest.raises(RuntimeError, match="Google Cloud CLI"):
        setup_checks.check_apis("p", runner=missing)


def test_notebook_00_enables_and_checks_through_these_functions():
    source = (paths.REPO_ROOT / "notebooks" / "00_environment_setup.ipynb").read_text()
    for call in (
        "setup_checks.enable_apis_command(",
        "setup_checks.list_enabled_command(",
        "setup_checks.check_apis(",
        "setup_checks.require_apis(",
        "setup_checks.environment_checks()",
    ):
        assert call in source, call


# --------------------------------------------------------------------------- install story


def test_one_name_for_the_environment_the_kernel_and_make_jupyter():
    env = yaml.safe_load((paths.REPO_ROOT / "environment.yml").read_text())
    assert env["name"] == setup_checks.KIT_ENV_NAME
    makefile = (paths.REPO_ROOT / "Makefile").read_text()
    assert re.search(rf"^KERNEL\s*:=\s*{setup_checks.KIT_ENV_NAME}\s*$", makefile, re.M)
    jupyter = makefile[makefile.index("\njupyter:") :].split("\n\n")[0]
    assert "ipykernel install --user --name $(KERNEL)" in jupyter
    assert '--display-name "Python ($(KERNEL))"' in jupyter
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
