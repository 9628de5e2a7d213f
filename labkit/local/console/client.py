"""The notebook's side of the console route: fill in the Create form, find the job it made.

Notebook 04 creates its console job the way a learner would: in the real page, in Debian's
Chromium driven by Playwright (taking the report's screenshots on the way), or, where no
browser can run, by posting the same form to the page's own handler. Either way the job is
made by the console's *Start training*, never by a shortcut around it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import http.client
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from labkit.cloud.settings import Settings
from labkit.i18n import N_, gettext
from labkit.local.console import PATH, browser, console_url, sign_in_url
from labkit.local.console.form import CreateForm, default_form
from labkit.local.emulator import control

SCREENSHOTS = {
    "create": "console-create-form.png",
    "compute": "console-compute-step.png",
    "finished": "console-finished-job.png",
}
_FIELD_ERROR = re.compile(r'<p class="field-error" data-field="([^"]*)"[^>]*>(.*?)</p>', re.S)


class ConsoleFormError(ValueError):
    """The console refused the form: ``errors`` maps each field to its messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        lines = [f"{field or 'form'}: {m}" for field, ms in errors.items() for m in ms]
        super().__init__("the console refused the form:\n  " + "\n  ".join(lines))


@dataclasses.dataclass
class ConsoleJob:
    """A training pipeline made by the console's *Start training*, and how it was made."""

    name: str  # projects/P/locations/L/trainingPipelines/ID
    via: str  # "browser" or "form handler"
    screenshots: list[Path] = dataclasses.field(default_factory=list)

    @property
    def id(self) -> str:
        return self.name.rsplit("/", 1)[-1]

    @property
    def how(self) -> str:
        """How *Start training* was pressed, in the edition's words (notebook 04 prints it)."""
        return gettext(_HOW[self.via])


_HOW = {"browser": N_("in Chromium"), "form handler": N_("through the form handler")}


def base_url(settings: Settings) -> str:
    return f"http://127.0.0.1:{settings.emulator_port}{PATH}"


def page_url(settings: Settings, name: str | None = None, lang: str | None = None) -> str:
    """The Training page, or a pipeline's / job's page when ``name`` is given."""
    path = "/training"
    if name:
        kind, resource_id = name.rsplit("/", 2)[-2:]
        path = f"/training/{kind}/{resource_id}"
    return console_url(settings.emulator_port, lang, path)


def signed_in_url(settings: Settings, url: str | None = None) -> str:
    """``url`` (default: the Training page) behind the console's sign-in link: what a
    browser opens first, since every page needs the session cookie."""
    port = settings.emulator_port
    return sign_in_url(port, control.token_for(port), url or page_url(settings))


def open_page(context: Any, settings: Settings, url: str) -> Any:
    """A new page of the browser ``context``, signed in and showing ``url``; RuntimeError
    when the console does not answer it with 200."""
    page = context.new_page()
    answer = page.goto(signed_in_url(settings, url))
    if answer is None or answer.status != 200:
        raise RuntimeError(f"the console's page {url} answered {answer and answer.status}")
    return page


def lab_form(
    settings: Settings,
    args: Sequence[str],
    *,
    model_name: str = "multiworker-cassava-console",
    machine_type: str | None = None,
) -> CreateForm:
    """The codelab's console job for this lab: pool 0 = chief, pool 1 = one worker, both the
    mode's machine (or ``machine_type``) without GPUs, the kit's image, an output folder in
    the lab's bucket, the kit's labels and the given trainer arguments."""
    form = default_form(
        image_uri=settings.image_uri,
        bucket_uri=settings.bucket_uri,
        region=settings.region,
        labels=settings.labels,
        args=args,
        **({"machine_type": machine_type} if machine_type else {}),
    )
    form.model_name = model_name
    return form


# --------------------------------------------------------------------------- the form handler


def submit_form(settings: Settings, form: CreateForm) -> str:
    """POST the form to the page's own handler, as the browser does; the pipeline's name.

    The handler answers 303 (to the pipeline's page) with the name in ``X-Resource-Name``,
    or 400 with the page again, every problem under its field (raised as ConsoleFormError).
    """
    body = urlencode(form.to_fields()).encode()
    conn = http.client.HTTPConnection("127.0.0.1", settings.emulator_port, timeout=30)
    try:
        conn.request(
            "POST",
            f"{PATH}/training/create",
            body=body,
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Authorization": f"Bearer {control.token_for(settings.emulator_port)}",
            },
        )
        answer = conn.getresponse()
        text = answer.read().decode("utf-8", "replace")
        if answer.status == 303 and answer.getheader("X-Resource-Name"):
            return answer.getheader("X-Resource-Name")
    finally:
        conn.close()
    if answer.status == 400:
        raise ConsoleFormError(form_errors(text))
    raise RuntimeError(f"the console answered {answer.status}: {text[:500]}")


def form_errors(page: str) -> dict[str, list[str]]:
    """The messages a Create page shows under its fields."""
    errors: dict[str, list[str]] = {}
    for field, message in _FIELD_ERROR.findall(page):
        errors.setdefault(field, []).append(html.unescape(message).strip())
    return errors


# --------------------------------------------------------------------------- the browser


def fill_form(page: Any, form: CreateForm) -> None:
    """Type the form's values into the open Create page, step by step (Continue)."""
    fields = form.to_fields()
    for step in page.locator("section.step").all():
        for field in step.locator("input[name], select[name], textarea[name]").all():
            name = field.get_attribute("name")
            if name not in fields or not field.is_enabled():
                continue
            if field.evaluate("e => e.tagName") == "SELECT":
                if fields[name]:
                    field.select_option(fields[name])
                else:
                    field.select_option("")
            else:
                field.fill(fields[name])
        proceed = step.locator("button.continue")
        if proceed.count() and proceed.is_visible():
            proceed.click()


def _off_the_event_loop(fn: Any, *args: Any) -> Any:
    """Run ``fn`` in a thread of its own when this thread runs an asyncio loop (a Jupyter
    kernel does): Playwright's sync API refuses to run inside one."""
    import asyncio
    import concurrent.futures

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return fn(*args)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args).result()


@contextlib.contextmanager
def _context(context: Any = None) -> Iterator[Any]:
    if context is not None:
        yield context
        return
    with browser.open_browser() as fresh:
        yield fresh


def create_in_browser(
    settings: Settings,
    form: CreateForm,
    screenshots_dir: str | Path | None = None,
    context: Any = None,
) -> ConsoleJob:
    """Open the Create page in Chromium, fill it in, take the create-form and compute-step
    screenshots, press *Start training*; the pipeline the page created. ``context``: a
    Playwright browser context to use (default: a fresh one on Debian's Chromium)."""
    if context is None:
        return _off_the_event_loop(_create_in_browser, settings, form, screenshots_dir, None)
    return _create_in_browser(settings, form, screenshots_dir, context)


def _create_in_browser(
    settings: Settings, form: CreateForm, screenshots_dir: str | Path | None, context: Any
) -> ConsoleJob:
    shots: list[Path] = []
    folder = Path(screenshots_dir) if screenshots_dir else None
    if folder:
        folder.mkdir(parents=True, exist_ok=True)
    with _context(context) as ctx:
        page = open_page(ctx, settings, f"{base_url(settings)}/training/create")
        if folder:
            page.screenshot(path=str(folder / SCREENSHOTS["create"]), full_page=True)
            shots.append(folder / SCREENSHOTS["create"])
        fill_form(page, form)
        compute = page.locator("#step-compute")
        compute.locator("h2").click()
        page.wait_for_timeout(800)  # the cost estimate refreshes after typing
        if folder:
            compute.screenshot(path=str(folder / SCREENSHOTS["compute"]))
            shots.append(folder / SCREENSHOTS["compute"])
        with page.expect_navigation():
            page.locator("#start-training").click()
        errors = form_errors(page.content())
        if errors:
            raise ConsoleFormError(errors)
        name = page.locator("#job").get_attribute("data-name") or ""
        page.close()
    return ConsoleJob(name, "browser", shots)


def screenshot_job(settings: Settings, name: str, path: str | Path) -> Path:
    """A full-page screenshot of a pipeline's page (the report's finished-job picture)."""

    def take() -> Path:
        with browser.open_browser() as context:
            page = open_page(context, settings, page_url(settings, name))
            page.screenshot(path=str(path), full_page=True)
        return Path(path)

    return _off_the_event_loop(take)


def create_console_job(
    settings: Settings,
    form: CreateForm,
    *,
    screenshots_dir: str | Path | None = None,
    use_browser: bool | None = None,
) -> ConsoleJob:
    """Start training from the console: in Chromium when one can run here (``use_browser``
    None = when available), else through the page's own form handler."""
    reason = browser.unavailable_reason()
    if use_browser is None:
        use_browser = reason is None
    if use_browser:
        return create_in_browser(settings, form, screenshots_dir)
    return ConsoleJob(submit_form(settings, form), "form handler")


# --------------------------------------------------------------------------- following it


def get_resource(settings: Settings, name: str) -> dict[str, Any]:
    """A pipeline or job as the local service's REST API returns it."""
    return control.request_json(settings.emulator_port, f"/v1/{name}")


def wait_until_done(
    settings: Settings, name: str, timeout: float = 900, poll: float = 2.0
) -> dict[str, Any]:
    """Poll a local pipeline until it ends; its final JSON."""
    from labkit.local.console.views import is_terminal

    deadline = time.monotonic() + timeout
    while True:
        resource = get_resource(settings, name)
        if is_terminal(resource.get("state")):
            return resource
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} still {resource.get('state')} after {timeout:.0f} s")
        time.sleep(poll)


# --------------------------------------------------------------------------- finding it again


def find_pipeline(display_name: str) -> Any:
    """The newest training pipeline called ``display_name``, found through the SDK as a
    learner would (``CustomContainerTrainingJob.list``), in either mode; None if there is none.
    Call `labkit.local.vertex.init_vertex` first."""
    from google.cloud import aiplatform

    found = aiplatform.CustomContainerTrainingJob.list(filter=f'display_name="{display_name}"')
    return max(found, key=lambda job: job.create_time) if found else None


def pipeline_model_dir(settings: Settings, pipeline: Any) -> str:
    """Where the pipeline's chief saved the model: ``<model output directory>/model``; in
    local mode the local folder standing for that ``gs://`` path."""
    resource = pipeline if isinstance(pipeline, dict) else pipeline.to_dict()
    if settings.mode == "local":
        from labkit.local.vertex import job_output_dir

        backing = (resource.get("trainingTaskMetadata") or {}).get("backingCustomJob")
        if not backing:
            raise ValueError(f"{resource.get('name')} has not started its custom job yet")
        return str(job_output_dir(backing, settings=settings) / "model")
    inputs = resource.get("trainingTaskInputs") or {}
    base = (inputs.get("baseOutputDirectory") or inputs.get("base_output_directory") or {}).get(
        "outputUriPrefix"
    ) or (inputs.get("base_output_directory") or {}).get("output_uri_prefix")
    if not base:
        raise ValueError(
            f"{resource.get('name')} has no model output directory: the model was lost with its "
            "container. Create it again with the Model output directory filled in."
        )
    return f"{base.rstrip('/')}/model"


def follow_console_job(
    settings: Settings,
    display_name: str,
    *,
    run_dir: str | Path | None = None,
    timeout: float = 900,
) -> dict[str, Any] | None:
    """Find the console-made pipeline by its name (the SDK's list, as in the cloud), wait for
    it locally, and take the finished job's screenshot when a browser runs here. A summary:
    ``name``, ``state``, ``resource`` (its JSON), ``model_dir``, ``screenshot``; None when no
    pipeline has that name yet (cloud: create it in the console first)."""
    pipeline = find_pipeline(display_name)
    if pipeline is None:
        return None
    name = pipeline.resource_name
    if settings.mode == "local":
        resource = wait_until_done(settings, name, timeout=timeout)
    else:
        resource = pipeline.to_dict()
    state = str(resource.get("state", ""))
    summary: dict[str, Any] = {"name": name, "state": state, "resource": resource}
    try:
        summary["model_dir"] = pipeline_model_dir(settings, resource)
    except ValueError as err:
        summary["model_dir"] = None
        summary["problem"] = str(err)
    summary["screenshot"] = None
    if settings.mode == "local" and run_dir and browser.unavailable_reason() is None:
        shot = screenshot_job(settings, name, Path(run_dir) / SCREENSHOTS["finished"])
        summary["screenshot"] = str(shot)
    return summary
