"""Every gcloud and docker command the kit prints for the terminal route takes only flags its
reference page lists, with the positional arguments and required flags it names.

The kit runs its own work through Google's Python clients; these commands are printed for
learners who prefer a terminal (00's API and repository cells, 04's build plans, the
permission check's grants, 05's Workbench reminder), and nothing here runs them, so only
this test would see a renamed or misspelt flag. `REFERENCE` is copied from each command's
SYNOPSIS on its reference page, named beside it (gcloud: the Google Cloud SDK reference,
checked 2026-12-07; docker: the Docker CLI's manual pages, docker-build(1) and
docker-push(1) of Docker 28-29).
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path

import pytest

from labkit.cloud import cleanup, images, permissions, setup_checks
from labkit.cloud.settings import Settings

SDK_REFERENCE = "cloud.google.com/sdk/gcloud/reference/"
# "GCLOUD WIDE FLAGS: These flags are available to all commands" (every gcloud page).
GCLOUD_WIDE_FLAGS = {
    "--access-token-file", "--account", "--billing-project", "--configuration", "--flags-file",
    "--flatten", "--format", "--help", "--impersonate-service-account", "--log-http",
    "--project", "--quiet", "--trace-token", "--user-output-enabled", "--verbosity",
}  # fmt: skip
# "LIST COMMAND FLAGS", on the pages of list commands.
LIST_FLAGS = {"--filter", "--limit", "--page-size", "--sort-by", "--uri"}


@dataclasses.dataclass(frozen=True)
class Synopsis:
    """One command's SYNOPSIS: its flags, the ones it requires, how many positionals."""

    page: str
    flags: frozenset[str]
    required: frozenset[str] = frozenset()
    positionals: tuple[int, int] = (0, 0)  # (at least, at most); -1: any number
    wide: frozenset[str] = frozenset(GCLOUD_WIDE_FLAGS)


def flags(names: str) -> frozenset[str]:
    """A SYNOPSIS's flags, as the page lists them, space-separated."""
    return frozenset(names.split())


def gcloud(
    path: str,
    flags: set[str] | frozenset[str],
    *,
    required: set[str] = frozenset(),
    positionals: tuple[int, int] = (0, 0),
) -> Synopsis:
    """A gcloud command's SYNOPSIS, its page the SDK reference's path for ``path``."""
    page = SDK_REFERENCE + path.replace(" ", "/")
    return Synopsis(page, frozenset(flags), frozenset(required), positionals)


REFERENCE: dict[str, Synopsis] = {
    "gcloud services enable": gcloud("services enable", {"--async"}, positionals=(1, -1)),
    "gcloud services list": gcloud("services list", {"--available", "--enabled"} | LIST_FLAGS),
    "gcloud artifacts repositories describe": gcloud(
        "artifacts repositories describe", {"--location"}, positionals=(1, 1)
    ),
    "gcloud artifacts repositories create": gcloud(
        "artifacts repositories create",
        flags(
            "--location --repository-format --async --description --kms-key --labels --mode "
            "--immutable-tags --version-policy"
        ),
        required={"--repository-format"},
        positionals=(1, 1),
    ),
    "gcloud artifacts repositories list": gcloud(
        "artifacts repositories list", {"--location"} | LIST_FLAGS
    ),
    "gcloud auth configure-docker": gcloud("auth configure-docker", set(), positionals=(0, 1)),
    "gcloud builds submit": gcloud(
        "builds submit",
        flags(
            "--no-source --async --no-cache --default-buckets-behavior --dir --disk-size "
            "--gcs-log-dir --gcs-source-staging-dir --git-source-dir --git-source-revision "
            "--ignore-file --machine-type --polling-interval --region --revision "
            "--service-account --substitutions --suppress-logs --timeout --worker-pool "
            "--config --pack --tag"
        ),
        positionals=(0, 1),
    ),
    "gcloud projects add-iam-policy-binding": gcloud(
        "projects add-iam-policy-binding",
        {"--member", "--role", "--condition", "--condition-from-file"},
        required={"--member", "--role"},
        positionals=(1, 1),
    ),
    "gcloud workbench instances stop": gcloud(
        "workbench instances stop", {"--location", "--async"}, positionals=(1, 1)
    ),
    "gcloud workbench instances delete": gcloud(
        "workbench instances delete", {"--location", "--async"}, positionals=(1, 1)
    ),
    "gcloud workbench instances list": gcloud(
        "workbench instances list", {"--location"} | LIST_FLAGS
    ),
    # The kit writes -t as --tag: one spelling for every flag the test reads.
    "docker build": Synopsis(
        "docker-build(1), Docker User Manuals",
        flags(
            "--build-arg --label --tag --file --target --platform --no-cache --pull --quiet "
            "--progress"
        ),
        positionals=(1, 1),
        wide=frozenset(),
    ),
    "docker push": Synopsis(
        "docker-push(1), Docker User Manuals",  # Docker 29 dropped --disable-content-trust
        frozenset({"--all-tags", "--platform", "--quiet"}),
        positionals=(1, 1),
        wide=frozenset(),
    ),
}

CLOUD = Settings(mode="cloud", project_id="cassava-lab-4711", run_id="run-a")
PRINTED_LINE = re.compile(r"(?:^|\s)((?:gcloud|docker) .+)$", re.M)


def printed_commands() -> dict[str, list[str]]:
    """Every command the kit prints, by where it is printed."""
    context = Path("/home/jupyter/cassava-mwms-lab")
    check = permissions.PermissionCheck(CLOUD.project_id, [], list(permissions.LAB_NEEDS))
    found = {
        "00: enable the APIs": setup_checks.enable_apis_command(CLOUD.project_id),
        "00: list the enabled APIs": setup_checks.list_enabled_command(CLOUD.project_id),
        "00: create the repository": images.create_repository_command(CLOUD),
        "05: list the kit's repositories": images.list_kit_repositories_command(CLOUD),
    }
    for route in images.ROUTES:
        for i, command in enumerate(images.publish_plan(CLOUD, route, context).all_commands()):
            found[f"04: {route} plan, command {i + 1}"] = command
    for i, command in enumerate(check.grant_commands()):
        found[f"00: grant {check.missing_roles()[i]}"] = command
    for i, line in enumerate(PRINTED_LINE.findall(cleanup.workbench_reminder(CLOUD))):
        found[f"05: Workbench reminder, line {i + 1}"] = shlex.split(line)
    return found


def synopsis_of(command: list[str]) -> tuple[str, list[str]]:
    """The command's path in `REFERENCE` (longest match) and the arguments after it."""
    for length in range(min(4, len(command)), 1, -1):
        path = " ".join(command[:length])
        if path in REFERENCE:
            return path, command[length:]
    raise AssertionError(f"no reference page recorded for `{shlex.join(command)}`")


def problems(command: list[str]) -> list[str]:
    """What in ``command`` its reference page does not allow or requires and is missing."""
    path, rest = synopsis_of(command)
    reference = REFERENCE[path]
    flags = {arg.split("=", 1)[0] for arg in rest if arg.startswith("--")}
    positionals = [arg for arg in rest if not arg.startswith("-")]
    unknown = sorted(flags - reference.flags - reference.wide)
    missing = sorted(reference.required - flags)
    low, high = reference.positionals
    found = [f"flag {flag} is not on {reference.page}" for flag in unknown]
    found += [f"required flag {flag} is missing ({reference.page})" for flag in missing]
    if len(positionals) < low or (high != -1 and len(positionals) > high):
        found.append(
            f"{len(positionals)} positional arguments; {reference.page} takes {low}-{high}"
        )
    return found


@pytest.mark.parametrize("where", list(printed_commands()))
def test_each_printed_command_matches_its_reference_page(where):
    command = printed_commands()[where]
    assert not problems(command), f"{where}: `{shlex.join(command)}`: {problems(command)}"


def test_every_command_group_the_kit_prints_has_a_reference_page_and_is_printed():
    printed = {synopsis_of(command)[0] for command in printed_commands().values()}
    assert printed == set(REFERENCE), set(REFERENCE) ^ printed


def test_a_misspelt_or_missing_flag_is_caught():
    create = images.create_repository_command(CLOUD)
    misspelt = [arg.replace("--repository-format", "--format-repository") for arg in create]
    page = REFERENCE["gcloud artifacts repositories create"].page
    assert problems(misspelt) == [
        f"flag --format-repository is not on {page}",
        f"required flag --repository-format is missing ({page})",
    ]
    assert problems(["gcloud", "services", "enable", "--project=p"])  # no service named
    with pytest.raises(AssertionError, match="no reference page"):
        synopsis_of(["gcloud", "artifacts", "docker", "images", "list"])
