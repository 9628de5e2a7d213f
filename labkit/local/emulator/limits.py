"""Size limits of a request to the local service, so a mistyped request is a 400, not a 10 MB job.

- Body: at most `MAX_BODY_BYTES` (1 MiB). Google's front end answers an oversized payload with
  400 INVALID_ARGUMENT "Request payload size exceeds the limit: N bytes." (the wording seen in
  Google API errors, e.g. the 20 MiB BigQuery limit; read with the kit's `search` tool, December
  2026), so the service answers 400 in that wording too, not 413. A job spec is a few kB.
- ``displayName``: a string of 1 to 128 characters ("The name can be up to 128 characters long
  and can consist of any UTF-8 characters", CustomJob.display_name in the Vertex AI v1
  reference; TrainingPipeline.display_name says the same).
- Each env value, arg and command item: at most `MAX_ITEM_CHARS` (32 KiB). Vertex documents no
  limit; Linux refuses a single argument or environment string over 128 KiB (MAX_ARG_STRLEN)
  at exec, so a larger one could never start. The kit's figure leaves room for several.
"""

from __future__ import annotations

from typing import Any

from labkit.local.emulator.errors import FieldViolation

MAX_BODY_BYTES = 1024 * 1024
MAX_DISPLAY_NAME_CHARS = 128
MAX_ITEM_CHARS = 32 * 1024


def payload_too_large(size: int | None = None) -> str:
    got = f" (got {size} bytes)" if size is not None else ""
    return (
        f"Request payload size exceeds the limit: {MAX_BODY_BYTES} bytes{got}. A job spec is a "
        "few kB: pass large values as files in the bucket (gs://...) instead."
    )


def _display_name(value: Any, field: str) -> list[FieldViolation]:
    if not isinstance(value, str) or not value.strip():
        return [FieldViolation(field, f"is {value!r}. Fix: give a name of 1 to 128 characters.")]
    if len(value) > MAX_DISPLAY_NAME_CHARS:
        return [
            FieldViolation(
                field,
                f"is {len(value)} characters long; Vertex AI allows at most "
                f"{MAX_DISPLAY_NAME_CHARS}. Fix: shorten it.",
            )
        ]
    return []


def _items(pools: Any, at: str) -> list[FieldViolation]:
    """Over-long env values, args and command items in every pool's container or package."""
    found: list[FieldViolation] = []
    if not isinstance(pools, list):
        return found  # the job-spec core names that
    for i, pool in enumerate(pools):
        if not isinstance(pool, dict):
            continue
        for spec_key, spec_name in (
            ("containerSpec", "container_spec"),
            ("container_spec", "container_spec"),
            ("pythonPackageSpec", "python_package_spec"),
            ("python_package_spec", "python_package_spec"),
        ):
            spec = pool.get(spec_key)
            if not isinstance(spec, dict):
                continue
            where = f"{at}.worker_pool_specs[{i}].{spec_name}"
            for key in ("args", "command"):
                values = spec.get(key)
                if isinstance(values, list):
                    for n, item in enumerate(values):
                        if len(str(item)) > MAX_ITEM_CHARS:
                            found.append(_too_long(f"{where}.{key}[{n}]", len(str(item))))
            env = spec.get("env")
            if isinstance(env, list):
                for n, item in enumerate(env):
                    if isinstance(item, dict):
                        value = str(item.get("value", ""))
                        if len(value) > MAX_ITEM_CHARS:
                            found.append(_too_long(f"{where}.env[{n}].value", len(value)))
    return found


def _too_long(field: str, size: int) -> FieldViolation:
    return FieldViolation(
        field,
        f"is {size} characters long; the local service takes at most {MAX_ITEM_CHARS} (Linux "
        "refuses a single argument or environment string over 128 KiB). Fix: put large values "
        "in a file in the bucket and pass its gs:// path.",
    )


def custom_job_violations(body: dict[str, Any]) -> list[FieldViolation]:
    """Size problems of a CustomJob body (camelCase or snake_case keys)."""
    name = body.get("displayName", body.get("display_name"))
    spec = body.get("jobSpec", body.get("job_spec"))
    pools = (
        (spec or {}).get("workerPoolSpecs", (spec or {}).get("worker_pool_specs"))
        if isinstance(spec, dict)
        else None
    )
    return _display_name(name, "display_name") + _items(pools, "job_spec")


def training_pipeline_violations(body: dict[str, Any]) -> list[FieldViolation]:
    """Size problems of a TrainingPipeline body."""
    name = body.get("displayName", body.get("display_name"))
    inputs = body.get("trainingTaskInputs", body.get("training_task_inputs"))
    pools = None
    if isinstance(inputs, dict):
        pools = inputs.get("workerPoolSpecs", inputs.get("worker_pool_specs"))
    return _display_name(name, "display_name") + _items(pools, "training_task_inputs")
