"""Worker pool specs for a Vertex AI custom job: build them, and catch what Vertex would reject.

The codelab hand-writes ``worker_pool_specs`` dicts. A wrong one is refused by Vertex only
after the request, sometimes after minutes of provisioning; a spec that Vertex accepts can
still break MultiWorkerMirroredStrategy (MWMS). `validate_worker_pool_specs` checks both
before anything is submitted and returns every problem at once, each naming the field and
the fix, so a learner repairs the spec in one pass.

Pools: 0 = the chief (always one replica), 1 = workers, 2 = parameter servers,
3 = evaluators. Empty ``{}`` pools are placeholders, as on Vertex.

This is the kit's one job-spec core: the builder the notebooks use, the machine catalog
(`machine_catalog`) and its price table (`load_price_table`, ``labkit/cloud/prices.json``), the
checks behind ``labkit spec validate``, ``labkit cost``, the console's form and the local
Vertex AI service's request validation (`validate_custom_job`, `validate_training_pipeline`,
REST camelCase or SDK snake_case), and one error type, `SpecError`, whose `Problem` s name the
field (``field`` as the SDK user writes it, ``path`` in REST camelCase), what Vertex accepts,
and the fix. A problem with ``vertex_rejects=False`` is the kit's advice (MWMS, placeholders,
a machine without a checked price): reported by ``spec validate``, not refused by the service.

CLI::

    python -m labkit spec validate FILE.json     # prints every problem and exits 2, or `ok`
    python -m labkit spec build --image-uri URI --workers 1 [--machine-type ...] [--out F]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from labkit import KIT_LABEL_KEY, KIT_LABEL_VALUE
from labkit.cloud.settings import Settings, find_placeholder
from labkit.i18n import N_, gettext

POOL_ROLES = ("chief", "worker", "parameter server", "evaluator")
NO_ACCELERATOR = "ACCELERATOR_TYPE_UNSPECIFIED"

# N1 takes these GPUs; each entry: allowed counts -> most vCPUs the machine may have.
# (Compute Engine GPU limits; Vertex refuses the same combinations.)
N1_GPU_VCPU_LIMITS: dict[str, dict[int, int]] = {
    "NVIDIA_TESLA_T4": {1: 48, 2: 48, 4: 96},
    "NVIDIA_TESLA_P4": {1: 24, 2: 48, 4: 96},
    "NVIDIA_TESLA_P100": {1: 16, 2: 32, 4: 96},
    "NVIDIA_TESLA_V100": {1: 12, 2: 24, 4: 48, 8: 96},
}

# Accelerator-optimized families come with their GPUs attached: machine type -> (type, count).
ATTACHED_GPUS: dict[str, tuple[str, int]] = {
    # A2: A100 40GB (highgpu, megagpu) and A100 80GB (ultragpu)
    "a2-highgpu-1g": ("NVIDIA_TESLA_A100", 1),
    "a2-highgpu-2g": ("NVIDIA_TESLA_A100", 2),
    "a2-highgpu-4g": ("NVIDIA_TESLA_A100", 4),
    "a2-highgpu-8g": ("NVIDIA_TESLA_A100", 8),
    "a2-megagpu-16g": ("NVIDIA_TESLA_A100", 16),
    "a2-ultragpu-1g": ("NVIDIA_A100_80GB", 1),
    "a2-ultragpu-2g": ("NVIDIA_A100_80GB", 2),
    "a2-ultragpu-4g": ("NVIDIA_A100_80GB", 4),
    "a2-ultragpu-8g": ("NVIDIA_A100_80GB", 8),
    # A3: H100 80GB (highgpu, megagpu) and H200 (ultragpu)
    "a3-highgpu-1g": ("NVIDIA_H100_80GB", 1),
    "a3-highgpu-2g": ("NVIDIA_H100_80GB", 2),
    "a3-highgpu-4g": ("NVIDIA_H100_80GB", 4),
    "a3-highgpu-8g": ("NVIDIA_H100_80GB", 8),
    "a3-megagpu-8g": ("NVIDIA_H100_MEGA_80GB", 8),
    "a3-ultragpu-8g": ("NVIDIA_H200_141GB", 8),
    # A4: B200
    "a4-highgpu-8g": ("NVIDIA_B200", 8),
    # G2: L4
    "g2-standard-4": ("NVIDIA_L4", 1),
    "g2-standard-8": ("NVIDIA_L4", 1),
    "g2-standard-12": ("NVIDIA_L4", 1),
    "g2-standard-16": ("NVIDIA_L4", 1),
    "g2-standard-32": ("NVIDIA_L4", 1),
    "g2-standard-24": ("NVIDIA_L4", 2),
    "g2-standard-48": ("NVIDIA_L4", 4),
    "g2-standard-96": ("NVIDIA_L4", 8),
}
ACCELERATOR_FAMILIES = ("a2", "a3", "a4", "g2")
# Families Vertex trains on without any GPU attached.
CPU_ONLY_FAMILIES = ("e2", "n2", "n2d", "c2", "c2d", "m1", "c3", "n4")
KNOWN_ACCELERATORS = frozenset(N1_GPU_VCPU_LIMITS) | {gpu for gpu, _ in ATTACHED_GPUS.values()}

# Public images Google itself publishes under gcr.io; pulling them is fine, pushing is not ours.
GOOGLE_PUBLIC_GCR_PROJECTS = ("deeplearning-platform-release", "cloud-aiplatform", "vertex-ai")
_GCR_HOST = re.compile(r"^(?:[a-z]+\.)?gcr\.io$")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing Vertex would reject, or that would break MWMS: where, what, and the fix.

    ``field`` is the path as the SDK user writes it (``worker_pool_specs[1].machine_spec.
    accelerator_type``); `path` is the same in the REST JSON's camelCase
    (``workerPoolSpecs[1].machineSpec.acceleratorType``), which the console page uses to put
    the message beside its form field. ``vertex_rejects`` is False for the kit's own advice
    (MWMS wants equal GPUs, a placeholder left in, Container Registry, a machine the kit
    cannot price): `spec validate` reports those too, the local service refuses only what
    Vertex itself refuses.
    """

    field: str
    message_id: str  # English, with {name} fields from params (the catalog's message id)
    fix_id: str
    vertex_rejects: bool = True
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def path(self) -> str:
        return ".".join(camel_name(part) for part in self.field.split("."))

    def _words(self, message_id: str, lang: str | None) -> str:
        text = gettext(message_id, lang)
        return text.format(**self.params) if self.params else text

    def message_in(self, lang: str | None = None) -> str:
        """What is wrong, in ``lang`` (None: the active edition)."""
        return self._words(self.message_id, lang)

    def fix_in(self, lang: str | None = None) -> str:
        return self._words(self.fix_id, lang)

    @property
    def message(self) -> str:
        """English, as Google's API errors are: the local service's REST answers use it."""
        return self.message_in("en")

    @property
    def fix(self) -> str:
        return self.fix_in("en")

    def advice(self, lang: str | None = None) -> str:
        """What is wrong and the fix, without the field (a form puts it beside the field;
        the REST error names the field itself), in ``lang``."""
        return gettext("{message} Fix: {fix}", lang).format(
            message=self.message_in(lang), fix=self.fix_in(lang)
        )

    def text(self, lang: str | None = None) -> str:
        """Where, what and the fix, in ``lang`` (None: the active edition)."""
        return gettext("{field}: {advice}", lang).format(field=self.field, advice=self.advice(lang))

    def __str__(self) -> str:
        return self.text()


class SpecError(ValueError):
    """A job spec that cannot be submitted: every `Problem` at once (``.problems``).

    The one error type of the job-spec core: the notebooks' builder, the console's form and
    the local service's REST handler all raise or catch this; the service turns it into
    Vertex's 400 INVALID_ARGUMENT with one field violation per problem.
    """

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__(format_problems(self.problems))


class SpecFileError(ValueError):
    """The spec file cannot be read as a worker pool spec document."""


def camel_name(name: str) -> str:
    """``worker_pool_specs`` -> ``workerPoolSpecs`` (REST JSON field names)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


# --------------------------------------------------------------------------- building


def build_worker_pool_specs(
    image_uri: str,
    *,
    workers: int = 1,
    machine_type: str = "n1-standard-4",
    accelerator_type: str | None = None,
    accelerator_count: int = 0,
    chief_machine_type: str | None = None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The SDK's ``worker_pool_specs``: pool 0 = one chief, pool 1 = ``workers`` workers.

    Chief and workers get the same accelerators because MWMS wants the same number of
    GPUs on every machine. Pass the result through `validate_worker_pool_specs`.
    """
    if not image_uri:
        raise ValueError("image_uri is empty: pass the trainer image, e.g. settings.image_uri.")
    if workers < 0:
        raise ValueError(f"workers is {workers}: use 0 (chief only) or more.")
    if accelerator_count < 0:
        raise ValueError(f"accelerator_count is {accelerator_count}: use 0 or more.")
    if isinstance(args, str):
        raise ValueError("args is one string: pass a list such as ['--epochs', '2'].")

    def machine_spec(machine: str) -> dict[str, Any]:
        spec: dict[str, Any] = {"machine_type": machine}
        if accelerator_type and accelerator_count:
            spec["accelerator_type"] = accelerator_type
            spec["accelerator_count"] = accelerator_count
        elif accelerator_type or accelerator_count:
            raise ValueError(
                "accelerator_type and accelerator_count go together: set both "
                f"(got type={accelerator_type!r}, count={accelerator_count})."
            )
        return spec

    container: dict[str, Any] = {"image_uri": image_uri}
    if args:
        container["args"] = [str(a) for a in args]
    if env:
        container["env"] = [{"name": k, "value": str(v)} for k, v in env.items()]

    pools = [
        {
            "replica_count": 1,
            "machine_spec": machine_spec(chief_machine_type or machine_type),
            "container_spec": dict(container),
        }
    ]
    if workers:
        pools.append(
            {
                "replica_count": workers,
                "machine_spec": machine_spec(machine_type),
                "container_spec": dict(container),
            }
        )
    return pools


@dataclasses.dataclass
class JobRequest:
    """Everything `aiplatform.CustomJob(...)` needs, with the kit's labels on the job."""

    display_name: str
    worker_pool_specs: list[dict[str, Any]]
    labels: dict[str, str]
    staging_bucket: str
    base_output_dir: str | None = None

    def sdk_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `aiplatform.CustomJob(**request.sdk_kwargs())`."""
        kwargs = dataclasses.asdict(self)
        if kwargs["base_output_dir"] is None:
            del kwargs["base_output_dir"]
        return kwargs

    def run_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``job.run(**request.run_kwargs())`` (or ``submit``).

        A multi-replica job sets ``restart_job_on_worker_restart=True`` (REST:
        ``jobSpec.scheduling.restartJobOnWorkerRestart``; in a training pipeline,
        ``CustomContainerTrainingJob.run()`` takes the same keyword and writes
        ``trainingTaskInputs.scheduling``): by default Vertex restarts
        a failed or preempted replica alone, which a MultiWorkerMirroredStrategy cluster cannot
        take back; with the flag every replica restarts and BackupAndRestore resumes
        (`labkit.local.emulator.restarts` cites the rules). The SDK takes it in ``run()``, not in
        ``CustomJob(...)``.
        """
        return restart_kwargs(self.worker_pool_specs)

    def to_document(self) -> dict[str, Any]:
        """The JSON document `python -m labkit spec validate` and `cost` read."""
        return self.sdk_kwargs()

    def validate(self) -> list[Problem]:
        return validate_document(self.to_document(), require_kit_labels=True)


def restart_kwargs(worker_pool_specs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"restart_job_on_worker_restart": True}`` for a job of more than one replica, else {}.

    The same keyword goes to ``CustomJob.run()`` and ``CustomContainerTrainingJob.run()``
    (google-cloud-aiplatform 2.7.0 puts it in ``jobSpec.scheduling`` and in
    ``trainingTaskInputs.scheduling.restart_job_on_worker_restart`` respectively).
    """
    replicas = sum(
        as_int(pool.get("replica_count", pool.get("replicaCount"))) or 0
        for pool in worker_pool_specs
        if pool and not is_empty_pool(pool)
    )
    return {"restart_job_on_worker_restart": True} if replicas > 1 else {}


def build_job(
    settings: Settings,
    *,
    display_name: str = "multiworker-cassava-sdk",
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    base_output_dir: str | None = None,
    **pool_choices: Any,
) -> JobRequest:
    """A `JobRequest` for the kit's image, bucket and labels (from `labkit.cloud.settings.Settings`).

    ``pool_choices`` are `build_worker_pool_specs`'s keywords (workers, machine_type, ...).
    """
    specs = build_worker_pool_specs(settings.image_uri, args=args, env=env, **pool_choices)
    return JobRequest(
        display_name=display_name,
        worker_pool_specs=specs,
        labels=dict(settings.labels),
        staging_bucket=settings.bucket_uri,
        base_output_dir=base_output_dir,
    )


# --------------------------------------------------------------------------- validating


def snake_keys(obj: Any) -> Any:
    """camelCase keys (REST JSON) -> snake_case (the SDK's dicts), recursively."""
    if isinstance(obj, dict):
        return {
            _CAMEL.sub("_", k).lower() if isinstance(k, str) else k: snake_keys(v)
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [snake_keys(v) for v in obj]
    return obj


def as_int(value: Any) -> int | None:
    """Vertex's REST JSON writes int64 fields as strings ("1"); accept both, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)  # a google.protobuf.Struct (trainingTaskInputs) holds only doubles
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def _family(machine_type: str) -> str:
    return machine_type.split("-", 1)[0].lower()


def _vcpus(machine_type: str) -> int | None:
    tail = machine_type.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


def _placeholder_problem(field: str, value: str, what: str) -> Problem | None:
    ph = find_placeholder(value)
    if not ph:
        return None
    # One message per kind of value, so each reads whole in a translation.
    message, fix = {
        "project id": (
            N_("contains the placeholder {placeholder} instead of a real project id."),
            N_(
                "put your real project id in (see `gcloud config list --format "
                "'value(core.project)'`), or build the spec from the kit's settings."
            ),
        ),
        "bucket": (
            N_("contains the placeholder {placeholder} instead of a real bucket."),
            N_("put the name of a bucket you own in (the kit's is settings.bucket_uri)."),
        ),
    }.get(
        what,
        (
            N_("contains the placeholder {placeholder} instead of a real value."),
            N_("replace it with the real value."),
        ),
    )
    return Problem(field, message, fix, False, params=dict(placeholder=repr(ph)))


# gcr.io hosts live on as Artifact Registry "gcr.io repositories" (GA), one per host, named
# after it, in the multi-region of the old Container Registry host. Source: Artifact Registry
# documentation, "gcr.io repositories" (transition/gcr-repositories): Container Registry shut
# down on 2025-03-18 and takes no writes; gcr.io URLs hosted on Artifact Registry are not
# affected; projects that had not used Container Registry before 2024-05-15 get gcr.io
# repositories in Artifact Registry by default.
GCR_REPOSITORY_LOCATIONS = {
    "gcr.io": "us",
    "us.gcr.io": "us",
    "eu.gcr.io": "europe",
    "asia.gcr.io": "asia",
}
_SHELL_VARIABLE = re.compile(r"^\$\{?[A-Za-z_][A-Za-z0-9_]*\}?$")


def _image_project(uri: str) -> tuple[str, str]:
    """``(host, project)`` of an image URI (the project is the first path segment)."""
    host, _, path = uri.partition("/")
    return host, path.split("/", 1)[0]


def gcr_note(uri: str) -> str | None:
    """The note for a ``gcr.io/PROJECT/...`` image the learner pushes (None for other URIs and
    Google's own public gcr.io images, which are pulls)."""
    host, project = _image_project(uri)
    if not _GCR_HOST.match(host) or project in GOOGLE_PUBLIC_GCR_PROJECTS:
        return None
    location = GCR_REPOSITORY_LOCATIONS.get(host) or gettext("the host's multi-region")
    return gettext(
        "{host}/{project}/... works only as an Artifact Registry gcr.io repository (repository "
        "'{host}' in location '{location}'): Container Registry itself takes no pushes since "
        "2025-03-18. New projects have one by default; otherwise create it, or use "
        "REGION-docker.pkg.dev/PROJECT/REPOSITORY/IMAGE:TAG (settings.image_uri). Source: "
        "Artifact Registry documentation, 'gcr.io repositories'."
    ).format(host=host, project=project, location=location)


def image_notes(doc: Any) -> list[str]:
    """Notes on the document's image URIs, each once (today: the gcr.io repository note)."""
    notes: list[str] = []
    try:
        pools = pools_of(doc)
    except SpecFileError:
        return notes
    for pool in pools:
        uri = (snake_keys(pool).get("container_spec") or {}).get("image_uri") if pool else None
        note = gcr_note(str(uri)) if uri else None
        if note and note not in notes:
            notes.append(note)
    return notes


def _check_image_uri(field: str, uri: str) -> list[Problem]:
    """Placeholders and malformed registry paths; gcr.io is accepted (see `gcr_note`)."""
    host, project = _image_project(uri)
    fix = N_(
        "put your real project id in (see `gcloud config list --format "
        "'value(core.project)'`), or build the spec from the kit's settings (settings.image_uri)."
    )
    ph = find_placeholder(uri) or find_placeholder(project)
    if not ph and _SHELL_VARIABLE.match(project):
        ph = project  # the codelab's gcr.io/$PROJECT_ID/...: a shell variable never expanded
    if ph:
        return [
            Problem(
                field,
                N_("contains the placeholder {placeholder} instead of a real project id."),
                fix,
                False,
                params=dict(placeholder=repr(ph)),
            )
        ]
    is_registry = _GCR_HOST.match(host) or host.endswith("-docker.pkg.dev")
    if is_registry and not project:
        return [
            Problem(
                field, N_("{uri} has an empty project."), fix, False, params=dict(uri=repr(uri))
            )
        ]
    if host.endswith("-docker.pkg.dev") and len(uri.split("/")) < 4:
        return [
            Problem(
                field,
                N_("{uri} is not an Artifact Registry image path."),
                N_("use REGION-docker.pkg.dev/PROJECT/REPOSITORY/IMAGE:TAG."),
                False,
                params=dict(uri=repr(uri)),
            )
        ]
    return []


def _check_machine(at: str, machine_spec: Any) -> tuple[list[Problem], int]:
    """Problems of one pool's machine_spec, and its accelerator count (0 when none).

    A shape Vertex takes but the kit's price table lacks is a (kit) problem too, so every
    spec that validates can be priced by `labkit cost`.
    """
    problems, count = _check_machine_shape(at, machine_spec)
    if problems:
        return problems, count
    table = load_price_table()
    machine = str(machine_spec["machine_type"])
    if machine not in table.machine_types:
        problems.append(
            Problem(
                f"{at}.machine_spec.machine_type",
                N_(
                    "Vertex takes {machine}, but the kit has no checked price for it ({region}, "
                    "read {prices_read}), so `labkit cost` cannot estimate this job."
                ),
                N_(
                    "pick a priced machine ({priced_examples}), or add its price to "
                    "labkit/cloud/prices.json from the {source}."
                ),
                False,
                params=dict(
                    machine=machine,
                    region=table.region,
                    prices_read=table.prices_read,
                    priced_examples=_priced_examples(table),
                    source=table.source,
                ),
            )
        )
    accel = machine_spec.get("accelerator_type")
    if count and accel and accel not in table.accelerators:
        problems.append(
            Problem(
                f"{at}.machine_spec.accelerator_type",
                N_(
                    "Vertex takes {accel}, but the kit has no checked price for it ({region}, "
                    "read {prices_read})."
                ),
                N_(
                    "add its price to labkit/cloud/prices.json from the {source}, or pick one of {names}."
                ),
                False,
                params=dict(
                    accel=accel,
                    region=table.region,
                    prices_read=table.prices_read,
                    source=table.source,
                    names=", ".join(sorted(table.accelerators)),
                ),
            )
        )
    return problems, count


def _priced_examples(table: PriceTable) -> str:
    return ", ".join(sorted(table.machine_types)[:6]) + ", ..."


def _check_machine_shape(at: str, machine_spec: Any) -> tuple[list[Problem], int]:
    """The machine_spec against Vertex's rules: families, GPU types, counts, vCPU limits."""
    if not isinstance(machine_spec, dict) or not machine_spec.get("machine_type"):
        return [
            Problem(
                f"{at}.machine_spec.machine_type",
                N_("is missing; Vertex needs a machine type for every non-empty pool."),
                N_('set it, e.g. "machine_spec": {"machine_type": "n1-standard-4"}.'),
            )
        ], 0
    problems: list[Problem] = []
    machine = str(machine_spec["machine_type"])
    family = _family(machine)
    if family not in ("n1", *CPU_ONLY_FAMILIES, *ACCELERATOR_FAMILIES):
        return [
            Problem(
                f"{at}.machine_spec.machine_type",
                N_(
                    "{machine} is not a machine type of a family Vertex AI trains on (known: {names})."
                ),
                N_('use a Compute Engine machine type such as "n1-standard-4" (the codelab\'s).'),
                params=dict(
                    machine=repr(machine),
                    names=", ".join(sorted(("n1", *CPU_ONLY_FAMILIES, *ACCELERATOR_FAMILIES))),
                ),
            )
        ], 0
    accel = machine_spec.get("accelerator_type") or None
    if accel == NO_ACCELERATOR:
        accel = None
    raw_count = machine_spec.get("accelerator_count", 0)
    count = as_int(raw_count)
    f_type = f"{at}.machine_spec.accelerator_type"
    f_count = f"{at}.machine_spec.accelerator_count"
    if count is None or count < 0:
        problems.append(
            Problem(
                f_count,
                N_("is {raw_count}, not a count."),
                N_("use 0 or a positive integer."),
                params=dict(raw_count=repr(raw_count)),
            )
        )
        return problems, 0
    if count and not accel:
        problems.append(
            Problem(
                f_count,
                N_("is {count} but no accelerator_type is set."),
                N_('name the GPU, e.g. "accelerator_type": "NVIDIA_TESLA_T4", or drop the count.'),
                params=dict(count=count),
            )
        )
        return problems, count
    if accel and not count:
        problems.append(
            Problem(
                f_count,
                N_("is missing or 0 while accelerator_type is {accel}."),
                N_(
                    'set "accelerator_count" (e.g. 1), or remove accelerator_type for a CPU machine.'
                ),
                params=dict(accel=accel),
            )
        )
        return problems, 0
    if accel and accel not in KNOWN_ACCELERATORS:
        problems.append(
            Problem(
                f_type,
                N_("{accel} is not a Vertex AI GPU type this kit knows."),
                N_("use one of {names}."),
                params=dict(accel=repr(accel), names=", ".join(sorted(KNOWN_ACCELERATORS))),
            )
        )
        return problems, count

    if family == "n1":
        if accel is None:
            return problems, 0
        limits = N1_GPU_VCPU_LIMITS.get(accel)
        if limits is None:
            problems.append(
                Problem(
                    f_type,
                    N_(
                        "{accel} cannot be attached to an N1 machine ({machine}); N1 takes {names}."
                    ),
                    N_("use {machine_for} for {accel}, or pick an N1 GPU."),
                    params=dict(
                        accel=accel,
                        machine=machine,
                        names=", ".join(sorted(N1_GPU_VCPU_LIMITS)),
                        machine_for=_machine_for(accel),
                    ),
                )
            )
        elif count not in limits:
            problems.append(
                Problem(
                    f_count,
                    N_("{count} x {accel} is not a valid N1 configuration."),
                    N_("use one of {values}."),
                    params=dict(count=count, accel=accel, values=sorted(limits)),
                )
            )
        else:
            vcpus = _vcpus(machine)
            if vcpus is not None and vcpus > limits[count]:
                problems.append(
                    Problem(
                        f"{at}.machine_spec.machine_type",
                        N_(
                            "{machine} has {vcpus} vCPUs; {count} x {accel} allows at most {limits}."
                        ),
                        N_("pick a smaller N1 machine or more GPUs."),
                        params=dict(
                            machine=machine,
                            vcpus=vcpus,
                            count=count,
                            accel=accel,
                            limits=limits[count],
                        ),
                    )
                )
    elif family in ACCELERATOR_FAMILIES:
        attached = ATTACHED_GPUS.get(machine)
        if attached is None:
            shapes = sorted(m for m in ATTACHED_GPUS if m.startswith(family + "-"))
            problems.append(
                Problem(
                    f"{at}.machine_spec.machine_type",
                    N_("{machine} is not a known {family} shape."),
                    N_("use one of {names}."),
                    params=dict(
                        machine=repr(machine), family=family.upper(), names=", ".join(shapes)
                    ),
                )
            )
        elif accel is None:
            problems.append(
                Problem(
                    f_type,
                    N_(
                        "is missing; {machine} comes with {gpus} x {gpu} and Vertex wants "
                        "them declared."
                    ),
                    N_('set "accelerator_type": "{gpu}", "accelerator_count": {gpus}.'),
                    params=dict(machine=machine, gpus=attached[1], gpu=attached[0]),
                )
            )
        elif accel != attached[0]:
            problems.append(
                Problem(
                    f_type,
                    N_("{accel} cannot run on {machine}, which carries {gpu}."),
                    N_("use {gpu}, or {machine_for} for {accel}."),
                    params=dict(
                        accel=accel,
                        machine=machine,
                        gpu=attached[0],
                        machine_for=_machine_for(accel),
                    ),
                )
            )
        elif count != attached[1]:
            problems.append(
                Problem(
                    f_count,
                    N_("{machine} carries exactly {gpus} x {gpu}, not {count}."),
                    N_(
                        "set accelerator_count to {gpus} or pick the {family} shape with {count} GPUs."
                    ),
                    params=dict(
                        machine=machine,
                        gpus=attached[1],
                        gpu=attached[0],
                        count=count,
                        family=family.upper(),
                    ),
                )
            )
    elif accel is not None:
        problems.append(
            Problem(
                f_type,
                N_("machine family {family} ({machine}) takes no GPUs.")
                if family in CPU_ONLY_FAMILIES
                else N_("machine family {family} ({machine}) is not known to take GPUs."),
                N_("use {machine_for} for {accel}, or remove the accelerator."),
                params=dict(
                    family=family.upper(),
                    machine=machine,
                    machine_for=_machine_for(accel),
                    accel=accel,
                ),
            )
        )
    return problems, count or 0


def _machine_for(accel: str) -> str:
    """Where a GPU type can go, for fix messages."""
    if accel in N1_GPU_VCPU_LIMITS:
        return "an N1 machine (e.g. n1-standard-8)"
    shapes = [m for m, (gpu, _) in ATTACHED_GPUS.items() if gpu == accel]
    return " / ".join(shapes[:4]) if shapes else "a machine that takes it"


def _check_code_spec(at: str, pool: dict[str, Any]) -> list[Problem]:
    container = pool.get("container_spec")
    package = pool.get("python_package_spec")
    if container and package:
        return [
            Problem(
                at,
                N_("has both container_spec and python_package_spec."),
                N_("keep one: container_spec for the kit's image."),
            )
        ]
    if not container and not package:
        return [
            Problem(
                f"{at}.container_spec",
                N_(
                    "is missing (and there is no python_package_spec): the pool has nothing to run."
                ),
                N_(
                    'add "container_spec": {"image_uri": "REGION-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG"}.'
                ),
            )
        ]
    problems: list[Problem] = []
    for key, spec in (("container_spec", container), ("python_package_spec", package)):
        if spec and not isinstance(spec, dict):
            return [
                Problem(
                    f"{at}.{key}",
                    N_("is a {name}, not one object."),
                    N_('use one object: "{key}": {{...}}, not a list of them.'),
                    params=dict(name=type(spec).__name__, key=key),
                )
            ]
    if container:
        f = f"{at}.container_spec"
        if not container.get("image_uri"):
            return [Problem(f"{f}.image_uri", N_("is missing."), N_("set the trainer image URI."))]
        problems += _check_image_uri(f"{f}.image_uri", str(container["image_uri"]))
        problems += _check_args_env(f, container)
    else:
        f = f"{at}.python_package_spec"
        for key in ("executor_image_uri", "python_module"):
            if not package.get(key):
                problems.append(
                    Problem(f"{f}.{key}", N_("is missing."), N_("set {key}."), params=dict(key=key))
                )
        uris = package.get("package_uris") or []
        if not uris:
            problems.append(
                Problem(
                    f"{f}.package_uris", N_("is missing."), N_("list the gs:// URI of the sdist.")
                )
            )
        for i, uri in enumerate(uris):
            p = _placeholder_problem(f"{f}.package_uris[{i}]", str(uri), "bucket")
            if p:
                problems.append(p)
        problems += _check_args_env(f, package)
    return problems


def _check_args_env(at: str, spec: dict[str, Any]) -> list[Problem]:
    problems: list[Problem] = []
    args = spec.get("args") or []
    if isinstance(args, str):
        return [Problem(f"{at}.args", N_("is one string."), N_('use a list: ["--epochs", "2"].'))]
    for i, arg in enumerate(args):
        what = "bucket" if "gs://" in str(arg) else "value"
        p = _placeholder_problem(f"{at}.args[{i}]", str(arg), what)
        if p:
            problems.append(p)
    for i, item in enumerate(spec.get("env") or []):
        if not isinstance(item, dict) or "name" not in item:
            problems.append(
                Problem(
                    f"{at}.env[{i}]",
                    N_("is {item}."),
                    N_('use {{"name": "VAR", "value": "..."}}.'),
                    params=dict(item=repr(item)),
                )
            )
            continue
        value = str(item.get("value", ""))
        what = "bucket" if "gs://" in value else "value"
        p = _placeholder_problem(f"{at}.env[{i}].value", value, what)
        if p:
            problems.append(p)
    return problems


def validate_worker_pool_specs(specs: Any, field: str = "worker_pool_specs") -> list[Problem]:
    """Every problem in a ``worker_pool_specs`` list (snake_case or camelCase keys).

    ``field`` is where the list sits (``job_spec.worker_pool_specs`` in a CustomJob,
    ``training_task_inputs.worker_pool_specs`` in a TrainingPipeline).
    """
    if not isinstance(specs, list):
        return [
            Problem(
                field,
                N_("is a {name}, not a list of pools."),
                N_("wrap the pools in a list."),
                params=dict(name=type(specs).__name__),
            )
        ]
    if not specs or all(p == {} for p in specs):
        return [
            Problem(
                field,
                N_("has no pools."),
                N_("add pool 0 (the chief, replica_count 1) and, for MWMS, pool 1 (the workers)."),
            )
        ]
    problems: list[Problem] = []
    if len(specs) > 4:
        problems.append(
            Problem(
                field,
                N_(
                    "has {count} pools; Vertex takes at most 4 (chief, workers, parameter "
                    "servers, evaluators)."
                ),
                N_("merge the extra pools."),
                params=dict(count=len(specs)),
            )
        )
    accelerators: dict[int, int] = {}
    for i, raw in enumerate(specs):
        at = f"{field}[{i}]"
        if not isinstance(raw, dict):
            problems.append(
                Problem(
                    at,
                    N_("is {raw}, not a pool."),
                    N_("use a dict or {{}} as a placeholder."),
                    params=dict(raw=repr(raw)),
                )
            )
            continue
        pool = snake_keys(raw)
        if not pool:
            if i == 0:
                problems.append(
                    Problem(
                        at,
                        N_("is empty, but pool 0 is the chief."),
                        N_("describe the chief in pool 0."),
                    )
                )
            continue
        replicas = as_int(pool.get("replica_count"))
        if i == 0 and replicas != 1:
            problems.append(
                Problem(
                    f"{at}.replica_count",
                    N_("is {value}; pool 0 is the chief and must have exactly 1 replica."),
                    N_("set replica_count to 1 and put more machines in pool 1 (the workers)."),
                    params=dict(value=repr(pool.get("replica_count"))),
                )
            )
        elif i > 0 and (replicas is None or replicas < 1):
            problems.append(
                Problem(
                    f"{at}.replica_count",
                    N_("is {value}; a non-empty pool needs at least 1 replica."),
                    N_("set replica_count, or make the pool {{}} if it is a placeholder."),
                    params=dict(value=repr(pool.get("replica_count"))),
                )
            )
        machine_problems, count = _check_machine(at, pool.get("machine_spec"))
        problems += machine_problems
        accelerators[i] = count
        problems += _check_code_spec(at, pool)
    if 0 in accelerators and 1 in accelerators and accelerators[0] != accelerators[1]:
        problems.append(
            Problem(
                f"{field}[1].machine_spec.accelerator_count",
                N_(
                    "the workers have {worker_gpus} GPU(s) each but the chief has "
                    "{chief_gpus}; MultiWorkerMirroredStrategy wants the same number of GPUs "
                    "on every machine."
                ),
                N_("give pool 0 and pool 1 the same accelerator_count."),
                False,
                params=dict(worker_gpus=accelerators[1], chief_gpus=accelerators[0]),
            )
        )
    return problems


_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")


def validate_document(doc: Any, *, require_kit_labels: bool = False) -> list[Problem]:
    """Problems of a spec document: a bare pool list, or a dict with ``worker_pool_specs``
    plus optional ``staging_bucket``, ``base_output_dir``, ``project``, ``display_name``
    and ``labels``."""
    if isinstance(doc, list):
        return validate_worker_pool_specs(doc)
    if not isinstance(doc, dict) or "worker_pool_specs" not in snake_keys(doc):
        return [
            Problem(
                "worker_pool_specs",
                N_("is missing from the document."),
                N_('give a JSON list of pools, or {"worker_pool_specs": [...]}.'),
            )
        ]
    labels = doc.get("labels")
    top = snake_keys({k: v for k, v in doc.items() if k != "labels"})
    problems = validate_worker_pool_specs(top["worker_pool_specs"])
    for key in ("staging_bucket", "base_output_dir"):
        if top.get(key):
            p = _placeholder_problem(key, str(top[key]), "bucket")
            if p:
                problems.append(p)
    if top.get("project"):
        p = _placeholder_problem("project", str(top["project"]), "project id")
        if p:
            problems.append(p)
    if "display_name" in top and not top["display_name"]:
        problems.append(Problem("display_name", N_("is empty."), N_("name the job.")))
    problems += _check_labels(labels, require_kit_labels)
    return problems


def _check_labels(labels: Any, require_kit_labels: bool) -> list[Problem]:
    if labels is None:
        labels = {}
    if not isinstance(labels, dict):
        return [
            Problem(
                "labels",
                N_("is {labels}."),
                N_('use {{"key": "value"}}.'),
                params=dict(labels=repr(labels)),
            )
        ]
    problems: list[Problem] = []
    for key, value in labels.items():
        if not _LABEL_KEY.match(str(key)) or not _LABEL_VALUE.match(str(value)):
            problems.append(
                Problem(
                    f"labels.{key}",
                    N_("{key}={value} is not a valid Google Cloud label."),
                    N_(
                        "use lowercase letters, digits, '_' and '-', at most 63 characters, keys "
                        "starting with a letter."
                    ),
                    params=dict(key=key, value=repr(value)),
                )
            )
    if require_kit_labels and labels.get(KIT_LABEL_KEY) != KIT_LABEL_VALUE:
        problems.append(
            Problem(
                f"labels.{KIT_LABEL_KEY}",
                N_("is missing: without {key}={value} the cleanup cannot find this job."),
                N_("use settings.labels (build_job does)."),
                False,
                params=dict(key=KIT_LABEL_KEY, value=KIT_LABEL_VALUE),
            )
        )
    return problems


# --------------------------------------------------------------------------- prices


PRICE_FILE = Path(__file__).with_name("prices.json")


@dataclasses.dataclass(frozen=True)
class PriceTable:
    """Hourly on-demand prices for one region, with where and when they were read."""

    region: str
    currency: str
    source: str
    prices_read: str
    how_read: str
    excludes: str
    machine_types: dict[str, float]
    accelerators: dict[str, float]
    # Provenance shown next to every figure (issue 19): the training table's, and the rest.
    training_read: str = "not read from the pricing page"
    spot: str = ""
    workbench: dict[str, Any] = dataclasses.field(default_factory=dict)
    artifact_registry: dict[str, Any] = dataclasses.field(default_factory=dict)
    codelab: dict[str, Any] = dataclasses.field(default_factory=dict)

    def machine_price(self, machine_type: str) -> float:
        try:
            return self.machine_types[machine_type]
        except KeyError:
            raise KeyError(
                f"no price for machine type {machine_type!r} in the price table ({self.region}, "
                f"read {self.prices_read}). Fix: add it to labkit/cloud/prices.json from the "
                f"{self.source}, or pick one of {', '.join(sorted(self.machine_types))}."
            ) from None

    def accelerator_price(self, accelerator_type: str) -> float:
        try:
            return self.accelerators[accelerator_type]
        except KeyError:
            raise KeyError(
                f"no price for accelerator {accelerator_type!r} in the price table "
                f"({self.region}, read {self.prices_read}). Fix: add it to labkit/cloud/prices.json "
                f"from the {self.source}."
            ) from None


_TABLES: dict[str, PriceTable] = {}


def load_price_table(path: str | Path | None = None) -> PriceTable:
    """The price table (``labkit/cloud/prices.json`` unless ``path``), read once per file."""
    key = str(Path(path or PRICE_FILE).resolve())
    if key not in _TABLES:
        data = json.loads(Path(key).read_text())
        fields = {f.name for f in dataclasses.fields(PriceTable)}
        _TABLES[key] = PriceTable(**{k: v for k, v in data.items() if k in fields})
    return _TABLES[key]


def machine_catalog(table: PriceTable | None = None) -> list[tuple[str, str | None, int]]:
    """Every machine shape the validator knows: ``(machine_type, accelerator, count)``.

    The priced CPU machines, every N1 machine with each GPU count its vCPUs allow, and every
    accelerator-optimized shape with its attached GPUs. tests/test_specs.py walks it through
    validate + cost: each shape is either accepted and priced or refused with a message.
    """
    table = table or load_price_table()
    shapes: list[tuple[str, str | None, int]] = [(m, None, 0) for m in sorted(table.machine_types)]
    for machine in sorted(table.machine_types):
        if _family(machine) != "n1":
            continue
        for accel, limits in sorted(N1_GPU_VCPU_LIMITS.items()):
            for count, most_vcpus in sorted(limits.items()):
                if (_vcpus(machine) or 0) <= most_vcpus:
                    shapes.append((machine, accel, count))
    shapes += [(m, gpu, n) for m, (gpu, n) in ATTACHED_GPUS.items()]
    return shapes


# --------------------------------------------------------------------------- REST resources

# The training task definition of a custom-training TrainingPipeline (the console's
# "custom training (advanced)" and the SDK's Custom*TrainingJob): the SDK's
# `schema.training_job.definition.custom_task`.
CUSTOM_TASK_SCHEMA = (
    "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"
)
_DURATION = re.compile(r"^\d+(\.\d{1,9})?s$")
# Maps whose keys are user data, not field names: never renamed.
_OPAQUE_MAPS = frozenset({"labels"})


def camel_keys(value: Any) -> Any:
    """Field names in the REST JSON's camelCase, recursively (label keys untouched)."""
    if isinstance(value, list):
        return [camel_keys(v) for v in value]
    if isinstance(value, dict):
        return {
            camel_name(k): (v if camel_name(k) in _OPAQUE_MAPS else camel_keys(v))
            for k, v in value.items()
        }
    return value


def parse_duration(text: Any) -> float:
    """Protobuf JSON duration (``"3600s"``, ``"1.5s"``) in seconds."""
    if not isinstance(text, str) or not _DURATION.match(text):
        raise ValueError(f"{text!r} is not a duration like '3600s'")
    return float(text[:-1])


def is_empty_pool(pool: Any) -> bool:
    """``{}`` keeps a pool's position (e.g. no workers, but evaluators), as on Vertex."""
    return isinstance(pool, dict) and not pool


def _check_job_spec(spec: Any, at: str) -> list[Problem]:
    """A CustomJobSpec (camelCase), found at ``at`` (``job_spec`` or ``training_task_inputs``)."""
    if not isinstance(spec, dict) or not spec:
        return [
            Problem(
                f"{at}.worker_pool_specs",
                N_("Required field is not set: at least one worker pool is needed."),
                N_("add pool 0, the chief, with replica_count 1."),
            )
        ]
    problems = validate_worker_pool_specs(spec.get("workerPoolSpecs"), f"{at}.worker_pool_specs")
    scheduling = spec.get("scheduling") or {}
    timeout = scheduling.get("timeout") if isinstance(scheduling, dict) else None
    if timeout is not None:
        try:
            ok = parse_duration(timeout) > 0
        except ValueError:
            ok = False
        if not ok:
            problems.append(
                Problem(
                    f"{at}.scheduling.timeout",
                    N_("is {timeout}; Vertex takes a positive duration like '3600s'."),
                    N_("give the timeout in seconds with an s, e.g. '7200s'."),
                    params=dict(timeout=repr(timeout)),
                )
            )
    base = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if base is not None and not str(base).startswith("gs://"):
        problems.append(
            Problem(
                f"{at}.base_output_directory.output_uri_prefix",
                N_("is {base}; Vertex takes a Cloud Storage URI starting with gs://."),
                N_("use gs://BUCKET/PATH (the kit's bucket is settings.bucket_uri)."),
                params=dict(base=repr(base)),
            )
        )
    return problems


def _check_resource(body: dict[str, Any], kind: str) -> list[Problem]:
    problems: list[Problem] = []
    if not str(body.get("displayName") or "").strip():
        problems.append(
            Problem(
                "display_name",
                N_("Required field is not set."),
                N_("give the job a display_name (the name the console lists).")
                if kind == "job"
                else N_("give the training pipeline a display_name (the name the console lists)."),
            )
        )
    return problems + _check_labels(body.get("labels"), False)


def validate_custom_job(body: dict[str, Any]) -> list[Problem]:
    """Every problem of a CustomJob REST body (camelCase, as the SDK POSTs it)."""
    return _check_resource(body, "job") + _check_job_spec(body.get("jobSpec"), "job_spec")


def validate_training_pipeline(body: dict[str, Any]) -> list[Problem]:
    """Every problem of a custom-task TrainingPipeline REST body (camelCase).

    ``trainingTaskInputs`` is a protobuf Struct, so it keeps the keys the client wrote: the
    SDK writes snake_case (``worker_pool_specs``), a REST client camelCase; both are read.
    """
    problems = _check_resource(body, "training pipeline")
    if body.get("trainingTaskDefinition") != CUSTOM_TASK_SCHEMA:
        problems.append(
            Problem(
                "training_task_definition",
                N_("is {value}; custom training uses the custom task schema."),
                N_("set it to {schema}."),
                params=dict(
                    value=repr(body.get("trainingTaskDefinition")),
                    schema=CUSTOM_TASK_SCHEMA,
                ),
            )
        )
    return problems + _check_job_spec(
        camel_keys(body.get("trainingTaskInputs") or {}), "training_task_inputs"
    )


def raise_for_problems(problems: Sequence[Problem], *, vertex_only: bool = False) -> None:
    """`SpecError` with the problems (only Vertex's own refusals with ``vertex_only``)."""
    wanted = [p for p in problems if p.vertex_rejects or not vertex_only]
    if wanted:
        raise SpecError(wanted)


def load_document(path: str | Path) -> Any:
    """Read a spec JSON file, with an error that says what is wrong with the file."""
    path = Path(path)
    if not path.is_file():
        raise SpecFileError(f"{path}: no such file. Pass the JSON file holding worker_pool_specs.")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise SpecFileError(
            f"{path}: not valid JSON ({err}). Note that JSON wants double quotes and no "
            "trailing commas, unlike the Python dicts in the codelab."
        ) from err


def pools_of(doc: Any) -> list[Any]:
    """The pool list of a document (a bare list or a dict holding ``worker_pool_specs``)."""
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        snake = snake_keys({k: v for k, v in doc.items() if k != "labels"})
        if isinstance(snake.get("worker_pool_specs"), list):
            return snake["worker_pool_specs"]
    raise SpecFileError('expected a list of pools or {"worker_pool_specs": [...]}.')


def format_problems(problems: Sequence[Problem], notes: Sequence[str] = ()) -> str:
    """``ok`` or every problem, one a line; then each note (e.g. `image_notes`) once; in the
    active edition."""
    lines = (
        [gettext("{count} problem(s):").format(count=len(problems))]
        if problems
        else [gettext("ok")]
    )
    lines += [f"  {p}" for p in problems]
    lines += [gettext("note: {note}").format(note=note) for note in notes]
    return "\n".join(lines)


# --------------------------------------------------------------------------- CLI


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labkit spec", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate", help="check a worker pool spec JSON file")
    v.add_argument("file", help="JSON: a list of pools, or {'worker_pool_specs': [...], ...}")
    v.add_argument(
        "--require-labels",
        action="store_true",
        help=f"also require {KIT_LABEL_KEY}={KIT_LABEL_VALUE}",
    )
    b = sub.add_parser("build", help="print worker pool specs built from high-level choices")
    b.add_argument("--image-uri", required=True)
    b.add_argument("--workers", type=int, default=1)
    b.add_argument("--machine-type", default="n1-standard-4")
    b.add_argument("--chief-machine-type")
    b.add_argument("--accelerator-type")
    b.add_argument("--accelerator-count", type=int, default=0)
    b.add_argument("--out", help="write the JSON here instead of stdout")
    b.add_argument("args", nargs="*", help="container args after --")
    ns = parser.parse_args(argv)

    if ns.command == "validate":
        try:
            doc = load_document(ns.file)
        except SpecFileError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        problems = validate_document(doc, require_kit_labels=ns.require_labels)
        print(format_problems(problems, image_notes(doc)))
        return 2 if problems else 0

    try:
        specs = build_worker_pool_specs(
            ns.image_uri,
            workers=ns.workers,
            machine_type=ns.machine_type,
            chief_machine_type=ns.chief_machine_type,
            accelerator_type=ns.accelerator_type,
            accelerator_count=ns.accelerator_count,
            args=ns.args,
        )
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    text = json.dumps({"worker_pool_specs": specs}, indent=2)
    if ns.out:
        Path(ns.out).write_text(text + "\n")
        print(f"wrote {ns.out}")
    else:
        print(text)
    problems = validate_worker_pool_specs(specs)
    if problems:
        print(format_problems(problems), file=sys.stderr)
        return 2
    return 0
