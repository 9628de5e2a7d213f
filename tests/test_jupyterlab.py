"""Notebook 03 the way a learner runs it: in JupyterLab, in a browser, cell by cell.

JupyterLab is started from the checkout with the arguments `make jupyter` uses
(`labkit.course.jupyterlab.server_argv`, the kit's settings: the edition's language, no news
prompt) on a copy of the notebooks (JupyterLab saves what it runs). Debian's Chromium, driven
by Playwright, opens 03 in each edition; the notebook must start in the kit's kernel, which
`make venv` registers. Shift+Enter runs the cells up to the first exercise's check with the
learner's blank answer; the check's hint must be in the edition's language. Then the
solution is typed into the exercise cell's editor and the check must pass. Screenshots of
both moments go to ``runs/tests/jupyterlab/`` (recorded as the test's ``screenshot``
properties in pytest's report).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from labkit.cloud import paths
from labkit.cloud.settings import load_settings
from labkit.cloud.setup_checks import KIT_ENV_NAME, kernel_registered
from labkit.course import jupyterlab
from labkit.course.lab import NOTEBOOK_DIR
from labkit.local.console import browser
from labkit.local.vertex_env import free_ports

NOTEBOOK = "03_mwms_trainer.ipynb"
CHECK_CELL = "ex-strategy-check"
SOLUTION = "def create_strategy():\n    return tf.distribute.MultiWorkerMirroredStrategy()\n"
SCREENSHOTS = paths.REPO_ROOT / "runs" / "tests" / "jupyterlab"
# What each edition's check says: (the blank answer's outcome, its hint, the passed outcome).
EXPECTED = {
    "en": ("create_strategy: not yet (0 of 1 cases right)", "hint: returned None (is the body",
           "create_strategy: passed (1 of 1 cases right)"),
    "zh-CN": ("create_strategy：尚未通过（1 个用例中 0 个正确）", "提示：返回了 None（函数体",
              "create_strategy：通过（1 个用例中 1 个正确）"),
}  # fmt: skip
START_TIMEOUT_S = 90
CELL_TIMEOUT_MS = 240_000  # the first cells import TensorFlow on a busy CI core

pytestmark = pytest.mark.skipif(
    browser.unavailable_reason() is not None, reason=str(browser.unavailable_reason())
)


@contextlib.contextmanager
def jupyterlab_server(lang: str, root: Path, home: Path) -> Iterator[str]:
    """JupyterLab serving ``root`` as `make jupyter` would; yields its URL with the token,
    and stops it (its kernels with it) whatever happens."""
    port, token = free_ports(1)[0], secrets.token_hex(16)
    argv = jupyterlab.server_argv(
        lang,
        root,
        settings_dir=jupyterlab.write_settings(lang, home),
        port=port,
        token=token,
        open_browser=False,
    )
    env = {
        **os.environ,
        "CASSAVA_LAB_HOME": str(home),
        "PYTHONUNBUFFERED": "1",
        # the learner's own JupyterLab state (open tabs, settings) is neither read nor written
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "jupyterlab-workspaces"),
        "JUPYTERLAB_SETTINGS_DIR": str(home / "jupyterlab-user-settings"),
    }
    log = (home / f"jupyterlab-{lang}.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", *argv], env=env, stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"JupyterLab did not start: {(home / f'jupyterlab-{lang}.log').read_text()}"
                    ) from None
                time.sleep(0.5)
        yield f"{url}/lab/tree/{{path}}?token={token}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture
def served(tmp_path, sample_for_jobs):
    """A copy of both editions of 03 and a lab home with the sample (03's settings cell reads
    its size); the run folder that cell makes under runs/ is removed afterwards."""
    from lab_runs import make_lab_home

    root = tmp_path / "notebooks"
    (root / "zh-CN").mkdir(parents=True)
    shutil.copy(NOTEBOOK_DIR / NOTEBOOK, root / NOTEBOOK)
    shutil.copy(NOTEBOOK_DIR / "zh-CN" / NOTEBOOK, root / "zh-CN" / NOTEBOOK)
    home = tmp_path / "home"
    make_lab_home(home, sample_for_jobs)
    settings = load_settings(path=home / "settings.json")
    yield root, home
    shutil.rmtree(paths.REPO_ROOT / "runs" / settings.run_id, ignore_errors=True)


def cells_before_the_check(path: Path) -> int:
    """How many cells Shift+Enter runs through, from the first to the check cell itself."""
    ids = [cell.get("id") for cell in nbformat.read(str(path), as_version=4).cells]
    return ids.index(CHECK_CELL) + 1


ACTIVE_CELL_INDEX_JS = (
    "() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')]"
    ".findIndex(cell => cell.classList.contains('jp-mod-active'))"
)
# Each code cell's prompt ("[3]:", "[*]:") and its error output, if any: what a learner
# would look at when the expected output never came.
CELL_STATES_JS = """() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')].map((cell, i) => {
    const prompt = cell.querySelector('.jp-InputPrompt')?.textContent.trim() ?? '';
    const error = cell.querySelector('[data-mime-type="application/vnd.jupyter.stderr"]');
    return `code cell ${i}: ${prompt} ${error ? error.textContent.slice(-400) : ''}`;
})"""


def run_up_to_the_check(page, presses: int) -> None:
    """Shift+Enter ``presses`` times, each only once JupyterLab has moved to the next cell:
    keys typed while the page is still busy are otherwise lost (seen once on CI, where
    the check cell then never ran)."""
    page.locator(".jp-Notebook .jp-Cell").first.click()
    page.keyboard.press("Escape")  # command mode, as after a click on the cell's margin
    for index in range(presses):
        page.keyboard.press("Shift+Enter")
        page.wait_for_function(f"() => ({ACTIVE_CELL_INDEX_JS})() >= {index + 1}", timeout=30_000)


def check_output(page, text: str):
    output = page.locator(".jp-OutputArea-output", has_text=text).last
    try:
        output.wait_for(timeout=CELL_TIMEOUT_MS)
    except Exception as error:
        states = "\n".join(page.evaluate(CELL_STATES_JS))
        raise AssertionError(f"no output {text!r}; the notebook's code cells:\n{states}") from error
    return output


def fill_in_the_solution(page) -> None:
    editor = page.locator(".jp-CodeCell .cm-content", has_text="def create_strategy").first
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(SOLUTION)
    page.keyboard.press("Shift+Enter")  # runs the exercise cell, moves to its check
    page.keyboard.press("Shift+Enter")  # runs the check


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_a_learner_runs_03_in_jupyterlab_reads_the_hint_and_passes(lang, served, record_property):
    assert kernel_registered(KIT_ENV_NAME), "run `make venv`: it registers the kit's kernel"
    root, home = served
    notebook = NOTEBOOK if lang == "en" else f"zh-CN/{NOTEBOOK}"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with jupyterlab_server(lang, root, home) as url, browser.open_browser() as context:
        page = context.new_page()
        try:
            learner_session(page, url.format(path=notebook), root / notebook, lang, record_property)
        except Exception:
            page.screenshot(path=str(SCREENSHOTS / f"03-{lang}-failed.png"))
            raise


def learner_session(page, url: str, path: Path, lang: str, record_property) -> None:
    """Open 03, run it to the first check with the blank answer, read the hint, solve it."""
    blank, hint, passed = EXPECTED[lang]
    page.goto(url)
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=60_000)
    kernel = page.locator(".jp-Toolbar-kernelName").first
    kernel.wait_for(timeout=60_000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.jp-Toolbar-kernelName')]"
        f".some(e => e.textContent.includes('Python ({KIT_ENV_NAME})'))",
        timeout=60_000,
    )
    if lang == "zh-CN":  # JupyterLab's own menus, from the pinned language pack
        page.locator(".lm-MenuBar-itemLabel", has_text="文件").first.wait_for(timeout=30_000)
    assert page.locator("text=official Jupyter news").count() == 0
    run_up_to_the_check(page, cells_before_the_check(path))
    output = check_output(page, blank)
    assert hint in output.inner_text()
    shot = SCREENSHOTS / f"03-{lang}-hint.png"
    page.screenshot(path=str(shot))
    record_property(f"screenshot-{lang}-hint", str(shot))
    fill_in_the_solution(page)
    check_output(page, passed)
    assert page.locator("text=official Jupyter news").count() == 0  # not even minutes later
    shot = SCREENSHOTS / f"03-{lang}-passed.png"
    page.screenshot(path=str(shot))
    record_property(f"screenshot-{lang}-passed", str(shot))
