"""The console's Create form: its fields, the training pipeline it becomes, and where each
problem of the job-spec core goes back on the form.

The form mirrors the real console's "Train new model" steps (Google Cloud docs, "Create custom
training jobs", Console tab: training method, model details, training container, hyperparameter
tuning, compute and pricing, prediction container), and *Start training* sends the same
``TrainingPipeline`` JSON that the console and the SDK's ``CustomContainerTrainingJob`` send:
the custom-task schema as ``trainingTaskDefinition``, the worker pools and the model output
directory (``baseOutputDirectory``) in ``trainingTaskInputs``. Validation is the job-spec
core's (`labkit.cloud.specs.validate_training_pipeline`); this module only maps each problem's REST
path (``trainingTaskInputs.workerPoolSpecs[1].machineSpec.acceleratorType``) to its field.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import time
from collections.abc import Mapping, Sequence
from typing import Any

from labkit.cloud import specs
from labkit.i18n import N_

POOLS = 4
DISK_TYPES = ("pd-ssd", "pd-standard")
DEFAULT_DISK_GB = 100
DEFAULT_HOURS = 0.55  # the codelab's job takes about 30-35 minutes
# Field names of one pool on the form (``pool1.machine_type``), in the console's order.
POOL_FIELDS = (
    "machine_type",
    "accelerator_type",
    "accelerator_count",
    "replica_count",
    "disk_type",
    "disk_size",
)


@dataclasses.dataclass
class PoolForm:
    """One worker pool as entered; an empty ``machine_type`` means the pool is not used."""

    machine_type: str = ""
    accelerator_type: str = ""
    accelerator_count: str = "0"
    replica_count: str = "1"
    disk_type: str = "pd-ssd"
    disk_size: str = str(DEFAULT_DISK_GB)

    @property
    def used(self) -> bool:
        return bool(self.machine_type.strip())


@dataclasses.dataclass
class CreateForm:
    """Everything the Create flow asks, as text (what the browser posts)."""

    model_name: str = "multiworker-cassava"
    image_uri: str = ""
    output_dir: str = ""
    args: str = ""
    labels: str = ""
    region: str = "us-central1"
    hours: str = str(DEFAULT_HOURS)
    pools: list[PoolForm] = dataclasses.field(
        default_factory=lambda: [PoolForm() for _ in range(POOLS)]
    )

    # ---- from and to the browser ----
    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> CreateForm:
        """The form as posted (``pool0.machine_type`` etc.); missing fields keep defaults."""
        form = cls()
        for name in ("model_name", "image_uri", "output_dir", "args", "labels", "region", "hours"):
            if name in fields:
                setattr(form, name, str(fields[name]).strip())
        for i, pool in enumerate(form.pools):
            for name in POOL_FIELDS:
                key = f"pool{i}.{name}"
                if key in fields:
                    setattr(pool, name, str(fields[key]).strip())
        return form

    def to_fields(self) -> dict[str, str]:
        """The inverse of `from_fields`: what a client posts to the form handler."""
        fields = {
            name: getattr(self, name)
            for name in (
                "model_name",
                "image_uri",
                "output_dir",
                "args",
                "labels",
                "region",
                "hours",
            )
        }
        for i, pool in enumerate(self.pools):
            for name in POOL_FIELDS:
                fields[f"pool{i}.{name}"] = getattr(pool, name)
        return fields

    # ---- what Vertex receives ----
    def arg_list(self) -> list[str]:
        """The container's arguments: one per line, or shell-quoted on one line."""
        lines = [line.strip() for line in self.args.splitlines() if line.strip()]
        if len(lines) == 1:
            return shlex.split(lines[0])
        return lines

    def label_dict(self) -> dict[str, str]:
        """``key=value`` pairs separated by commas or new lines."""
        labels: dict[str, str] = {}
        for part in re.split(r"[,\n]", self.labels):
            if part.strip():
                key, _, value = part.partition("=")
                labels[key.strip()] = value.strip()
        return labels

    def worker_pool_specs(self) -> list[dict[str, Any]]:
        """The pools in REST camelCase; an unused pool before a used one stays ``{}``."""
        last_used = max((i for i, p in enumerate(self.pools) if p.used), default=-1)
        pools: list[dict[str, Any]] = []
        for pool in self.pools[: last_used + 1]:
            if not pool.used:
                pools.append({})
                continue
            machine: dict[str, Any] = {"machineType": pool.machine_type}
            if pool.accelerator_type:
                machine["acceleratorType"] = pool.accelerator_type
                machine["acceleratorCount"] = _number(pool.accelerator_count)
            spec: dict[str, Any] = {
                "machineSpec": machine,
                "replicaCount": _number(pool.replica_count),
                "diskSpec": {
                    "bootDiskType": pool.disk_type,
                    "bootDiskSizeGb": _number(pool.disk_size),
                },
                "containerSpec": {"imageUri": self.image_uri},
            }
            if self.arg_list():
                spec["containerSpec"]["args"] = self.arg_list()
            pools.append(spec)
        return pools

    def pipeline_body(self) -> dict[str, Any]:
        """The ``TrainingPipeline`` that *Start training* creates (no model upload: the
        console's "No prediction container")."""
        inputs: dict[str, Any] = {"workerPoolSpecs": self.worker_pool_specs()}
        if self.output_dir:
            inputs["baseOutputDirectory"] = {"outputUriPrefix": self.output_dir}
        return {
            "displayName": self.model_name,
            "trainingTaskDefinition": specs.CUSTOM_TASK_SCHEMA,
            "trainingTaskInputs": inputs,
            "labels": self.label_dict(),
        }

    def problems(self) -> list[specs.Problem]:
        """The job-spec core's problems with this pipeline, plus the kit's one rule of the
        console route: without a model output directory the model is lost (Vertex sets
        AIP_MODEL_DIR only from it, and the kit's trainer refuses to start without it)."""
        found = list(specs.validate_training_pipeline(self.pipeline_body()))
        if not self.output_dir:
            found.append(
                specs.Problem(
                    "training_task_inputs.base_output_directory.output_uri_prefix",
                    N_(
                        "is empty: Vertex then sets no AIP_MODEL_DIR, and the model would be "
                        "saved inside the container and lost when the job ends."
                    ),
                    N_("enter a Cloud Storage folder, e.g. gs://YOUR_BUCKET/multiworker-cassava."),
                    False,
                )
            )
        return found


def _number(text: str) -> Any:
    """An integer when the text is one, else the text itself (the core then names it)."""
    try:
        return int(str(text).strip())
    except ValueError:
        return str(text).strip()


# --------------------------------------------------------------------------- defaults


def default_form(
    *,
    image_uri: str,
    bucket_uri: str,
    region: str,
    labels: Mapping[str, str],
    args: Sequence[str] = (),
    machine_type: str = "n1-standard-4",
    now: float | None = None,
) -> CreateForm:
    """The codelab's job as the form starts: pool 0 = the chief, pool 1 = one worker, both
    ``machine_type`` without GPUs; the model output directory pre-filled in the lab's
    bucket (unique per visit, so two jobs never share it); the kit's labels."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    form = CreateForm(
        model_name="multiworker-cassava",
        image_uri=image_uri,
        output_dir=f"{bucket_uri.rstrip('/')}/console/multiworker-cassava-{stamp}",
        args="\n".join(args),
        labels=", ".join(f"{k}={v}" for k, v in labels.items()),
        region=region,
    )
    form.pools[0].machine_type = machine_type
    form.pools[1].machine_type = machine_type
    return form


# --------------------------------------------------------------------------- errors on fields

_POOL_PATH = re.compile(r"^workerPoolSpecs\[(\d+)\](?:\.(.*))?$")
_POOL_LEAVES = {
    "replicaCount": "replica_count",
    "machineSpec.machineType": "machine_type",
    "machineSpec.acceleratorType": "accelerator_type",
    "machineSpec.acceleratorCount": "accelerator_count",
    "diskSpec.bootDiskType": "disk_type",
    "diskSpec.bootDiskSizeGb": "disk_size",
}


def field_for(path: str) -> str:
    """The form field that a problem's REST path belongs to ("" = the form as a whole)."""
    for prefix in ("trainingTaskInputs.", "jobSpec."):
        if path.startswith(prefix):
            path = path[len(prefix) :]
    if path.startswith("baseOutputDirectory"):
        return "output_dir"
    if path.startswith("displayName"):
        return "model_name"
    if path.startswith("labels"):
        return "labels"
    if path == "workerPoolSpecs":
        return "pool0.machine_type"
    m = _POOL_PATH.match(path)
    if not m:
        return ""
    pool, rest = m.group(1), m.group(2) or ""
    if rest.startswith("containerSpec.args") or rest.startswith("containerSpec.env"):
        return "args"
    if rest.startswith("containerSpec") or rest.startswith("pythonPackageSpec"):
        return "image_uri"
    for leaf, name in _POOL_LEAVES.items():
        if rest.startswith(leaf):
            return f"pool{pool}.{name}"
    return f"pool{pool}.machine_type"


def errors_by_field(
    problems: Sequence[specs.Problem], lang: str | None = None
) -> dict[str, list[str]]:
    """``{"pool1.accelerator_count": ["... Fix: ..."], "": [unplaced]}`` in the page's
    language; the image's problem is repeated for every pool, so each message appears once
    per field."""
    errors: dict[str, list[str]] = {}
    for problem in problems:
        text = problem.advice(lang)
        bucket = errors.setdefault(field_for(problem.path), [])
        if text not in bucket:
            bucket.append(text)
    return errors
