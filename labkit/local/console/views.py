"""The console's pages, as a Starlette sub-application over the local service object.

Every page is server-rendered from Jinja2 templates; the only script (``static/console.js``)
steps through the Create flow, refreshes the cost estimate and follows a running job's logs.
Nothing here validates or runs a job: *Start training* hands the form's TrainingPipeline to
``service.create_training_pipeline`` (the call behind ``POST .../trainingPipelines``), whose
`labkit.cloud.specs.SpecError` comes back as messages on the form's fields.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from labkit.cloud import specs
from labkit.cloud.settings import Settings
from labkit.i18n import N_
from labkit.local.console import form as forms

HERE = Path(__file__).resolve().parent
KINDS = {"trainingPipelines": "training_pipelines", "customJobs": "custom_jobs"}
TABS = {"pipelines": "trainingPipelines", "custom-jobs": "customJobs"}
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED")
LOG_TAIL = 400
MAX_FILES = 300
_TF_CONFIG = re.compile(r"TF_CONFIG=(\{.*\})\s*$")
_EVENT = re.compile(
    r"^(\S+) \[emulator\] (?:cancel requested: )?state ((?:JOB|PIPELINE)_STATE_\w+)"
)


def is_terminal(state: str | None) -> bool:
    return bool(state) and str(state).rsplit("_", 1)[-1] in TERMINAL


# The state badge's words for a JobState / PipelineState, as the console shows them (the API
# name stays in the badge's data-state and title). zh-CN words follow Google's zh-CN reference
# of PipelineState (google_cloud_aiplatform_v1 model.PipelineState?hl=zh-CN: 流水线已成功完成,
# 失败, 正在取消, 已取消, 已停止); no stored page shows the zh-CN console's own badges.
STATE_WORDS = {
    "QUEUED": N_("Queued"),
    "PENDING": N_("Pending"),
    "RUNNING": N_("Running"),
    "SUCCEEDED": N_("Succeeded"),
    "PARTIALLY_SUCCEEDED": N_("Partially succeeded"),
    "FAILED": N_("Failed"),
    "CANCELLING": N_("Cancelling"),
    "CANCELLED": N_("Cancelled"),
    "PAUSED": N_("Paused"),
    "EXPIRED": N_("Expired"),
    "UPDATING": N_("Updating"),
}


def state_words(state: str | None, gettext: Callable[[str], str]) -> str:
    """``JOB_STATE_SUCCEEDED`` -> "Succeeded" / "已成功"; an unknown state as the API spells it."""
    suffix = str(state or "").split("_STATE_", 1)[-1]
    return gettext(STATE_WORDS[suffix]) if suffix in STATE_WORDS else str(state or "")


# --------------------------------------------------------------------------- language


def _translator(lang: str) -> tuple[Callable[[str], str], Callable[[str], str]]:
    """``_`` and ``term`` for the page's language, through `labkit.i18n` (gettext catalog +
    glossary of Google's console terms)."""
    from labkit import i18n

    t = i18n.translator(lang)
    return t.gettext, t.term


def _language(request: Request) -> str:
    from labkit import i18n

    return i18n.normalize_language(request.query_params.get("hl"), strict=False)


# --------------------------------------------------------------------------- formatting


def _time(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _short_time(value: str | None) -> str:
    t = _time(value)
    return t.strftime("%Y-%m-%d %H:%M:%S UTC") if t else ""


def duration(resource: dict[str, Any], lang: str | None = None) -> str:
    """Start to end (or to now while it runs), as the console lists it: ``1 min 5 s``
    (``1 分钟 5 秒`` for ``lang="zh-CN"``)."""
    from labkit.i18n import gettext

    start = _time(resource.get("startTime"))
    if not start:
        return ""
    end = _time(resource.get("endTime")) or dt.datetime.now(dt.timezone.utc)
    seconds = max(int((end - start).total_seconds()), 0)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return gettext("{hours} hr {minutes} min", lang).format(hours=hours, minutes=minutes)
    if minutes:
        return gettext("{minutes} min {seconds} s", lang).format(minutes=minutes, seconds=seconds)
    return gettext("{seconds} s", lang).format(seconds=seconds)


def _labels(resource: dict[str, Any]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in (resource.get("labels") or {}).items())


def _row(resource: dict[str, Any], kind: str, lang: str | None = None) -> dict[str, Any]:
    return {
        "id": resource["name"].rsplit("/", 1)[-1],
        "name": resource["name"],
        "kind": kind,
        "display_name": resource.get("displayName", ""),
        "state": resource.get("state", ""),
        "created": _short_time(resource.get("createTime")),
        "duration": duration(resource, lang),
        "labels": _labels(resource),
        "terminal": is_terminal(resource.get("state")),
    }


# --------------------------------------------------------------------------- the app


class Console:
    """The pages of one local service; ``settings`` gives the project, region, bucket, image
    and labels (default: the lab's saved settings, read on every request)."""

    def __init__(self, service: Any, settings: Settings | Callable[[], Settings] | None = None):
        self.service = service
        self._settings = settings
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=2)
        # glossary terms are lower case in running text; a field label starts with a capital
        self.templates.env.filters["sentence"] = lambda text: text[:1].upper() + text[1:]

    # ---- context ----
    def settings(self) -> Settings:
        if isinstance(self._settings, Settings):
            return self._settings
        if callable(self._settings):
            return self._settings()
        from labkit.cloud.settings import load_settings

        return load_settings(mode="local")

    def parent(self) -> str:
        s = self.settings()
        return f"projects/{s.project_id}/locations/{s.region}"

    def render(
        self, request: Request, template: str, status: int = 200, **context: Any
    ) -> HTMLResponse:
        lang = _language(request)
        gettext, term = _translator(lang)
        root = request.scope.get("root_path", "")

        def url(path: str, **params: Any) -> str:
            query = {k: v for k, v in params.items() if v is not None}
            if lang != "en":
                query["hl"] = lang
            return f"{root}{path}" + (f"?{urlencode(query)}" if query else "")

        return self.templates.TemplateResponse(
            request,
            template,
            {
                "_": gettext,
                "term": term,
                "state_words": lambda state: state_words(state, gettext),
                "url": url,
                "lang": lang,
                "root": root,
                **context,
            },
            status_code=status,
        )

    # ---- pages ----
    async def home(self, request: Request) -> Response:
        query = f"?{request.url.query}" if request.url.query else ""
        return RedirectResponse(f"{request.scope.get('root_path', '')}/training{query}", 303)

    async def training(self, request: Request) -> Response:
        tab = request.query_params.get("tab", "pipelines")
        kind = TABS.get(tab, "trainingPipelines")
        found = self.service.list(kind, self.parent()).get(kind, [])
        rows = [_row(r, kind, _language(request)) for r in found]
        return self.render(
            request,
            "training.html",
            tab="custom-jobs" if kind == "customJobs" else "pipelines",
            rows=rows,
            refresh=any(not r["terminal"] for r in rows),
            parent=self.parent(),
        )

    def _images(self) -> list[str]:
        images = list(self.service.images())
        kit = self.settings().image_uri
        return [kit, *[i for i in images if i != kit]]

    def default_form(self) -> forms.CreateForm:
        from trainer.config import args_for

        s = self.settings()
        return forms.default_form(
            image_uri=s.image_uri,
            bucket_uri=s.bucket_uri,
            region=s.region,
            labels=s.labels,
            args=args_for(**s.knobs(profile="job")),
        )

    def _estimate(self, form: forms.CreateForm, lang: str) -> tuple[str, str]:
        """The kit's cost estimate for the pools entered (or why there is none), in the
        page's language (``?hl=``), not the process's."""
        from labkit import i18n
        from labkit.cloud.cost import estimate_cost

        try:
            hours = float(form.hours)
            with i18n.using(lang):
                return str(estimate_cost(form.worker_pool_specs(), hours)), ""
        except (ValueError, KeyError) as err:
            return "", str(err.args[0] if err.args else err)

    def _create_page(
        self, request: Request, form: forms.CreateForm, errors: dict[str, list[str]], status: int
    ) -> HTMLResponse:
        estimate, estimate_error = self._estimate(form, _language(request))
        s = self.settings()
        return self.render(
            request,
            "create.html",
            status=status,
            form=form,
            errors=errors,
            images=self._images(),
            machines=sorted({m for m, _, _ in specs.machine_catalog()}),
            accelerators=sorted(specs.KNOWN_ACCELERATORS),
            disk_types=forms.DISK_TYPES,
            regions=[s.region],
            estimate=estimate,
            estimate_error=estimate_error,
        )

    async def create_form(self, request: Request) -> Response:
        return self._create_page(request, self.default_form(), {}, 200)

    async def _posted(self, request: Request) -> forms.CreateForm:
        # application/x-www-form-urlencoded, what the page's own form posts
        body = (await request.body()).decode("utf-8")
        return forms.CreateForm.from_fields(dict(parse_qsl(body, keep_blank_values=True)))

    async def create(self, request: Request) -> Response:
        form = await self._posted(request)
        problems = form.problems()
        if not problems:
            try:
                created = self.service.create_training_pipeline(self.parent(), form.pipeline_body())
            except specs.SpecError as err:
                problems = err.problems
            except Exception as err:  # ApiError (e.g. UNIMPLEMENTED, service stopping)
                message = getattr(err, "message", None) or str(err)
                return self._create_page(request, form, {"": [message]}, 400)
            else:
                pipeline_id = created["name"].rsplit("/", 1)[-1]
                target = (
                    f"{request.scope.get('root_path', '')}/training/trainingPipelines/{pipeline_id}"
                )
                if "hl" in request.query_params:
                    target += f"?hl={request.query_params['hl']}"
                response = RedirectResponse(target, 303)
                response.headers["X-Resource-Name"] = created["name"]
                return response
        return self._create_page(
            request, form, forms.errors_by_field(problems, _language(request)), 400
        )

    async def estimate(self, request: Request) -> Response:
        estimate, error = self._estimate(await self._posted(request), _language(request))
        return JSONResponse({"estimate": estimate, "error": error})

    def _name(self, request: Request) -> tuple[str, str]:
        kind = request.path_params["kind"]
        if kind not in KINDS:
            raise LookupError(kind)
        return kind, f"{self.parent()}/{kind}/{request.path_params['id']}"

    async def detail(self, request: Request) -> Response:
        try:
            kind, name = self._name(request)
            resource = self.service.get(name)
        except Exception as err:
            return self.render(request, "missing.html", status=404, what=str(err))
        job_name = name
        pipeline = None
        if kind == "trainingPipelines":
            pipeline = resource
            job_name = (resource.get("trainingTaskMetadata") or {}).get("backingCustomJob", "")
        job = self._maybe_get(job_name)
        if kind == "customJobs":
            pipeline_name = ((job or {}).get("labkitLocal") or {}).get("trainingPipeline")
            pipeline = self._maybe_get(pipeline_name) if pipeline_name else None
        logs = self._logs(name)
        replicas = [
            {"role": role, "tf_config": tf_config_of(text), "log": text}
            for role, text in logs.get("replicas", {}).items()
        ]
        pools = (
            (job or {}).get("jobSpec", {}).get("workerPoolSpecs")
            or specs.camel_keys(resource.get("trainingTaskInputs") or {}).get("workerPoolSpecs")
            or []
        )
        output_uri, output_local = output_directory(resource, job)
        return self.render(
            request,
            "job.html",
            kind=kind,
            resource=resource,
            row=_row(resource, kind, _language(request)),
            pipeline=pipeline,
            job=job,
            pools=[specs.camel_keys(p) for p in pools],
            roles=specs.POOL_ROLES,
            timeline=timeline(resource, job, logs.get("job", "")),
            replicas=replicas,
            output_uri=output_uri,
            files=list_files(output_local) if output_local else [],
            output_local=output_local,
            error=(resource.get("error") or {}).get("message", ""),
        )

    def _maybe_get(self, name: str | None) -> dict[str, Any] | None:
        if not name:
            return None
        try:
            return self.service.get(name)
        except Exception:
            return None

    def _logs(self, name: str) -> dict[str, Any]:
        try:
            return self.service.logs(name, tail=LOG_TAIL)
        except Exception:
            return {"job": "", "replicas": {}}

    async def status(self, request: Request) -> Response:
        try:
            _, name = self._name(request)
            resource = self.service.get(name)
        except Exception as err:
            return JSONResponse({"error": str(err)}, status_code=404)
        logs = self._logs(name)
        return JSONResponse(
            {
                "state": resource.get("state"),
                "terminal": is_terminal(resource.get("state")),
                "duration": duration(resource, _language(request)),
                "logs": logs.get("replicas", {}),
            }
        )

    async def cancel(self, request: Request) -> Response:
        kind, name = self._name(request)
        with contextlib.suppress(Exception):  # already terminal: the page shows the state
            self.service.cancel(name)
        target = f"{request.scope.get('root_path', '')}/training/{kind}/{request.path_params['id']}"
        if "hl" in request.query_params:
            target += f"?hl={request.query_params['hl']}"
        return RedirectResponse(target, 303)


# --------------------------------------------------------------------------- job details


def tf_config_of(log: str) -> dict[str, Any] | None:
    """The TF_CONFIG the service gave a replica (its log's header line; the latest attempt)."""
    found = None
    for line in log.splitlines():
        m = _TF_CONFIG.search(line)
        if m:
            try:
                found = json.loads(m.group(1))
            except json.JSONDecodeError:
                continue
    return found


def timeline(
    resource: dict[str, Any], job: dict[str, Any] | None, job_log: str
) -> list[tuple[str, str]]:
    """``(time, state)`` from creation to the end: the resource's own times and every state
    the backing job's log records (restarts show as RUNNING again)."""
    events: list[tuple[str, str]] = []
    if resource.get("createTime"):
        pending = (
            "PIPELINE_STATE_PENDING"
            if "trainingPipelines" in resource["name"]
            else "JOB_STATE_PENDING"
        )
        events.append((resource["createTime"], pending))
    for line in job_log.splitlines():
        m = _EVENT.match(line)
        if m:
            events.append((m.group(1), m.group(2)))
    state = resource.get("state", "")
    if resource.get("endTime") and not any(s == state for _, s in events):
        events.append((resource["endTime"], state))
    return [(_short_time(t), s) for t, s in events]


def output_directory(
    resource: dict[str, Any], job: dict[str, Any] | None
) -> tuple[str, Path | None]:
    """The model output directory (gs://) and the local folder standing for it."""
    inputs = specs.camel_keys(resource.get("trainingTaskInputs") or {})
    spec = (job or {}).get("jobSpec") or resource.get("jobSpec") or inputs
    uri = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix", "")
    local = ((job or resource).get("labkitLocal") or {}).get("localOutputDirectory")
    return uri, Path(local) if local else None


def list_files(folder: Path) -> list[tuple[str, int]]:
    """Files under the output directory: relative path and size, at most `MAX_FILES`."""
    if not folder.is_dir():
        return []
    files = []
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            files.append((str(path.relative_to(folder)), path.stat().st_size))
            if len(files) >= MAX_FILES:
                break
    return files


def create_app(
    service: Any, settings: Settings | Callable[[], Settings] | None = None
) -> Starlette:
    """The console as an ASGI app, to be mounted at ``/console`` by the service's app."""
    console = Console(service, settings)
    routes = [
        Route("/", console.home),
        Route("/training", console.training),
        Route("/training/create", console.create_form, methods=["GET"]),
        Route("/training/create", console.create, methods=["POST"]),
        Route("/training/estimate", console.estimate, methods=["POST"]),
        Route("/training/{kind}/{id}", console.detail),
        Route("/training/{kind}/{id}/status", console.status),
        Route("/training/{kind}/{id}/cancel", console.cancel, methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes)
    app.state.console = console
    return app
