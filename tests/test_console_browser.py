"""The local console in a real headless Chromium (Debian's package, driven by Playwright).

`make test` installs the browser first (.ci/install-browser, apt-get as root, as on CI), so
these tests never skip there; elsewhere they skip saying how to install it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest
from conftest import DEMO_IMAGE_URI

from labkit.local.console import browser, client


def _browser_or_skip() -> None:
    reason = browser.unavailable_reason()
    if reason is None:
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        pytest.fail(f"{reason}; as root `make test` installs it (.ci/install-browser) and must")
    pytest.skip(reason)


@pytest.fixture
def page(local_vertex):
    _browser_or_skip()
    with browser.open_browser() as context:
        yield context.new_page()


def console_url(local_vertex, path: str = "/training") -> str:
    """A console page behind the sign-in link, as `labkit console` opens it."""
    return client.signed_in_url(
        local_vertex.settings, f"{client.base_url(local_vertex.settings)}{path}"
    )


def wait_for_state(page, states: set[str], timeout: float = 60) -> str:
    """Reload the job page until its state badge shows one of ``states``."""
    deadline = time.monotonic() + timeout
    while True:
        state = page.locator("#state").get_attribute("data-state")
        if state in states or time.monotonic() > deadline:
            return state
        page.wait_for_timeout(500)
        page.reload()


def test_invalid_form_shows_each_error_on_its_field(local_vertex, page):
    form = client.lab_form(local_vertex.settings, ["--sleep", "0"])
    form.image_uri = ""
    form.output_dir = ""
    form.pools[0].replica_count = "2"  # pool 0 is the chief: exactly 1
    form.pools[1].accelerator_type = "NVIDIA_TESLA_T4"  # GPUs that differ between pools
    form.pools[1].accelerator_count = "1"
    form.pools[2].machine_type = "x9-unknown-4"  # a machine the kit cannot price
    page.goto(console_url(local_vertex, "/training/create"))
    client.fill_form(page, form)
    page.locator("#step-compute h2").click()
    page.locator("#start-training").click()
    page.wait_for_selector(".field-error")
    for field, words in {
        "pool0.replica_count": "exactly 1 replica",
        "pool1.accelerator_count": "same number of GPUs",
        "pool2.machine_type": "x9-unknown-4",
        "image_uri": "image",
        "output_dir": "AIP_MODEL_DIR",
    }.items():
        message = page.locator(f'.field-error[data-field="{field}"]')
        assert message.count() == 1 and message.is_visible(), field
        assert words in message.inner_text(), (field, message.inner_text())
        assert page.locator(f'[name="{field}"]').get_attribute("aria-invalid") == "true"
    assert "trainingPipelines" not in page.url  # nothing was created
    listed = client.get_resource(
        local_vertex.settings, "projects/local-project/locations/us-central1/trainingPipelines"
    )
    assert not listed.get("trainingPipelines")


def test_the_language_switch_turns_the_page_chinese_and_keeps_it_so(local_vertex, page, tmp_path):
    """As the real console's ?hl=: the switch reloads the page in zh-CN, links keep the
    language, the cost estimate follows it, and the Chinese is drawn with a CJK font."""
    page.goto(console_url(local_vertex, "/training/create"))
    assert page.locator("html").get_attribute("lang") == "en"
    page.get_by_role("link", name="中文").click()
    page.wait_for_load_state()
    assert page.locator("html").get_attribute("lang") == "zh-CN" and "hl=zh-CN" in page.url
    text = page.locator("main").inner_text()
    for words in ("无代管式数据集", "自定义训练（高级）", "开始训练", "计算和价格"):
        assert words in text, words
    # the collapsed Compute and pricing step: pools and the estimate, in Chinese too
    assert "估算，而非账单" in page.locator("#cost-estimate").text_content()
    # the page asks for a Chinese font that this machine has (.ci/install-browser installs
    # fonts-wqy-microhei with Chromium), so the text is drawn without boxes
    families = page.evaluate("getComputedStyle(document.body).fontFamily")
    assert "WenQuanYi Micro Hei" in families
    if shutil.which("fc-list"):
        chinese_fonts = subprocess.run(
            ["fc-list", ":lang=zh", "family"], capture_output=True, text=True, check=True
        ).stdout
        assert "WenQuanYi Micro Hei" in chinese_fonts
    page.screenshot(path=str(tmp_path / "create-zh-CN.png"))
    page.get_by_role("link", name="训练").first.click()  # the sidebar keeps ?hl=
    page.wait_for_load_state()
    assert "hl=zh-CN" in page.url and "训练流水线" in page.locator("main").inner_text()


def test_cancel_a_running_job_from_its_page(local_vertex, page, assert_gone):
    form = client.lab_form(local_vertex.settings, ["--sleep", "120"], model_name="cancel-me")
    form.image_uri = DEMO_IMAGE_URI
    page.goto(console_url(local_vertex, "/training/create"))
    client.fill_form(page, form)
    with page.expect_navigation():
        page.locator("#start-training").click()
    name = page.locator("#job").get_attribute("data-name")
    assert "/trainingPipelines/" in name
    assert wait_for_state(page, {"PIPELINE_STATE_RUNNING"}) == "PIPELINE_STATE_RUNNING"
    page.wait_for_selector("section.replica pre.log")
    with page.expect_navigation():
        page.locator("#cancel").click()
    assert wait_for_state(page, {"PIPELINE_STATE_CANCELLED"}) == "PIPELINE_STATE_CANCELLED"
    backing = client.get_resource(local_vertex.settings, name)["trainingTaskMetadata"]
    job = client.get_resource(local_vertex.settings, backing["backingCustomJob"])
    assert job["state"] == "JOB_STATE_CANCELLED"


@pytest.mark.slow
def test_the_codelabs_two_pool_job_through_the_form_succeeds_and_its_model_loads(
    local_vertex, page, sample_for_jobs, tmp_path
):
    """The codelab's console route end to end: Create → the two CPU pools → Start training;
    the list shows SUCCEEDED; the job page shows the logs and the model; the model loads."""
    args = [
        *("--data", "tfds:cassava", "--data-dir", str(sample_for_jobs.tfds_data_dir)),
        *("--image-size", "32", "--batch-size", "8", "--weights", "none"),
        *("--epochs", "1", "--steps-per-epoch", "2", "--validation-steps", "1"),
    ]
    settings = local_vertex.settings
    form = client.lab_form(settings, args, model_name="multiworker-cassava-browser")
    job = client.create_in_browser(settings, form, tmp_path, context=page.context)
    assert [p.name for p in job.screenshots] == [
        client.SCREENSHOTS["create"],
        client.SCREENSHOTS["compute"],
    ]
    assert all(p.stat().st_size > 10_000 for p in job.screenshots)

    page.goto(console_url(local_vertex))
    row = page.locator(f'tr[data-name="{job.name}"]')
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        state = row.get_attribute("data-state")
        if state in ("PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_FAILED"):
            break
        page.wait_for_timeout(2000)  # the list refreshes itself while jobs run
    assert state == "PIPELINE_STATE_SUCCEEDED"
    assert "lab: cassava" in row.inner_text()

    row.locator("a").click()
    page.wait_for_selector("#files")
    chief_log = page.locator("#log-chief-0").inner_text()
    assert "[trainer] done" in chief_log
    assert (
        '"type": "worker"' in page.locator('section[data-role="worker-0"] .tf-config').inner_text()
    )
    files = page.locator("#files").inner_text()
    assert "model/savedmodel/saved_model.pb" in files

    from labkit.course.models import savedmodel_path

    resource = client.get_resource(settings, job.name)
    job_json = client.get_resource(settings, resource["trainingTaskMetadata"]["backingCustomJob"])
    model_dir = f"{job_json['labkitLocal']['localOutputDirectory']}/model"
    import tensorflow as tf

    model = tf.saved_model.load(savedmodel_path(model_dir))
    assert model.signatures
