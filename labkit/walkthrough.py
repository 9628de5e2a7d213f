"""The console route in the cloud: exactly what to enter in each field of the real console.

The codelab (section 6) starts its job from the console: Vertex AI → Training → Create.
Notebook 04 prints this learner's own values for every field of that flow, in the console's
order, beside Google's zh-CN field names, with the deep link to the project's Training page.
Three fields the codelab leaves out or leaves empty are filled here, because the kit needs
them:

- **Model output directory** (``baseOutputDirectory``): Vertex sets ``AIP_MODEL_DIR`` only
  from it; the kit's trainer refuses to start without it rather than lose the model.
- **Labels** (``lab=cassava``, ``lab-run=<run id>``): notebook 05 finds the pipeline by them.
- **Model name**: the training pipeline's display name, which notebook 04 looks the job up by.

Field names and order follow Google Cloud's "Create custom training jobs" page (Console tab:
"you can't create a CustomJob resource directly ... you can create a TrainingPipeline
resource", cloud.google.com/vertex-ai/docs/training/create-custom-job) and the codelab's own
zh-CN terms (`labkit.i18n` glossary). The local console page (`labkit.console`) uses the same
form model (`labkit.console.form`), so the two routes cannot drift apart.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from typing import Any

from labkit.console.form import CreateForm, default_form
from labkit.settings import Settings

CONSOLE = "https://console.cloud.google.com"
MODEL_NAME = "multiworker-cassava"


def training_page_url(settings: Settings, tab: str = "training-pipelines") -> str:
    """The project's Vertex AI Training page (``training-pipelines`` or ``custom-jobs`` tab)."""
    return f"{CONSOLE}/vertex-ai/training/{tab}?project={settings.project_id}"


def cloud_form(
    settings: Settings,
    *,
    workers: int = 2,
    machine_type: str = "n1-standard-4",
    accelerator_type: str | None = None,
    accelerator_count: int = 0,
    args: Sequence[str] = (),
) -> CreateForm:
    """The codelab's job as the console form for this learner: pool 0 = the chief, pool 1 =
    ``workers - 1`` workers, the same GPUs on every machine, the output folder in the lab's
    bucket named after the run (unique per lab run)."""
    form = default_form(
        image_uri=settings.image_uri,
        bucket_uri=settings.bucket_uri,
        region=settings.region,
        labels=settings.labels,
        args=args,
        machine_type=machine_type,
    )
    form.model_name = MODEL_NAME
    form.output_dir = f"{settings.bucket_uri}/console/{MODEL_NAME}-{settings.run_id}"
    for i, pool in enumerate(form.pools[:2]):
        pool.accelerator_type = accelerator_type or ""
        pool.accelerator_count = str(accelerator_count if accelerator_type else 0)
        pool.replica_count = "1" if i == 0 else str(max(workers - 1, 0))
    if workers < 2:
        form.pools[1].machine_type = ""
    return form


@dataclasses.dataclass
class Field:
    """One row of the walkthrough: where, which field (English and zh-CN), what to enter."""

    step: str
    field: str
    field_zh_CN: str
    enter: str


def _term(key: str, lang: str) -> str:
    from labkit import i18n

    return i18n.term(key, lang)


def fields(form: CreateForm) -> list[Field]:
    """Every field of Training → Create, in the console's order, with this form's value."""

    def t(key: str) -> tuple[str, str]:
        return _term(key, "en"), _term(key, "zh-CN")

    # zh-CN names come from the glossary (Google's and the codelab's terms); a field the
    # glossary does not hold shows "-" rather than a guessed translation.
    rows = [
        Field(
            _term("training_method", "en"),
            "Dataset",
            "-",
            f"{_term('no_managed_dataset', 'en')} ({_term('no_managed_dataset', 'zh-CN')})",
        ),
        Field("", *t("custom_training_advanced"), "select, then Continue"),
        Field("Model details", "Train new model", "-", "select"),
        Field("", *t("model_name"), form.model_name),
        Field(
            "",
            "Advanced options > Labels",
            "-",
            form.labels + "  (notebook 05 deletes the pipeline by lab=cassava)",
        ),
        Field(_term("container_settings", "en"), *t("custom_container"), "select"),
        Field("", *t("container_image"), form.image_uri),
        Field(
            "",
            *t("model_output_directory"),
            form.output_dir + "  (never empty: it sets AIP_MODEL_DIR)",
        ),
        Field("", "Arguments", "-", " ".join(form.arg_list()) or "(leave empty)"),
        Field(
            _term("hyperparameters", "en"),
            "Enable hyperparameter tuning",
            "-",
            "leave off, Continue",
        ),
        Field(_term("compute_and_pricing", "en"), *t("region"), form.region),
    ]
    roles = ("chief", "worker", "parameter_server", "evaluator")
    for i, pool in enumerate(form.pools):
        if not pool.used:
            continue
        accel = (
            f"{pool.accelerator_type} x{pool.accelerator_count}"
            if pool.accelerator_type
            else "none"
        )
        rows.append(
            Field(
                "",
                f"{_term('worker_pool', 'en')} {i} ({_term(roles[i], 'en')})",
                f"{_term('worker_pool', 'zh-CN')} {i}（{_term(roles[i], 'zh-CN')}）",
                f"machine type {pool.machine_type}, accelerator {accel}, "
                f"worker count {pool.replica_count}",
            )
        )
    rows += [
        Field("Prediction container", "No prediction container", "-", "select"),
        Field("", *t("start_training"), "click; the job appears under Training pipelines"),
    ]
    return rows


def walkthrough(settings: Settings, **form_options: Any) -> Any:
    """The table notebook 04 shows (a `labkit.notebook.Table`)."""
    from labkit.notebook import Table

    return Table(fields(cloud_form(settings, **form_options)))


def _pools(spec: dict[str, Any]) -> str:
    from labkit.specs import camel_keys

    pools = camel_keys(spec).get("workerPoolSpecs") or []
    parts = []
    for i, pool in enumerate(pools):
        if not pool:
            continue
        machine = pool.get("machineSpec") or {}
        gpu = machine.get("acceleratorType")
        gpus = f" + {machine.get('acceleratorCount')} {gpu}" if gpu else ""
        parts.append(f"pool {i}: {pool.get('replicaCount')} x {machine.get('machineType')}{gpus}")
    return "; ".join(parts)


def compare_routes(pipeline: dict[str, Any], custom_job: dict[str, Any]) -> Any:
    """Side by side, what each route made: the console's training pipeline (with the custom
    job it started) and the SDK's bare custom job; where each shows up; the same pools."""
    from labkit.notebook import Table
    from labkit.specs import camel_keys

    inputs = camel_keys(pipeline.get("trainingTaskInputs") or {})
    job_spec = camel_keys(custom_job.get("jobSpec") or {})
    backing = (pipeline.get("trainingTaskMetadata") or {}).get("backingCustomJob", "")

    def out(spec: dict[str, Any]) -> str:
        return (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix", "(none)")

    rows = [
        ("creates", "a training pipeline, which starts a custom job", "a custom job"),
        ("resource", pipeline.get("name", ""), custom_job.get("name", "")),
        ("its custom job", backing, "(itself)"),
        (
            "in the console",
            "Training > Training pipelines (its job also under Custom jobs)",
            "Training > Custom jobs",
        ),
        ("state", pipeline.get("state", ""), custom_job.get("state", "")),
        ("worker pools", _pools(inputs), _pools(job_spec)),
        ("model output directory", out(inputs), out(job_spec)),
        (
            "labels",
            ", ".join(f"{k}={v}" for k, v in (pipeline.get("labels") or {}).items()),
            ", ".join(f"{k}={v}" for k, v in (custom_job.get("labels") or {}).items()),
        ),
    ]
    return Table(
        [{"": what, "console (Start training)": a, "SDK (CustomJob.run)": b} for what, a, b in rows]
    )


# --------------------------------------------------------------------------- cleanup (05)


def unlabelled_console_pipelines(settings: Settings) -> list[Any]:
    """Training pipelines named like the walkthrough's job (`MODEL_NAME`) that lack the kit's
    label: made in the console with the Labels field left empty, so the label-based cleanup
    cannot see them. Found through the SDK by display name; locally only while the local
    service runs (its state, pipelines included, is deleted with the rest)."""
    from google.cloud import aiplatform

    from labkit import KIT_LABEL_KEY, KIT_LABEL_VALUE, vertex

    if settings.mode == "local":
        import urllib.request

        try:  # the settings' local service: nothing to find when it is not running
            urllib.request.urlopen(f"{settings.api_endpoint}/labkit/v1/info", timeout=3).close()
        except OSError:
            return []
        vertex.init_vertex(settings, ensure_service=False)
    else:
        vertex.init_vertex(settings)
    found = aiplatform.CustomContainerTrainingJob.list(filter=f'display_name="{MODEL_NAME}"')
    return [p for p in found if (p.labels or {}).get(KIT_LABEL_KEY) != KIT_LABEL_VALUE]


def describe_pipelines(pipelines: Sequence[Any]) -> str:
    """One line per pipeline for the dry run."""
    if not pipelines:
        return f"no unlabelled training pipeline named {MODEL_NAME!r}"
    return "\n".join(
        f"would delete training pipeline {p.resource_name} ({p.display_name}, {p.state.name}, "
        "no lab=cassava label)"
        for p in pipelines
    )


def delete_pipelines(pipelines: Sequence[Any]) -> list[str]:
    """Cancel (if running) and delete each pipeline; the names deleted. Idempotent."""
    from google.api_core import exceptions as gexc

    from labkit.cleanup import cancel_and_wait

    deleted = []
    for pipeline in pipelines:
        with contextlib.suppress(gexc.NotFound):
            if not pipeline.state.name.endswith(("SUCCEEDED", "FAILED", "CANCELLED")):
                cancel_and_wait(pipeline)
            pipeline.delete()
            deleted.append(pipeline.resource_name)
            print(f"deleted training pipeline {pipeline.resource_name} ({pipeline.display_name})")
    return deleted
