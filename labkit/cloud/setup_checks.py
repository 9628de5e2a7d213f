"""Set-up checks notebook 00 runs: the Google Cloud APIs the lab needs, and the kernel.

APIs. The codelab (section 4) enables Compute Engine, Container Registry and Vertex AI.
Today's lab needs five services, each named as ``gcloud services enable`` takes it:

- ``compute.googleapis.com``: the machines of the worker pools (codelab section 4; the
  Compute Engine API, docs.cloud.google.com/compute/docs/reference/rest/v1).
- ``artifactregistry.googleapis.com``: the trainer image (Container Registry takes no pushes
  since 2025-03-18; Artifact Registry API reference,
  docs.cloud.google.com/artifact-registry/docs/reference/rest).
- ``aiplatform.googleapis.com``: Vertex AI training (the Vertex AI API: the pinned
  google-cloud-aiplatform's ``google.cloud.aiplatform.constants.base.API_BASE_PATH``).
- ``notebooks.googleapis.com``: Vertex AI Workbench instances ("Service:
  notebooks.googleapis.com", cloud.google.com/vertex-ai/docs/workbench/reference/rest).
- ``cloudbuild.googleapis.com``: the image build notebook 04 prints when there is no Docker
  engine (`labkit.cloud.images.cloud_build_command`; docs.cloud.google.com/build/docs/api).

Notebook 00 enables them through Service Usage's Python client (google-cloud-service-usage:
`enable_apis`, one ``services.batchEnable`` call for those missing) and checks them with one
``services.list`` call (`check_apis`), naming every missing one at once instead of failing
later on the first. Locally the same client talks to the local platform, whose other APIs
refuse with 403 ``SERVICE_DISABLED`` while theirs is off (`labkit.local.emulator.services`).
The terminal route stays printed: `enable_apis_command` and `list_enabled_command`
(cloud.google.com/sdk/gcloud/reference/services/list).

Kernel. The kit installs one way per place, from the same pins (tests/test_pins.py):
Workbench uses ``environment.yml`` (a conda environment, registered as the Jupyter kernel
``cassava-mwms``), laptops and CI use ``make venv`` (``.venv``, which registers the same
kernel name inside it; every notebook's metadata names it). A notebook opened in another kernel cannot import the kit, or
imports a different copy of it; `environment_checks` says which interpreter runs and how to
switch, without failing (CI runs the notebooks in the venv's own ``python3`` kernel).
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from labkit.cloud import paths
from labkit.i18n import gettext

# One name for the conda environment (environment.yml's `name:`), the Jupyter kernel and
# the kernel `make venv` registers (tests/test_setup_checks.py keeps the three in step).
KIT_ENV_NAME = "cassava-mwms"
KERNEL_DISPLAY_NAME = f"Python ({KIT_ENV_NAME})"


@dataclasses.dataclass(frozen=True)
class Api:
    """A Google Cloud service the lab uses, and why."""

    service: str
    what: str
    used_for: str


REQUIRED_APIS: tuple[Api, ...] = (
    Api("compute.googleapis.com", "Compute Engine", "the worker pools' machines"),
    Api("artifactregistry.googleapis.com", "Artifact Registry", "the trainer image (04)"),
    Api("aiplatform.googleapis.com", "Vertex AI", "the custom training job (04)"),
    Api("notebooks.googleapis.com", "Vertex AI Workbench", "the instance these notebooks run on"),
    Api("cloudbuild.googleapis.com", "Cloud Build", "building the image without Docker (04)"),
)
REQUIRED_SERVICES: tuple[str, ...] = tuple(api.service for api in REQUIRED_APIS)


# --------------------------------------------------------------------------- APIs


def enable_apis_command(project_id: str) -> list[str]:
    """The one ``gcloud services enable`` command for all five services (already enabled
    ones are left as they are)."""
    return ["gcloud", "services", "enable", *REQUIRED_SERVICES, f"--project={project_id}"]


def list_enabled_command(project_id: str) -> list[str]:
    """The one call that lists the project's enabled services, one name per line."""
    return [
        "gcloud",
        "services",
        "list",
        "--enabled",
        f"--project={project_id}",
        "--format=value(config.name)",
    ]


def missing_apis(enabled: Iterable[str], required: Sequence[str] = REQUIRED_SERVICES) -> list[str]:
    """The required services not in ``enabled``, in the lab's order."""
    have = set(enabled)
    return [service for service in required if service not in have]


@dataclasses.dataclass
class ApiCheck:
    """What one ``services.list`` call found (as ``gcloud services list --enabled`` would)."""

    project_id: str
    enabled: list[str]
    missing: list[str]

    @property
    def ok(self) -> bool:
        return not self.missing

    def rows(self) -> list[dict[str, Any]]:
        """One row per required service, for a `labkit.course.views.Table`."""
        return [
            {**row, "enabled": api.service not in self.missing}
            for api, row in zip(REQUIRED_APIS, api_rows(), strict=True)
        ]

    def message(self, enabled_now: Sequence[str] = ()) -> str:
        """The verdict notebook 00 prints, in the edition's words (also the error's text);
        ``enabled_now``: the services `enable_apis` just enabled, named first."""
        if self.ok:
            verdict = gettext("all {n} APIs are enabled in {project}").format(
                n=len(REQUIRED_SERVICES), project=self.project_id
            )
            if not enabled_now:
                return verdict
            return (
                gettext("enabled now: {services}").format(services=", ".join(enabled_now))
                + "\n"
                + verdict
            )
        return gettext(
            "not enabled in {project}: {missing}. Run `{command}` (it needs the "
            "serviceusage.services.enable permission, e.g. the Service Usage Admin role: "
            "docs.cloud.google.com/build/docs/set-up), then check again."
        ).format(
            project=self.project_id,
            missing=", ".join(self.missing),
            command=shlex.join(enable_apis_command(self.project_id)),
        )


def api_rows() -> list[dict[str, str]]:
    """The five services and what each is for, for a `labkit.course.views.Table` (the
    descriptions in the edition's words: the catalog holds each `Api.used_for`)."""
    return [
        {"service": a.service, "what": a.what, "used for": gettext(a.used_for)}
        for a in REQUIRED_APIS
    ]


def _client(client: Any) -> Any:
    if client is not None:
        return client
    from google.cloud import service_usage_v1

    return service_usage_v1.ServiceUsageClient()


def check_apis(project_id: str, client: Any = None) -> ApiCheck:
    """One Service Usage ``services.list`` call (``state:ENABLED``) and the comparison.

    ``client``: a `google.cloud.service_usage_v1.ServiceUsageClient`; None builds Google's
    with the default credentials (the learner's, in Workbench). Locally the same client
    reaches the local platform (`labkit.local.vertex.service_usage_client`).
    """
    listing = _client(client).list_services(
        request={"parent": f"projects/{project_id}", "filter": "state:ENABLED", "page_size": 200}
    )
    enabled = {service.config.name or service.name.rsplit("/", 1)[-1] for service in listing}
    return ApiCheck(project_id, sorted(enabled), missing_apis(enabled))


def enable_apis(project_id: str, client: Any = None, timeout_s: float = 600) -> list[str]:
    """Enable the lab's services the project lacks, in one ``services.batchEnable`` call
    (atomic: all of them or none), and wait for it; returns the ones it enabled. What
    `enable_apis_command` does from a terminal."""
    client = _client(client)
    missing = check_apis(project_id, client).missing
    if missing:
        operation = client.batch_enable_services(
            request={"parent": f"projects/{project_id}", "service_ids": missing}
        )
        operation.result(timeout=timeout_s)
    return missing


def require_apis(check: ApiCheck) -> None:
    """Stop here, naming every missing API and the command that enables them."""
    if not check.ok:
        raise RuntimeError(check.message())


# --------------------------------------------------------------------------- kernel


@dataclasses.dataclass
class EnvironmentCheck:
    """Which Python runs this notebook, and whether it is the kit's environment."""

    interpreter: str
    environment: str  # "conda env cassava-mwms", "make venv (.venv)" or "other: <prefix>"
    kit_source: str  # where `labkit` is imported from
    kit_from_this_checkout: bool
    kernel_registered: bool | None  # None: jupyter_client is not installed
    ok: bool
    advice: str

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"check": gettext("interpreter"), "value": self.interpreter},
            {"check": gettext("environment"), "value": describe_environment(self.environment)},
            {"check": gettext("kit imported from"), "value": self.kit_source},
            {
                "check": gettext("Jupyter kernel {name!r} registered").format(name=KIT_ENV_NAME),
                "value": gettext("unknown")
                if self.kernel_registered is None
                else (gettext("yes") if self.kernel_registered else gettext("no")),
            },
            {
                "check": gettext("verdict"),
                "value": gettext("the kit's environment") if self.ok else self.advice,
            },
        ]

    def summary(self) -> str:
        """The one line notebook 00 prints: the advice, or which environment runs."""
        return self.advice or gettext("running in the kit's environment: {environment}").format(
            environment=describe_environment(self.environment)
        )


def workbench_install_commands() -> list[str]:
    """The Workbench install story, as README.md shows it (run in the repository's folder)."""
    return [
        "conda env create -f environment.yml",
        f"conda activate {KIT_ENV_NAME}",
        # inside the environment, as Google's "Add a conda environment" page for Workbench
        # instances registers it; then a refresh of the JupyterLab page shows the kernel
        f'python -m ipykernel install --prefix "${{DL_ANACONDA_HOME}}/envs/{KIT_ENV_NAME}" '
        f'--name {KIT_ENV_NAME} --display-name "{KERNEL_DISPLAY_NAME}"',
    ]


def environment_kind(prefix: str | Path, repo_root: Path = paths.REPO_ROOT) -> str:
    """Name the environment at ``prefix``: the kit's conda env, the kit's venv, or other."""
    prefix = Path(prefix).resolve()
    if prefix == (repo_root / ".venv").resolve():
        return "make venv (.venv)"
    if prefix.name == KIT_ENV_NAME:
        return f"conda env {KIT_ENV_NAME}"
    return f"other: {prefix}"


def describe_environment(kind: str) -> str:
    """`environment_kind`'s answer in the edition's words (the answer itself stays English:
    `environment_checks` compares it)."""
    if kind == "make venv (.venv)":
        return gettext("make venv (.venv)")
    if kind.startswith("conda env "):
        return gettext("conda env {name}").format(name=kind.removeprefix("conda env "))
    if kind.startswith("other: "):
        return gettext("other: {prefix}").format(prefix=kind.removeprefix("other: "))
    return kind


def kernel_registered(name: str = KIT_ENV_NAME) -> bool | None:
    """Whether Jupyter knows a kernel called ``name`` (None when jupyter_client is absent)."""
    try:
        from jupyter_client.kernelspec import KernelSpecManager
    except ImportError:
        return None
    return name in KernelSpecManager().find_kernel_specs()


def environment_checks(
    prefix: str | Path | None = None, kit_file: str | Path | None = None
) -> EnvironmentCheck:
    """Is this kernel the kit's environment? Advice, never an exception: CI runs the
    notebooks in the venv's ``python3`` kernel, a learner may have picked another one."""
    import labkit

    prefix = Path(prefix or sys.prefix)
    kit_file = Path(kit_file or labkit.__file__).resolve()
    kind = environment_kind(prefix)
    from_checkout = paths.REPO_ROOT.resolve() in kit_file.parents
    ok = from_checkout and not kind.startswith("other")
    if ok:
        advice = ""
    elif not from_checkout:
        advice = gettext(
            "the kit is imported from {source}, not from this checkout: install it "
            "here with `make venv` or the conda environment (see below)"
        ).format(source=kit_file.parent)
    else:
        advice = gettext(
            "this kernel runs {prefix}, not the kit's environment: pick Kernel > Change "
            "Kernel > {kernel}; if it is not listed, run in a terminal: {commands}"
        ).format(
            prefix=prefix,
            kernel=KERNEL_DISPLAY_NAME,
            commands=" && ".join(workbench_install_commands()),
        )
    return EnvironmentCheck(
        interpreter=sys.executable,
        environment=kind,
        kit_source=str(kit_file.parent),
        kit_from_this_checkout=from_checkout,
        kernel_registered=kernel_registered(),
        ok=ok,
        advice=advice,
    )
