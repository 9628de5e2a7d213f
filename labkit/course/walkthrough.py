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
zh-CN terms (`labkit.i18n` glossary). The local console page (`labkit.local.console`) uses the same
form model (`labkit.local.console.form`), so the two routes cannot drift apart.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from typing import Any

from labkit import i18n
from labkit.cloud.settings import Settings
from labkit.local.console.client import lab_form
from labkit.local.console.form import CreateForm

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
    form = lab_form(settings, args, model_name=MODEL_NAME, machine_type=machine_type)
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

    from labkit.i18n import gettext, term

    def t(key: str) -> tuple[str, str]:
        return _term(key, "en"), _term(key, "zh-CN")

    def step(key: str) -> str:  # the form's section, in the active edition's console words
        return term(key)

    def ui(*path: str) -> tuple[str, str]:  # a console label (path) the catalog translates
        return " > ".join(path), " > ".join(gettext(label, "zh-CN") for label in path)

    select = gettext("select")
    # The field names stay in both languages (the learner's console may be in either); zh-CN
    # names come from the glossary (Google's and the codelab's terms) or, for the console's
    # other labels, from the catalog the local console's form uses. Steps and what to enter
    # follow the edition.
    rows = [
        Field(
            step("training_method"),
            *ui("Dataset"),
            f"{_term('no_managed_dataset', 'en')} ({_term('no_managed_dataset', 'zh-CN')})",
        ),
        Field("", *t("custom_training_advanced"), gettext("select, then Continue")),
        Field(gettext("Model details"), *ui("Train new model"), select),
        Field("", *t("model_name"), form.model_name),
        Field(
            "",
            *ui("Advanced options", "Labels"),
            form.labels + "  " + gettext("(notebook 05 deletes the pipeline by lab=cassava)"),
        ),
        Field(step("training_container"), *t("custom_container"), select),
        Field("", *t("container_image"), form.image_uri),
        Field(
            "",
            *t("model_output_directory"),
            form.output_dir + "  " + gettext("(never empty: it sets AIP_MODEL_DIR)"),
        ),
        Field("", *ui("Arguments"), " ".join(form.arg_list()) or gettext("(leave empty)")),
        Field(
            step("hyperparameters"),
            *ui("Enable hyperparameter tuning"),
            gettext("leave off, Continue"),
        ),
        Field(step("compute_and_pricing"), *t("region"), form.region),
    ]
    roles = ("chief", "worker", "parameter_server", "evaluator")
    for i, pool in enumerate(form.pools):
        if not pool.used:
            continue
        accel = (
            f"{pool.accelerator_type} x{pool.accelerator_count}"
            if pool.accelerator_type
            else gettext("none")
        )
        rows.append(
            Field(
                "",
                f"{_term('worker_pool', 'en')} {i} ({_term(roles[i], 'en')})",
                f"{_term('worker_pool', 'zh-CN')} {i}（{_term(roles[i], 'zh-CN')}）",
                gettext(
                    "machine type {machine}, accelerator {accelerator}, worker count {count}"
                ).format(machine=pool.machine_type, accelerator=accel, count=pool.replica_count),
            )
        )
    rows += [
        Field(gettext("Prediction container"), *ui("No prediction container"), select),
        Field("", *t("start_training"), gettext("click; the job appears under Training pipelines")),
    ]
    return rows


def walkthrough(settings: Settings, **form_options: Any) -> Any:
    """The table notebook 04 shows (a `labkit.course.views.Table`). Its cells are already in the
    right language: `fields` keeps the console's English field names English (the zh-CN names
    have their own column), so the table must not translate them again."""
    from labkit.course.views import Table

    class FormTable(Table):
        @staticmethod
        def _cell(value: Any) -> str:
            return "" if value is None else str(value)

    return FormTable(fields(cloud_form(settings, **form_options)))


def _pools(spec: dict[str, Any]) -> str:
    from labkit.cloud.specs import camel_keys

    pools = camel_keys(spec).get("workerPoolSpecs") or []
    parts = []
    for i, pool in enumerate(pools):
        if not pool:
            continue
        machine = pool.get("machineSpec") or {}
        gpu = machine.get("acceleratorType")
        gpus = f" + {machine.get('acceleratorCount')} {gpu}" if gpu else ""
        parts.append(
            f"{i18n.term('worker_pool')} {i}: "
            f"{pool.get('replicaCount')} x {machine.get('machineType')}{gpus}"
        )
    return "; ".join(parts)


def compare_routes(pipeline: dict[str, Any], custom_job: dict[str, Any]) -> Any:
    """Side by side, what each route made: the console's training pipeline (with the custom
    job it started) and the SDK's bare custom job; where each shows up; the same pools."""
    from labkit.cloud.specs import camel_keys
    from labkit.course.views import Table

    inputs = camel_keys(pipeline.get("trainingTaskInputs") or {})
    job_spec = camel_keys(custom_job.get("jobSpec") or {})
    backing = (pipeline.get("trainingTaskMetadata") or {}).get("backingCustomJob", "")

    _ = i18n.gettext

    def out(spec: dict[str, Any]) -> str:
        return (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix", _("(none)"))

    rows = [
        (_("creates"), _("a training pipeline, which starts a custom job"), _("a custom job")),
        (_("resource"), pipeline.get("name", ""), custom_job.get("name", "")),
        (_("its custom job"), backing, _("(itself)")),
        (
            _("in the console"),
            _("Training > Training pipelines (its job also under Custom jobs)"),
            _("Training > Custom jobs"),
        ),
        (_("state"), pipeline.get("state", ""), custom_job.get("state", "")),
        (_("worker pools"), _pools(inputs), _pools(job_spec)),
        (_("model output directory"), out(inputs), out(job_spec)),
        (
            _("labels"),
            ", ".join(f"{k}={v}" for k, v in (pipeline.get("labels") or {}).items()),
            ", ".join(f"{k}={v}" for k, v in (custom_job.get("labels") or {}).items()),
        ),
    ]
    console_route, sdk_route = _("console (Start training)"), _("SDK (CustomJob.run)")
    return Table([{"": what, console_route: a, sdk_route: b} for what, a, b in rows])


# --------------------------------------------------------------------------- cleanup (05)


def unlabelled_console_pipelines(settings: Settings) -> list[Any]:
    """Training pipelines named like the walkthrough's job (`MODEL_NAME`) that lack the kit's
    label: made in the console with the Labels field left empty, so the label-based cleanup
    cannot see them. Found through the SDK by display name; locally only while the local
    service runs (its state, pipelines included, is deleted with the rest)."""
    from google.cloud import aiplatform

    from labkit import KIT_LABEL_KEY, KIT_LABEL_VALUE
    from labkit.local import vertex

    if settings.mode == "local":
        from labkit.local.emulator import control

        try:  # the settings' local service: nothing to find when it is not running
            control.request_json(settings.emulator_port, "/labkit/v1/info", timeout=3)
        except (RuntimeError, OSError):
            return []
        vertex.init_vertex(settings, ensure_service=False)
    else:
        vertex.init_vertex(settings)
    found = aiplatform.CustomContainerTrainingJob.list(filter=f'display_name="{MODEL_NAME}"')
    return [p for p in found if (p.labels or {}).get(KIT_LABEL_KEY) != KIT_LABEL_VALUE]


def describe_pipelines(pipelines: Sequence[Any]) -> str:
    """One line per pipeline for the dry run."""
    if not pipelines:
        return i18n.gettext("no unlabelled training pipeline named {name!r}").format(
            name=MODEL_NAME
        )
    return "\n".join(
        i18n.gettext(
            "would delete training pipeline {resource} ({name}, {state}, no lab=cassava label)"
        ).format(resource=p.resource_name, name=p.display_name, state=p.state.name)
        for p in pipelines
    )


def delete_pipelines(pipelines: Sequence[Any]) -> list[str]:
    """Cancel (if running) and delete each pipeline; the names deleted. Idempotent."""
    from google.api_core import exceptions as gexc

    from labkit.cloud.cleanup import cancel_and_wait

    deleted = []
    for pipeline in pipelines:
        with contextlib.suppress(gexc.NotFound):
            if not pipeline.state.name.endswith(("SUCCEEDED", "FAILED", "CANCELLED")):
                cancel_and_wait(pipeline)
            pipeline.delete()
            deleted.append(pipeline.resource_name)
            print(
                i18n.gettext("deleted training pipeline {resource} ({name})").format(
                    resource=pipeline.resource_name, name=pipeline.display_name
                )
            )
    return deleted
