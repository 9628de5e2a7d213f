"""The local console without a browser: the form, its errors, the pages, the form handler.

The same pages in Chromium are in tests/test_console_browser.py.
"""

from __future__ import annotations

import html
import html.parser
import re
import time
import urllib.request

import pytest
from conftest import DEMO_IMAGE_URI

from labkit.cloud import specs
from labkit.cloud.settings import Settings
from labkit.local.console import client
from labkit.local.console import form as forms
from labkit.local.console.views import tf_config_of, timeline

SETTINGS = Settings(mode="local", project_id="local-project", bucket="console-bucket")


def lab_form(**changes) -> forms.CreateForm:
    form = client.lab_form(SETTINGS, ["--sleep", "0"])
    for key, value in changes.items():
        setattr(form, key, value)
    return form


def test_the_form_becomes_the_consoles_training_pipeline():
    body = lab_form().pipeline_body()
    assert body["trainingTaskDefinition"] == specs.CUSTOM_TASK_SCHEMA
    inputs = body["trainingTaskInputs"]
    assert [p["replicaCount"] for p in inputs["workerPoolSpecs"]] == [1, 1]
    assert inputs["baseOutputDirectory"]["outputUriPrefix"].startswith(
        "gs://console-bucket/console/multiworker-cassava-"
    )
    assert body["labels"] == SETTINGS.labels  # lab=cassava: cleanup finds it
    assert "modelToUpload" not in body  # "No prediction container"
    assert specs.validate_training_pipeline(body) == []


def test_an_unused_pool_before_a_used_one_stays_an_empty_dict():
    form = lab_form()
    form.pools[1].machine_type = ""
    form.pools[3].machine_type = "n1-standard-4"
    pools = form.worker_pool_specs()
    assert len(pools) == 4 and pools[1] == {} and pools[2] == {}


@pytest.mark.parametrize(
    "path, field",
    [
        ("trainingTaskInputs.workerPoolSpecs[0].replicaCount", "pool0.replica_count"),
        (
            "trainingTaskInputs.workerPoolSpecs[1].machineSpec.acceleratorCount",
            "pool1.accelerator_count",
        ),
        ("trainingTaskInputs.workerPoolSpecs[2].machineSpec.machineType", "pool2.machine_type"),
        ("trainingTaskInputs.workerPoolSpecs[1].containerSpec.imageUri", "image_uri"),
        ("trainingTaskInputs.baseOutputDirectory.outputUriPrefix", "output_dir"),
        ("displayName", "model_name"),
        ("labels.Bad", "labels"),
        ("trainingTaskDefinition", ""),
    ],
)
def test_problem_paths_land_on_their_fields(path, field):
    assert forms.field_for(path) == field


def test_each_codelab_mistake_is_named_on_its_field():
    form = lab_form(image_uri="", output_dir="")
    form.pools[0].replica_count = "2"
    form.pools[1].accelerator_type = "NVIDIA_TESLA_T4"
    form.pools[1].accelerator_count = "1"
    form.pools[2].machine_type = "x9-unknown-4"
    errors = forms.errors_by_field(form.problems())
    assert set(errors) == {
        "pool0.replica_count",
        "pool1.accelerator_count",
        "pool2.machine_type",
        "image_uri",
        "output_dir",
    }
    assert len(errors["image_uri"]) == 1  # one message, although every pool has the image
    assert "AIP_MODEL_DIR" in errors["output_dir"][0]


def test_tf_config_and_timeline_come_from_the_logs():
    log = (
        '===== 2026-12-04T10:00:00Z attempt 1 of 1: worker-0 (workerpool1-0) TF_CONFIG={"cluster": '
        '{"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}, "task": {"type": "worker", "index": 0}}\n'
        "hello\n"
    )
    assert tf_config_of(log)["task"] == {"type": "worker", "index": 0}
    events = timeline(
        {
            "name": "projects/p/locations/l/trainingPipelines/1",
            "createTime": "2026-12-04T10:00:00Z",
            "endTime": "2026-12-04T10:01:00Z",
            "state": "PIPELINE_STATE_SUCCEEDED",
        },
        None,
        "2026-12-04T10:00:01Z [emulator] state JOB_STATE_RUNNING (attempt 1 of 1)\n",
    )
    assert [s for _, s in events] == [
        "PIPELINE_STATE_PENDING",
        "JOB_STATE_RUNNING",
        "PIPELINE_STATE_SUCCEEDED",
    ]


def signed_in_get(url: str, settings: Settings | None = None) -> str:
    """A console page as a browser gets it: through the sign-in link (``url`` itself when it
    is one), its cookie kept in a jar and sent on the redirect to the page."""
    import http.cookiejar

    if "/console/session?" not in url:
        url = client.signed_in_url(settings, url)
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    with opener.open(url, timeout=10) as answer:
        return answer.read().decode()


# ---- the pages, in-process ----


@pytest.fixture
def console(tmp_path):
    from conftest import in_process_client

    from labkit.cloud.paths import REPO_ROOT
    from labkit.local.emulator.service import Service

    service = Service(tmp_path / "state", tmp_path / "gcs", 0)
    service.register_image(SETTINGS.image_uri, str(REPO_ROOT))  # the API takes strings
    test_client = in_process_client(service)
    # the page reads the lab's saved settings; here the test's own
    app = test_client.app.app  # the Starlette app behind the guard
    mount = next(r for r in app.routes if getattr(r, "path", "") == "/console")
    mount.app.app.state.console._settings = SETTINGS  # the console app, built now
    yield test_client
    service.shutdown()


def test_pages_render_with_the_real_console_field_names(console):
    page = console.get("/console/training/create")
    assert page.status_code == 200
    for words in (
        "No managed dataset",
        "Custom training (advanced)",
        "Model name",
        "Model output directory",
        "Compute and pricing",
        "Worker pool",
        "Start training",
        "ESTIMATE, not a bill",  # the kit's cost estimate for what is entered
    ):
        assert words in page.text, words
    listing = console.get("/console/training?tab=custom-jobs")
    assert listing.status_code == 200 and "Custom jobs" in listing.text


def test_the_page_speaks_zh_cn_with_googles_console_terms(console):
    page = console.get("/console/training/create?hl=zh-CN").text
    for words in (
        "无代管式数据集",
        "自定义训练（高级）",
        "模型名称",
        "模型输出目录",
        "计算和价格",
        "工作器池",
        "开始训练",
    ):
        assert words in page, words
    assert 'lang="zh-CN"' in page
    assert "估算，而非账单" in page  # the cost estimate follows ?hl=, not the process's language


class _VisibleText(html.parser.HTMLParser):
    """What a reader sees on a page: text outside scripts, styles and editable fields (whose
    contents are the learner's data), plus the attributes a screen reader says."""

    HIDDEN = ("script", "style", "textarea", "pre")

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag, attrs):
        self._hidden += tag in self.HIDDEN
        self.texts += [v for k, v in attrs if k in ("placeholder", "title", "aria-label") and v]

    def handle_endtag(self, tag):
        self._hidden -= tag in self.HIDDEN

    def handle_data(self, data):
        if not self._hidden and data.strip():
            self.texts.append(data.strip())


@pytest.mark.parametrize(
    "page", ["/training/create", "/training", "/training?tab=custom-jobs", "/training/x/1"]
)
def test_every_visible_string_follows_hl(console, page):
    """With ?hl=zh-CN every piece of text the page itself writes is Chinese: English is left
    only in names (products, the language switch, machine and accelerator types, the
    project's resource path) and in error messages, which stay English."""
    url = "/console" + page + ("&" if "?" in page else "?") + "hl=zh-CN"
    reader = _VisibleText()
    reader.feed(console.get(url).text)
    names = {"English", "Vertex AI", "TF_CONFIG", "ID", "GB", "(GB)", "gs://", "N/A"}
    names |= {m for m, _, _ in specs.machine_catalog()} | set(specs.KNOWN_ACCELERATORS)
    english = [
        t
        for t in reader.texts
        if re.search(r"[A-Za-z]{3,}", t)
        and not re.search(r"[\u4e00-\u9fff]", t)
        and t not in names
        and not t.startswith(("projects/", "TrainingPipeline ", "CustomJob "))
        and not re.fullmatch(r"[\w.:/-]+", t)  # a resource name, region, URI or enum value
    ]
    assert english == [], f"{page}: not translated for ?hl=zh-CN: {english}"


def test_console_durations_follow_hl():
    from labkit.local.console.views import duration

    run = {"startTime": "2026-12-04T10:00:00Z", "endTime": "2026-12-04T11:02:05Z"}
    assert duration(run) == "1 hr 2 min" and duration(run, "zh-CN") == "1 小时 2 分钟"
    run["endTime"] = "2026-12-04T10:01:05Z"
    assert duration(run) == "1 min 5 s" and duration(run, "zh-CN") == "1 分钟 5 秒"


def test_invalid_form_answers_400_with_every_error_on_its_field(console):
    form = lab_form(image_uri="", output_dir="")
    form.pools[0].replica_count = "2"
    answer = console.post("/console/training/create", data=form.to_fields())
    assert answer.status_code == 400
    assert set(client.form_errors(answer.text)) == {
        "pool0.replica_count",
        "image_uri",
        "output_dir",
    }
    assert re.search(r'name="pool0.replica_count"[^>]*aria-invalid="true"', answer.text)


# ---- the form handler on the real service (the notebook's path without a browser) ----


def wait_state(settings, name, states, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        resource = client.get_resource(settings, name)
        if resource["state"] in states:
            return resource
        time.sleep(0.3)
    raise AssertionError(f"{name} is {resource['state']}, not {states}")


def test_form_handler_starts_a_two_pool_pipeline_with_labels(local_vertex):
    settings = local_vertex.settings
    form = client.lab_form(settings, ["--sleep", "0"], model_name="console-handler-test")
    form.image_uri = DEMO_IMAGE_URI
    name = client.submit_form(settings, form)
    assert "/trainingPipelines/" in name
    done = wait_state(settings, name, {"PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_FAILED"})
    assert done["state"] == "PIPELINE_STATE_SUCCEEDED", done.get("error")
    assert done["labels"]["lab"] == "cassava"
    page = html.unescape(signed_in_get(client.page_url(settings, name), settings))
    assert "TF_CONFIG" in page and '"type": "worker"' in page and "chief-0" in page
    assert "<td>chief</td>" in page and "<td>worker</td>" in page  # the pools' roles
    chinese = signed_in_get(client.page_url(settings, name) + "?hl=zh-CN", settings)
    assert "<td>主工作器</td>" in chinese and "<td>工作器</td>" in chinese  # the glossary's terms
    assert 'title="PIPELINE_STATE_SUCCEEDED">已成功</span>' in chinese  # the badge in words
    listing = signed_in_get(client.page_url(settings), settings)
    assert "console-handler-test" in listing
    assert 'title="PIPELINE_STATE_SUCCEEDED">Succeeded</span>' in listing


# ---- the cloud walkthrough (labkit.course.walkthrough) ----


def test_walkthrough_fills_every_field_the_kit_needs_and_passes_the_core():
    from labkit.course import walkthrough

    cloud = Settings(mode="cloud", project_id="my-lab-project", region="europe-west4")
    form = walkthrough.cloud_form(cloud)
    assert specs.validate_training_pipeline(form.pipeline_body()) == []
    assert form.problems() == []
    rows = {row.field: row for row in walkthrough.fields(form)}
    assert rows["Model output directory"].enter.startswith(
        f"gs://my-lab-project-cassava-lab/console/multiworker-cassava-{cloud.run_id}"
    )
    assert rows["Model output directory"].field_zh_CN == "模型输出目录"
    assert "lab=cassava" in rows["Advanced options > Labels"].enter
    assert rows["container image"].enter == cloud.image_uri
    assert "worker count 1" in rows["worker pool 0 (chief)"].enter
    assert rows["worker pool 1 (worker)"].field_zh_CN == "工作器池 1（工作器）"
    assert rows["Advanced options > Labels"].field_zh_CN == "高级选项 > 标签"
    unnamed = [
        row.field for row in rows.values() if not re.search(r"[\u4e00-\u9fff]", row.field_zh_CN)
    ]
    assert unnamed == [], f"fields without their zh-CN console name: {unnamed}"
    assert walkthrough.training_page_url(cloud) == (
        "https://console.cloud.google.com/vertex-ai/training/training-pipelines"
        "?project=my-lab-project"
    )


def test_walkthrough_gives_every_machine_the_same_gpus():
    from labkit.course import walkthrough

    cloud = Settings(mode="cloud", project_id="my-lab-project")
    form = walkthrough.cloud_form(
        cloud, workers=3, accelerator_type="NVIDIA_TESLA_T4", accelerator_count=1
    )
    pools = form.pipeline_body()["trainingTaskInputs"]["workerPoolSpecs"]
    assert [p["replicaCount"] for p in pools] == [1, 2]
    assert {p["machineSpec"]["acceleratorType"] for p in pools} == {"NVIDIA_TESLA_T4"}
    assert [p for p in form.problems() if p.vertex_rejects] == []


def test_console_jobs_are_found_by_name_and_unlabelled_ones_cleaned_up(local_vertex):
    """Notebook 04 finds the console's job by its name through the SDK; notebook 05 deletes
    a console job whose Labels field was emptied (the label-based cleanup cannot see it)."""
    from labkit.course import walkthrough

    settings = local_vertex.settings
    labelled = client.lab_form(settings, ["--sleep", "0"], model_name=walkthrough.MODEL_NAME)
    labelled.image_uri = DEMO_IMAGE_URI
    unlabelled = client.lab_form(settings, ["--sleep", "0"], model_name=walkthrough.MODEL_NAME)
    unlabelled.image_uri = DEMO_IMAGE_URI
    unlabelled.labels = ""
    first = client.submit_form(settings, labelled)
    second = client.submit_form(settings, unlabelled)
    for name in (first, second):
        wait_state(settings, name, {"PIPELINE_STATE_SUCCEEDED"})
    assert client.find_pipeline(walkthrough.MODEL_NAME).resource_name == second  # the newest
    found = walkthrough.unlabelled_console_pipelines(settings)
    assert [p.resource_name for p in found] == [second]
    assert "no lab=cassava label" in walkthrough.describe_pipelines(found)
    assert walkthrough.delete_pipelines(found) == [second]
    assert walkthrough.unlabelled_console_pipelines(settings) == []
    assert client.find_pipeline(walkthrough.MODEL_NAME).resource_name == first


def test_labkit_console_starts_the_service_and_prints_the_page(tmp_path, assert_gone):
    import os
    import subprocess
    import sys

    from labkit.cloud.settings import load_settings
    from labkit.local import vertex_env
    from labkit.local.emulator import control

    load_settings(
        "local",
        path=tmp_path / "settings.json",
        save=True,
        emulator_port=vertex_env.free_ports(1)[0],
    )
    env = {**os.environ, "CASSAVA_LAB_HOME": str(tmp_path)}
    try:
        ran = subprocess.run(
            [sys.executable, "-m", "labkit", "console", "--no-open", "--hl", "zh-CN"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ran.returncode == 0, ran.stderr
        url = next(w for w in ran.stdout.split() if w.startswith("http://127.0.0.1:"))
        assert "/console/session?token=" in url and url.endswith(
            "next=%2Fconsole%2Ftraining%3Fhl%3Dzh-CN"
        )
        page = signed_in_get(url)
        assert "训练流水线" in page and "自定义作业" in page
    finally:
        pid = control.status(tmp_path / "vertex").pid
        control.stop(tmp_path / "vertex")
    if pid:
        assert_gone([pid])
