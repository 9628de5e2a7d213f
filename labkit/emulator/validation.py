"""Checks a CustomJob as Vertex AI does at create time, naming the field in each message.

Vertex answers a bad job with 400 INVALID_ARGUMENT before anything is provisioned; so does
the local service, with the same field paths (``job_spec.worker_pool_specs[0].replica_count``)
so the message points at the key the learner typed in ``worker_pool_specs``.
The request body arrives in the REST API's camelCase; `normalize_keys` also accepts the
snake_case a hand-written ``curl`` body might use.
"""

from __future__ import annotations

import re
from typing import Any

from labkit.emulator.errors import FieldViolation, invalid_argument

MAX_POOLS = 4
POOL_ROLES = ("the primary replica (chief)", "workers", "parameter servers", "evaluators")
_DURATION_RE = re.compile(r"^\d+(\.\d{1,9})?s$")
_LABEL_KEY_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE_RE = re.compile(r"^[a-z0-9_-]{0,63}$")
# Maps whose keys are user data, not field names: never rename them.
_OPAQUE_MAPS = frozenset({"labels"})
UNSPECIFIED_ACCELERATOR = {None, "", 0, "0", "ACCELERATOR_TYPE_UNSPECIFIED"}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def normalize_keys(value: Any) -> Any:
    """Field names in camelCase, recursively (label keys untouched)."""
    if isinstance(value, list):
        return [normalize_keys(v) for v in value]
    if isinstance(value, dict):
        return {
            _camel(k): (v if _camel(k) in _OPAQUE_MAPS else normalize_keys(v))
            for k, v in value.items()
        }
    return value


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def snake_keys(value: Any) -> Any:
    """Field names in snake_case, recursively (label keys untouched): the job spec as Vertex
    writes it into TF_CONFIG's and CLUSTER_SPEC's ``job`` field."""
    if isinstance(value, list):
        return [snake_keys(v) for v in value]
    if isinstance(value, dict):
        return {_snake(k): (v if k in _OPAQUE_MAPS else snake_keys(v)) for k, v in value.items()}
    return value


def parse_duration(text: str) -> float:
    """Protobuf JSON duration (``"3600s"``, ``"1.5s"``) in seconds."""
    if not isinstance(text, str) or not _DURATION_RE.match(text):
        raise ValueError(f"{text!r} is not a duration like '3600s'")
    return float(text[:-1])


def as_int(value: Any, default: int = 0) -> int:
    """The JSON API sends int64 as strings (``"replicaCount": "1"``)."""
    if value in (None, ""):
        return default
    return int(value)


def is_empty_pool(pool: Any) -> bool:
    """``{}`` placeholders keep a pool's position (e.g. no workers, but evaluators)."""
    return isinstance(pool, dict) and not pool


def validate_custom_job(job: dict[str, Any]) -> None:
    """Raise a 400 `ApiError` listing every problem; return quietly when the job is valid."""
    problems: list[FieldViolation] = []

    def bad(field: str, description: str) -> None:
        problems.append(FieldViolation(field, description))

    if not str(job.get("displayName") or "").strip():
        bad("display_name", "Required field is not set. Give the job a display_name.")
    _check_labels(job.get("labels"), bad)
    spec = job.get("jobSpec")
    if not isinstance(spec, dict):
        bad("job_spec", "Required field is not set.")
        raise invalid_argument(problems)
    pools = spec.get("workerPoolSpecs")
    if not isinstance(pools, list) or not pools:
        bad(
            "job_spec.worker_pool_specs",
            "At least one worker pool is required; pool 0 is the primary replica (chief).",
        )
    elif len(pools) > MAX_POOLS:
        bad(
            "job_spec.worker_pool_specs",
            f"At most {MAX_POOLS} worker pools are allowed (chief, workers, parameter "
            f"servers, evaluators), got {len(pools)}.",
        )
    else:
        for index, pool in enumerate(pools):
            _check_pool(index, pool, bad)
    _check_scheduling(spec.get("scheduling"), bad)
    base = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if base is not None and not str(base).startswith("gs://"):
        bad(
            "job_spec.base_output_directory.output_uri_prefix",
            f"Must be a Cloud Storage URI starting with gs://, got {base!r}.",
        )
    if problems:
        raise invalid_argument(problems)


def _check_labels(labels: Any, bad) -> None:
    if labels is None:
        return
    if not isinstance(labels, dict):
        bad("labels", "Must be a map of strings to strings.")
        return
    for key, value in labels.items():
        if not _LABEL_KEY_RE.match(str(key)):
            bad(
                f"labels[{key!r}]",
                "Label keys start with a lowercase letter and hold at most 63 lowercase "
                "letters, digits, '_' or '-'.",
            )
        if not isinstance(value, str) or not _LABEL_VALUE_RE.match(value):
            bad(
                f"labels[{key!r}]",
                f"Label values hold at most 63 lowercase letters, digits, '_' or '-', got {value!r}.",
            )


def _check_pool(index: int, pool: Any, bad) -> None:
    field = f"job_spec.worker_pool_specs[{index}]"
    if not isinstance(pool, dict):
        bad(field, "Each worker pool must be an object ({} for an unused pool).")
        return
    if is_empty_pool(pool):
        if index == 0:
            bad(
                field,
                "The first worker pool is the primary replica and must be specified; only "
                "pools 1-3 may be empty {} placeholders.",
            )
        return
    try:
        count = as_int(pool.get("replicaCount"))
    except (TypeError, ValueError):
        bad(f"{field}.replica_count", f"Must be an integer, got {pool.get('replicaCount')!r}.")
        count = None
    if index == 0 and count != 1 and count is not None:
        bad(
            f"{field}.replica_count",
            f"The primary replica pool (pool 0) must have exactly 1 replica, got {count}. "
            "Put additional workers in worker_pool_specs[1].",
        )
    elif count is not None and count < 1:
        bad(
            f"{field}.replica_count",
            f"Must be at least 1 for a pool of {POOL_ROLES[index]}, got {count}; "
            "use {} for an unused pool.",
        )
    _check_machine(field, pool.get("machineSpec"), bad)
    container, package = pool.get("containerSpec"), pool.get("pythonPackageSpec")
    if container and package:
        bad(field, "Only one of container_spec and python_package_spec may be set.")
    elif not container and not package:
        bad(
            field,
            "Either container_spec (a training container image) or python_package_spec "
            "(a Python package on a prebuilt container) must be set.",
        )
    elif container:
        if not str(container.get("imageUri") or "").strip():
            bad(f"{field}.container_spec.image_uri", "Required field is not set.")
        _check_env(f"{field}.container_spec.env", container.get("env"), bad)
    else:
        for key, name in (
            ("executorImageUri", "executor_image_uri"),
            ("pythonModule", "python_module"),
        ):
            if not str(package.get(key) or "").strip():
                bad(f"{field}.python_package_spec.{name}", "Required field is not set.")
        if not package.get("packageUris"):
            bad(
                f"{field}.python_package_spec.package_uris",
                "At least one package URI (gs://.../package.tar.gz) is required.",
            )
        _check_env(f"{field}.python_package_spec.env", package.get("env"), bad)


def _check_machine(field: str, machine: Any, bad) -> None:
    machine = machine if isinstance(machine, dict) else {}
    if not str(machine.get("machineType") or "").strip():
        bad(
            f"{field}.machine_spec.machine_type",
            "Required field is not set. Choose a machine type, e.g. n1-standard-4.",
        )
    try:
        accelerators = as_int(machine.get("acceleratorCount"))
    except (TypeError, ValueError):
        bad(f"{field}.machine_spec.accelerator_count", "Must be an integer.")
        return
    if accelerators > 0 and machine.get("acceleratorType") in UNSPECIFIED_ACCELERATOR:
        bad(
            f"{field}.machine_spec.accelerator_type",
            f"accelerator_count is {accelerators} but accelerator_type is not set. Set it "
            "(e.g. NVIDIA_TESLA_T4) or remove accelerator_count.",
        )
    if accelerators < 0:
        bad(f"{field}.machine_spec.accelerator_count", "Must not be negative.")


def _check_env(field: str, env: Any, bad) -> None:
    if env is None:
        return
    if not isinstance(env, list):
        bad(field, "Must be a list of {name, value} objects.")
        return
    for i, item in enumerate(env):
        if not isinstance(item, dict) or not str(item.get("name") or "").strip():
            bad(f"{field}[{i}].name", "Required field is not set.")


def _check_scheduling(scheduling: Any, bad) -> None:
    if not scheduling:
        return
    timeout = scheduling.get("timeout")
    if timeout is not None:
        try:
            if parse_duration(timeout) <= 0:
                raise ValueError
        except ValueError:
            bad(
                "job_spec.scheduling.timeout",
                f"Must be a positive duration like '3600s', got {timeout!r}.",
            )
