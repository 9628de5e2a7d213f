"""`aiplatform.init` for either mode, and the local service's helpers for notebooks.

The notebooks' job cells are the same in both modes; only this call differs:

- cloud: ``aiplatform.init(project, location, staging_bucket)``, Google's endpoint and the
  learner's credentials.
- local: the same SDK pointed at the local Vertex AI service (`labkit.local.emulator`) on
  127.0.0.1 with the REST transport (the service speaks the v1 REST JSON, not gRPC), started
  first if it is not running. Its credentials are the service's session token as an OAuth
  access token (`google.oauth2.credentials.Credentials`), which the SDK sends as
  ``Authorization: Bearer`` exactly as it sends a Google token (`labkit.local.guard`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from labkit.cloud.paths import REPO_ROOT
from labkit.cloud.settings import Settings
from labkit.local.emulator import control
from labkit.local.supervisor import is_cpp_log_line


def ensure_local_service(
    settings: Settings,
    *,
    state_dir: str | Path | None = None,
    images: dict[str, str] | None = None,
) -> control.ServiceStatus:
    """The local service for ``settings`` (its port, the kit image registered), started if needed.

    Idempotent: a running service is reused and the images are (re-)registered with it.
    """
    wanted = {settings.image_uri: str(REPO_ROOT), **(images or {})}
    current = control.status(state_dir)
    if current.running and current.port != settings.emulator_port:
        raise RuntimeError(
            f"the local Vertex AI service for {current.state_dir} runs on port {current.port}, "
            f"but the settings say {settings.emulator_port}: stop it "
            "(`python -m labkit emulator stop`) or set emulator_port to match"
        )
    return control.start(state_dir, settings.emulator_port, wanted)


def endpoint_kwargs(
    settings: Settings, *, ensure_service: bool = True, state_dir: str | Path | None = None
) -> dict[str, Any]:
    """What `aiplatform.init` takes beyond project, region and bucket: nothing in the cloud
    (Google's endpoint, the learner's default credentials); locally the local Vertex AI
    service's endpoint, the REST transport and the session token as credentials.

    Notebook 04 spreads it into its own literal ``aiplatform.init(...)`` call, so the cell a
    learner keeps is theirs with ``**LOCAL_ENDPOINT`` empty in the cloud.
    """
    if settings.mode == "cloud":
        settings.check_cloud_ready()
        return {}
    from google.oauth2.credentials import Credentials

    if ensure_service:
        token = ensure_local_service(settings, state_dir=state_dir).token
    else:
        token = control.token_for(settings.emulator_port)
    return {
        "api_endpoint": settings.api_endpoint,
        "api_transport": "rest",
        "credentials": Credentials(token),
    }


def describe_endpoint(endpoint: dict[str, Any]) -> str:
    """`endpoint_kwargs`'s value in words, for the notebook (the token itself is not shown)."""
    from labkit.i18n import gettext

    if not endpoint:
        return gettext(
            "LOCAL_ENDPOINT is empty: the SDK uses Google's endpoint and your credentials."
        )
    shown = {**endpoint, "credentials": gettext("the local service's session token")}
    return "LOCAL_ENDPOINT: " + ", ".join(f"{key}={value}" for key, value in shown.items())


def init_vertex(
    settings: Settings,
    *,
    staging_bucket: str | None = None,
    ensure_service: bool = True,
    state_dir: str | Path | None = None,
) -> None:
    """Point the Vertex AI SDK at the right service for ``settings.mode``.

    ``staging_bucket`` defaults to the settings' bucket; `CustomJob.run()` writes its outputs
    under ``<staging bucket>/aiplatform-custom-job-<time>``.
    """
    from google.cloud import aiplatform

    aiplatform.init(
        project=settings.project_id,
        location=settings.region,
        staging_bucket=staging_bucket or settings.bucket_uri,
        **endpoint_kwargs(settings, ensure_service=ensure_service, state_dir=state_dir),
    )


def _job_name(job: Any) -> str:
    """A CustomJob or training job (TrainingPipeline) object, or its resource name."""
    return job if isinstance(job, str) else job.resource_name


def _service_port(settings: Settings | None, port: int | None) -> int:
    """The local service's port: an explicit one, the settings', or where the SDK points."""
    if port is None and settings is not None:
        port = settings.emulator_port
    if port is None:
        from google.cloud import aiplatform

        endpoint = aiplatform.initializer.global_config.api_endpoint or ""
        if endpoint.startswith("http://127.0.0.1:"):
            return int(endpoint.rstrip("/").rsplit(":", 1)[1])
        port = control.status().port
    if port is None:
        raise RuntimeError(
            "the local Vertex AI service is not running: call labkit.local.vertex.init_vertex(settings)"
        )
    return port


def job_logs(
    job: Any, *, tail: int | None = None, settings: Settings | None = None, port: int | None = None
) -> dict[str, str]:
    """Each replica's log of a local job (``{"chief-0": ..., "worker-0": ...}``), plus ``"job"``
    (the service's own lines: states, restarts, every replica's output in order)."""
    query = f"?tail={tail}" if tail else ""
    path = f"/labkit/v1/{_job_name(job)}/logs{query}"
    logs = control.request_json(_service_port(settings, port), path)
    return {"job": logs["job"], **logs["replicas"]}


def print_job_logs(job: Any, *, tail: int | None = 40, **kwargs: Any) -> None:
    """Print a local job's logs, one section per replica (for a notebook cell).

    TensorFlow's C++ start-up logging (oneDNN, CUDA, absl) is left out, as in the cluster
    runner's notebook view: it says nothing about the job, and the full log stays with the
    service (``python -m labkit emulator logs JOB``)."""
    for role, text in job_logs(job, tail=tail, **kwargs).items():
        lines = text.rstrip().splitlines()
        shown = [line for line in lines if not is_cpp_log_line(line)]
        print(f"----- {role} -----")
        print("\n".join(shown))
        if len(shown) < len(lines):
            print(
                f"({len(lines) - len(shown)} TensorFlow start-up log lines left out; "
                f"all of them: python -m labkit emulator logs {_job_name(job)})"
            )


def job_resource(job: Any, *, settings: Settings | None = None, port: int | None = None) -> dict:
    """A local job's JSON as the service stores it, with the fields the SDK does not keep."""
    return control.request_json(_service_port(settings, port), f"/v1/{_job_name(job)}")


def job_output_dir(job: Any, *, settings: Settings | None = None, port: int | None = None) -> Path:
    """The local folder standing for a local job's ``gs://`` base output directory.

    The trainer's model is under ``<it>/model/``, checkpoints and TensorBoard logs beside it.
    A training pipeline's is its backing CustomJob's (``trainingTaskMetadata.backingCustomJob``).
    """
    resource = job_resource(job, settings=settings, port=port)
    backing = (resource.get("trainingTaskMetadata") or {}).get("backingCustomJob")
    if backing:
        resource = job_resource(backing, settings=settings, port=port)
    local = resource.get("labkitLocal") or {}
    if "localOutputDirectory" not in local:
        raise ValueError(f"job {_job_name(job)} has no base output directory")
    return Path(local["localOutputDirectory"])


def register_image(image_uri: str, build_context: str | Path, settings: Settings) -> dict[str, str]:
    """Tell the local service which folder's Dockerfile stands for ``image_uri``."""
    return control.register_image(settings.emulator_port, image_uri, build_context)


def google_client(
    client_class: type, settings: Settings, *, state_dir: str | Path | None = None
) -> Any:
    """A Google client (``client_class``, e.g. `resourcemanager_v3.ProjectsClient`) for
    ``settings.mode``: Google's endpoint and the default credentials in the cloud; locally
    the same client on the local platform's endpoint (REST, the session token), which
    answers the call itself. The one place where the two modes' clients differ."""
    if settings.mode == "cloud":
        return client_class()
    from google.oauth2.credentials import Credentials

    token = ensure_local_service(settings, state_dir=state_dir).token
    return client_class(
        credentials=Credentials(token),
        client_options={"api_endpoint": settings.api_endpoint},
        transport="rest",
    )


def projects_client(settings: Settings, *, state_dir: str | Path | None = None) -> Any:
    """Resource Manager's `ProjectsClient` (`projects.get`, `testIamPermissions`)."""
    from google.cloud import resourcemanager_v3

    return google_client(resourcemanager_v3.ProjectsClient, settings, state_dir=state_dir)


def service_usage_client(settings: Settings, *, state_dir: str | Path | None = None) -> Any:
    """Service Usage's `ServiceUsageClient` (list and enable the lab's APIs)."""
    from google.cloud import service_usage_v1

    return google_client(service_usage_v1.ServiceUsageClient, settings, state_dir=state_dir)


def artifact_registry_client(settings: Settings, *, state_dir: str | Path | None = None) -> Any:
    """Artifact Registry's `ArtifactRegistryClient` (the repository and its images)."""
    from google.cloud import artifactregistry_v1

    return google_client(artifactregistry_v1.ArtifactRegistryClient, settings, state_dir=state_dir)
