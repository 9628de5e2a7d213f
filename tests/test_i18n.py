"""The zh-CN edition: one source of code, translations that cannot drift unnoticed, the kit's
own output in the edition's language, and Chinese charts without missing glyphs."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import matplotlib
import nbformat
import numpy as np
import polib
import pytest

from labkit import i18n
from labkit.cloud import paths
from labkit.i18n import fonts, notebooks

matplotlib.use("Agg")

from labkit.course import plots  # noqa: E402  (after the backend is chosen)

CATALOG = i18n.catalog_path("zh-CN")
# The terms issue 17 names: Google's zh-CN console words as the codelab uses them.
ISSUE_TERMS = {
    "worker_pool": "工作器池",
    "chief": "主工作器",
    "custom_training_advanced": "自定义训练（高级）",
    "no_managed_dataset": "无代管式数据集",
    "training_pipelines": "训练流水线",
    "model_output_directory": "模型输出目录",
    "custom_jobs": "自定义作业",
}
# Glossary terms whose zh-CN word must appear wherever a translated text uses the English one.
CHECKED_TERMS = (
    "worker_pool",
    "chief",
    "custom_training_advanced",
    "no_managed_dataset",
    "training_pipelines",
    "custom_jobs",
    "custom_container",
    "training_container",
    "parameter_server",
    "evaluator",
    "bucket",
    "replica",
    "idle_shutdown",
    "transfer_learning",
)


@pytest.fixture
def zh():
    i18n.set_language("zh-CN")
    yield
    i18n.set_language(None)


# --------------------------------------------------------------------------- API, glossary


def test_languages_normalise_and_unknown_ones_are_refused():
    assert i18n.normalize_language("zh_CN") == "zh-CN" == i18n.normalize_language("zh-cn")
    assert i18n.normalize_language(None) == "en" == i18n.normalize_language("en-US")
    assert i18n.normalize_language("fr", strict=False) == "en"  # what ?hl=fr falls back to
    with pytest.raises(ValueError, match="zh-CN"):
        i18n.normalize_language("fr")


def test_edition_follows_set_language_env_and_the_notebook_folder(monkeypatch, tmp_path):
    monkeypatch.delenv(i18n.ENV_VAR, raising=False)
    folder = tmp_path / "notebooks" / "zh-CN"
    folder.mkdir(parents=True)
    monkeypatch.chdir(folder)  # a kernel started for notebooks/zh-CN/*.ipynb
    assert i18n.current_language() == "zh-CN"
    monkeypatch.setenv(i18n.ENV_VAR, "en")
    assert i18n.current_language() == "en"
    try:
        assert i18n.set_language("zh-CN") == "zh-CN"
    finally:
        i18n.set_language(None)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(i18n.ENV_VAR)
    assert i18n.current_language() == "en"
    (folder / "sub").mkdir()
    monkeypatch.chdir(folder / "sub")  # only the notebook's own folder counts
    assert i18n.current_language() == "en"


def test_using_sets_the_language_of_one_block_only():
    assert i18n.current_language() == "en"
    with i18n.using("zh-CN") as lang:
        assert lang == "zh-CN" and i18n.gettext("epoch") == "周期"
        with i18n.using("en"):
            assert i18n.gettext("epoch") == "epoch"
        assert i18n.term("worker_pool") == "工作器池"
    assert i18n.current_language() == "en"


def test_translator_and_terms():
    t = i18n.translator("zh-CN")
    assert t.gettext("epoch") == "周期" and t.term("chief") == "主工作器"
    assert t.gettext("a message nobody translated") == "a message nobody translated"
    assert i18n.translator("en").gettext("epoch") == "epoch"
    try:  # the default follows the edition at each call
        i18n.set_language("zh-CN")
        assert i18n.translator().lang == "zh-CN"
        i18n.set_language("en")
        assert i18n.translator().lang == "en"
    finally:
        i18n.set_language(None)
    assert i18n.gettext("Class share (%)", "zh-CN") == "类别占比（%）"
    assert t.ngettext("yes", "no", 2) == "否"
    with pytest.raises(KeyError, match="glossary.csv"):
        i18n.term("no such term")


def test_glossary_holds_the_issue_terms_once_each():
    terms = i18n.glossary()
    for key, word in ISSUE_TERMS.items():
        assert terms[key].zh_CN == word, key
        assert terms[key].where and terms[key].source, key
    zh_words = [t.zh_CN for t in terms.values() if t.key not in ("custom_job", "custom_jobs")]
    assert len(zh_words) == len(set(zh_words)), "one zh-CN word per English term"
    for key in CHECKED_TERMS:
        assert key in terms


def test_issue_terms_from_the_seed_are_the_codelabs_words():
    seed = paths.REPO_ROOT.parent / "shared" / "seed" / "000_d01f41a94014fbba.txt"
    if not seed.is_file():
        pytest.skip("the codelab text (shared/seed) is not beside this checkout")
    text = seed.read_text(encoding="utf-8")
    for key, word in ISSUE_TERMS.items():
        if key != "model_output_directory":  # a console field the codelab does not show
            assert word in text, f"{key}: {word} is not the codelab's word"


# --------------------------------------------------------------------------- catalog


def _gettext_calls() -> dict[str, list[str]]:
    """Every literal message the kit passes to _() / gettext(), with where it is."""
    found: dict[str, list[str]] = {}
    for path in sorted((paths.REPO_ROOT / "labkit").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            arg = node.args[0]
            if (
                name in ("_", "gettext", "tr", "N_")
                and isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
            ):
                found.setdefault(arg.value, []).append(f"{path.name}:{node.lineno}")
    from jinja2.ext import babel_extract  # the console's templates: _("...") in Jinja

    for path in sorted((paths.REPO_ROOT / "labkit").rglob("templates/*.html")):
        with path.open("rb") as handle:
            for lineno, _func, message, _notes in babel_extract(handle, ("_", "gettext"), [], {}):
                if isinstance(message, str):
                    found.setdefault(message, []).append(f"{path.name}:{lineno}")
    return found


def test_every_message_in_the_code_is_translated():
    po = {e.msgid: e for e in polib.pofile(str(CATALOG))}
    missing = {
        msgid: where
        for msgid, where in _gettext_calls().items()
        if msgid not in po or not po[msgid].msgstr or "fuzzy" in po[msgid].flags
    }
    assert not missing, f"add these to {CATALOG}: {missing}"


def test_catalog_placeholders_match():
    for entry in polib.pofile(str(CATALOG)):
        fields = sorted(re.findall(r"\{[^{}]*\}", entry.msgid))
        assert sorted(re.findall(r"\{[^{}]*\}", entry.msgstr)) == fields, entry.msgid


def _uses(english: str, term: i18n.Term) -> bool:
    words = re.escape(term.en.lower()).replace(r"\ ", r"[\s-]+")
    # not inside a word, `code` or a {placeholder}
    pattern = r"(?<![\w`{])" + words + r"(e?s)?(?![\w`}])"
    return re.search(pattern, english.lower()) is not None


def _without_code(text: str) -> str:
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    return re.sub(r"`[^`]*`", " ", text)


def _zh_cn_texts() -> list[tuple[str, str]]:
    """(where, text) for every zh-CN text a learner reads: the zh-CN notebooks' markdown and
    the comments and docstrings of their code cells, the catalog's translations, the glossary's
    zh-CN terms and README's Chinese lines; code spans and fences left out."""
    found = []
    for path in notebooks.english_notebooks():
        zh = nbformat.read(str(notebooks.edition_dir("zh-CN") / path.name), as_version=4)
        for cell in zh.cells:
            if cell.cell_type == "markdown":
                text = cell.source
            else:
                comments = [
                    line.split("#", 1)[1] for line in cell.source.splitlines() if "#" in line
                ]
                text = "\n".join(comments + re.findall(r'"""(.*?)"""', cell.source, flags=re.S))
            found.append((f"notebooks/zh-CN/{path.name} cell {cell.id}", _without_code(text)))
    for entry in polib.pofile(str(CATALOG)):
        found.append((f"labkit.po msgid {entry.msgid[:50]!r}", _without_code(entry.msgstr)))
    for t in i18n.glossary().values():
        found.append((f"glossary.csv {t.key}", t.zh_CN))
    readme = (paths.REPO_ROOT / "README.md").read_text(encoding="utf-8")
    for number, line in enumerate(readme.splitlines(), 1):
        if re.search(r"[\u4e00-\u9fff]", line):
            found.append((f"README.md line {number}", _without_code(line)))
    return found


def _replaced_word(word: str) -> re.Pattern[str]:
    """A Latin word (cassava) only as a word of prose, not in lab=cassava or cassava-mwms."""
    if word.isascii():
        return re.compile(r"(?<![\w=/.-])" + re.escape(word) + r"(?![\w/.-])", re.I)
    return re.compile(re.escape(word))


def test_zh_cn_text_uses_one_term_per_concept():
    """Issue 29 item 3: the glossary's term, never a word it replaces (副本数 for 工作器计数,
    临时副本 for 临时拷贝, 映像代码库 for Artifact Registry 代码库, cassava for 木薯, ...)."""
    replaced = [(t, w, _replaced_word(w)) for t in i18n.glossary().values() for w in t.replaces]
    assert replaced, "glossary.csv lists no replaced words"
    bad = [
        f"{where}: {word!r} -> {t.zh_CN!r} ({t.key})"
        for where, text in _zh_cn_texts()
        for t, word, pattern in replaced
        if pattern.search(text)
    ]
    assert not bad, "use the glossary's term:\n" + "\n".join(bad)


# Column headers whose English plural names a count, not the thing: "replicas" over a column
# of replica counts is the console's 工作器计数 (glossary replica_count), not 副本.
COUNT_HEADERS = {"replicas": "replica_count"}


def test_catalog_uses_the_glossary_terms():
    terms = i18n.glossary()
    for entry in polib.pofile(str(CATALOG)):
        if entry.msgid in COUNT_HEADERS:
            assert entry.msgstr == terms[COUNT_HEADERS[entry.msgid]].zh_CN, entry.msgid
            continue
        for key in CHECKED_TERMS:
            if _uses(entry.msgid, terms[key]):
                assert terms[key].zh_CN in entry.msgstr, (entry.msgid, terms[key].zh_CN)


# --------------------------------------------------------------------------- notebooks


def test_every_english_notebook_has_a_zh_cn_edition_with_identical_code():
    english = notebooks.english_notebooks()
    assert len(english) == 6
    for path in english:
        edition = notebooks.edition_dir("zh-CN") / path.name
        assert edition.is_file(), f"run `python -m labkit i18n sync`: {edition} is missing"
        en, zh = (nbformat.read(str(p), as_version=4) for p in (path, edition))
        nbformat.validate(zh)
        problems = notebooks.structure_problems(en, zh)
        assert not problems, f"{path.stem}: {problems}; run `python -m labkit i18n sync`"
        assert [
            notebooks.code_fingerprint(c.source) for c in en.cells if c.cell_type == "code"
        ] == [notebooks.code_fingerprint(c.source) for c in zh.cells if c.cell_type == "code"]


def test_zh_cn_parameters_and_exercise_cells_read_in_chinese():
    """What a Chinese learner reads and edits in a code cell, the comments of the parameters
    cells and the exercises' docstrings, is Chinese; the code around it is the English."""
    for path in notebooks.english_notebooks():
        zh = nbformat.read(str(notebooks.edition_dir("zh-CN") / path.name), as_version=4)
        for cell in zh.cells:
            tags = cell.metadata.get("tags", [])
            if cell.cell_type == "code" and ({"parameters", "exercise"} & set(tags)):
                comments = [ln.split("#", 1)[1] for ln in cell.source.splitlines() if "#" in ln]
                assert any(re.search(r"[\u4e00-\u9fff]", c) for c in comments) or re.search(
                    r'"""[^"]*[\u4e00-\u9fff]', cell.source
                ), f"{path.stem} cell {cell.id} ({tags}) is not translated"


def test_a_changed_token_in_a_translated_code_cell_is_named(tmp_path):
    """Comments and docstrings may differ between the editions, one token may not: the
    drift check names the cell, and storing such a "translation" is refused."""
    en_dir = _copy_lab(tmp_path)
    zh_path = en_dir / "zh-CN" / "03_mwms_trainer.ipynb"
    en = nbformat.read(str(en_dir / "03_mwms_trainer.ipynb"), as_version=4)
    exercise = next(c for c in en.cells if c.get("id") == "ex-strategy")
    commented = exercise.source.replace('"""', '"""已翻译的说明。', 1) + "\n# 一行中文注释"
    notebooks.record_translations("03", {"ex-strategy": (None, commented)}, en_dir=en_dir)
    zh = nbformat.read(str(zh_path), as_version=4)
    assert notebooks.structure_problems(en, zh) == []

    def change_a_token(nb, cell):
        cell.source = cell.source.replace("...", "return None")

    _edit(zh_path, "ex-strategy", change_a_token)
    problems = notebooks.structure_problems(en, nbformat.read(str(zh_path), as_version=4))
    assert [(p[1], p[2].split(":")[0]) for p in problems] == [
        ("ex-strategy", "code differs (comments and docstrings aside)")
    ]
    with pytest.raises(ValueError, match="ex-strategy: the translation changes the code"):
        notebooks.record_translations(
            "03", {"ex-strategy": (None, commented.replace("...", "pass"))}, en_dir=en_dir
        )


def test_every_zh_cn_text_cell_translates_the_current_english():
    stale = notebooks.stale("zh-CN")
    assert not stale, "translate these, then `python -m labkit i18n reviewed NB CELL_ID`:\n" + (
        "\n".join(s.describe() for s in stale)
    )


def test_zh_cn_prose_is_chinese_and_uses_the_glossary():
    terms = i18n.glossary()
    for path in notebooks.english_notebooks():
        en = nbformat.read(str(path), as_version=4)
        zh = nbformat.read(str(notebooks.edition_dir("zh-CN") / path.name), as_version=4)
        for e, z in zip(en.cells, zh.cells, strict=True):
            if e.cell_type != "markdown":
                continue
            where = f"{path.stem} cell {e.id}"
            assert re.search(r"[\u4e00-\u9fff]", z.source), f"{where} is not translated"
            for key in CHECKED_TERMS:
                if _uses(_without_code(e.source), terms[key]):
                    assert terms[key].zh_CN in z.source, f"{where}: use {terms[key].zh_CN}"


def _copy_lab(tmp_path: Path) -> Path:
    """A copy of both editions in which every translation is current (whatever the state of
    the working tree), so a test sees only the drift it makes itself."""
    en_dir = tmp_path / "notebooks"
    shutil.copytree(notebooks.EN_DIR, en_dir, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    notebooks.sync("zh-CN", None, en_dir)
    pending: dict[str, dict] = {}
    for state in notebooks.stale("zh-CN", en_dir):
        pending.setdefault(state.notebook, {})[state.cell_id] = (None, None)
    for name, cells in pending.items():
        notebooks.record_translations(name, cells, en_dir=en_dir)
    assert notebooks.stale("zh-CN", en_dir) == []
    return en_dir


def _edit(path: Path, cell_id: str, change) -> None:
    nb = nbformat.read(str(path), as_version=4)
    cell = next(c for c in nb.cells if c.id == cell_id)
    change(nb, cell)
    nbformat.write(nb, str(path))


def test_a_changed_english_cell_is_named_until_its_translation_is_reviewed(tmp_path, capsys):
    en_dir = _copy_lab(tmp_path)
    assert notebooks.stale("zh-CN", en_dir) == []
    nb_path = en_dir / "03_mwms_trainer.ipynb"
    text_cell = next(
        c for c in nbformat.read(str(nb_path), as_version=4).cells if c.cell_type == "markdown"
    )

    def reword(nb, cell):
        cell.source += "\n\nA sentence added on purpose."

    _edit(nb_path, text_cell.id, reword)
    found = notebooks.stale("zh-CN", en_dir)
    assert [(s.notebook, s.cell_id, s.state) for s in found] == [
        ("03_mwms_trainer", text_cell.id, "stale")
    ]
    assert f"03_mwms_trainer cell 0 (id {text_cell.id}): stale" in found[0].describe()

    # the same through the command a translator runs
    from labkit.i18n import cli

    assert cli.main(["--source", str(en_dir), "stale"]) == 1
    assert f"03_mwms_trainer cell 0 (id {text_cell.id}): stale" in capsys.readouterr().out

    # reviewing (the translator updated the Chinese) makes it current again
    notebooks.record_translations(
        "03", {text_cell.id: (None, "# 03 · 编写多工作器训练器\n\n新加的一句。")}, en_dir=en_dir
    )
    assert notebooks.stale("zh-CN", en_dir) == []


def test_changed_code_goes_to_the_edition_unchanged_and_new_text_is_untranslated(tmp_path):
    en_dir = _copy_lab(tmp_path)
    nb_path = en_dir / "05_cleanup.ipynb"
    nb = nbformat.read(str(nb_path), as_version=4)
    code = next(c for c in nb.cells if c.cell_type == "code" and "cleanup.cleanup" in c.source)
    position = nb.cells.index(code)
    code.source += "\nprint('one more line')"
    new = nbformat.v4.new_markdown_cell("## A new step\n\nExplained in English first.")
    nb.cells.insert(position, new)
    nbformat.write(nb, str(nb_path))

    states = {s.state for s in notebooks.stale("zh-CN", en_dir)}
    assert states == {"untranslated", "out-of-sync"}
    (report,) = notebooks.sync("zh-CN", ["05"], en_dir)
    assert report.written
    zh = nbformat.read(str(en_dir / "zh-CN" / "05_cleanup.ipynb"), as_version=4)
    assert notebooks.structure_problems(nbformat.read(str(nb_path), as_version=4), zh) == []
    assert [(s.cell_id, s.state) for s in notebooks.stale("zh-CN", en_dir)] == [
        (new.id, "untranslated")
    ]
    # the other translations survived the sync
    assert sum(s.state == "ok" for s in notebooks.status("zh-CN", en_dir)) > 60


def test_a_translation_survives_its_english_cell_being_recreated(tmp_path):
    en_dir = _copy_lab(tmp_path)
    nb_path = en_dir / "01_data_exploration.ipynb"
    nb = nbformat.read(str(nb_path), as_version=4)
    index, old = next((i, c) for i, c in enumerate(nb.cells) if c.cell_type == "markdown")
    nb.cells[index] = nbformat.v4.new_markdown_cell(old.source)  # same text, new id
    nbformat.write(nb, str(nb_path))
    notebooks.sync("zh-CN", ["01"], en_dir)
    assert notebooks.stale("zh-CN", en_dir) == []


def test_sync_of_the_committed_editions_changes_nothing(tmp_path):
    en_dir = tmp_path / "notebooks"
    shutil.copytree(notebooks.EN_DIR, en_dir, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    reports = notebooks.sync("zh-CN", None, en_dir)
    assert [r.notebook for r in reports if r.written] == []


# --------------------------------------------------------------------------- output


def test_kit_tables_and_summaries_follow_the_edition(zh, capsys, tmp_path):
    from labkit.cloud import cleanup
    from labkit.course import results, views

    table = views.Table([{"setting": "mode", "value": "local"}, {"setting": "bucket"}])
    assert "<th>设置</th>" in table._repr_html_() and "存储桶" in repr(table)
    results.record(tmp_path, "x", 1)
    assert capsys.readouterr().out.startswith("已将 'x' 记录到")
    reminder = cleanup.workbench_reminder(type("S", (), {"mode": "local", "project_id": None})())
    assert reminder.startswith("提醒") and "gcloud workbench instances stop" in reminder
    i18n.set_language("en")
    assert "<th>setting</th>" in table._repr_html_()


CHINESE = re.compile(r"[\u4e00-\u9fff]")


def test_text_tables_align_chinese_cells_by_display_width():
    table = i18n.text_table(["pool", "角色", "n"], [[0, "主工作器", 1], [1, "worker", 12]], "<<>")
    lines = table.splitlines()
    # the right-aligned last column ends at the same display column on every line, the
    # second column starts at the same one (len() would count 主工作器 as 4, not 8)
    assert [i18n.display_width(line) for line in lines] == [18, 18, 18]
    starts = [
        line[: line.index(cell)]
        for line, cell in zip(lines, ["角色", "主工作器", "worker"], strict=True)
    ]
    assert {i18n.display_width(s) for s in starts} == {6}
    assert i18n.display_width("主工作器") == 8 and i18n.display_width("worker") == 6
    with pytest.raises(ValueError, match="2 cells for 3 columns"):
        i18n.text_table(["a", "b", "c"], [[1, 2]])


def test_wcwidth_is_pinned_in_both_dependency_files():
    import wcwidth  # noqa: F401  (installed from the pins)

    assert '"wcwidth==' in (paths.REPO_ROOT / "pyproject.toml").read_text()
    assert "- wcwidth==" in (paths.REPO_ROOT / "environment.yml").read_text()


def _cost_text() -> str:
    from labkit.cloud.cost import estimate_cost

    machine = {"machine_type": "n1-standard-8", "accelerator_type": "NVIDIA_TESLA_V100"}
    pool = {"replica_count": 1, "machine_spec": {**machine, "accelerator_count": 1}}
    pool["container_spec"] = {"image_uri": "us-central1-docker.pkg.dev/p/r/i:t"}
    return str(estimate_cost([pool, pool], hours=0.55))


def _kit_output() -> dict[str, str]:
    """Every learner-facing text these modules print, in the active edition."""
    from labkit.cloud import images, setup_checks
    from labkit.cloud.settings import Settings
    from labkit.course import claims, faultdemo, sample, walkthrough

    cloud = Settings(mode="cloud", project_id="p")
    counts = {s: {c: 3 for c in sample.CLASSES} for s in sample.SPLITS}
    check = setup_checks.environment_checks(prefix="/usr")
    plan = faultdemo.FaultPlan(workers=2, epochs=3, steps_per_epoch=4, fault_step=6)
    pipeline = {"name": "x", "trainingTaskInputs": {}}
    return {
        "cost": _cost_text(),
        "sample.format_counts": sample.format_counts(counts),
        "setup_checks.message": setup_checks.ApiCheck(
            "p", [], ["compute.googleapis.com"]
        ).message(),
        "setup_checks.ok": setup_checks.ApiCheck("p", [], []).message(),
        "setup_checks.advice": check.summary(),
        "setup_checks.rows": repr(i18n_table(check.rows())),
        "setup_checks.api_rows": repr(i18n_table(setup_checks.api_rows())),
        "images.publish_plan": str(images.publish_plan(cloud)),
        "plots.describe_figure": plots.describe_figure(
            plots.compare_runs({"baseline": {"images_per_sec": 1.0}, "3 workers": {}})
        ),
        "walkthrough": repr(walkthrough.walkthrough(cloud)),
        "walkthrough.compare_routes": repr(walkthrough.compare_routes(pipeline, {"name": "y"})),
        "walkthrough.describe_pipelines": walkthrough.describe_pipelines([]),
        "claims": "\n".join(
            [claims.accuracy_vs_chance(0.5, 5), claims.speedup({"images_per_sec": 1}, {})]
        ),
        "faultdemo": plan.describe(),
    }


def i18n_table(rows: list[dict]) -> object:
    from labkit.course.views import Table

    return Table(rows)


def test_kit_output_is_chinese_in_zh_cn_and_english_by_default(monkeypatch, tmp_path):
    monkeypatch.delenv(i18n.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    english = _kit_output()
    for name, text in english.items():
        if name != "walkthrough":  # it names each console field in both languages
            assert not CHINESE.search(text), f"{name} (English edition): {text}"
    with i18n.using("zh-CN"):
        chinese = _kit_output()
    for name, text in chinese.items():
        assert CHINESE.search(text) and text != english[name], f"{name} (zh-CN): {text}"
    # the glossary's words where the English has the term
    assert "工作器池" in chinese["cost"] and "主工作器" in chinese["cost"]
    assert "训练流水线" in chinese["walkthrough"]
    # the kit's own words are gone from zh-CN lines (names, commands and values stay)
    for name in ("cost", "setup_checks.advice", "setup_checks.message", "faultdemo"):
        leftovers = set(re.findall(r"\b(?:the|and|with|not|for|per)\b", chinese[name]))
        assert not leftovers, f"{name}: English words {leftovers} in {chinese[name]}"


def _status_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The status lines the notebooks print through the kit (00's run, devices, the lab
    summary, the cleanup list), in the active edition."""
    import contextlib
    import io

    from labkit.cloud import cleanup
    from labkit.cloud.settings import Settings
    from labkit.course import lab, readiness

    def printed(call) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            call()
        return out.getvalue()

    settings = Settings(mode="local", project_id="p")
    run = lab.LabRun(
        tmp_path,
        [lab.NotebookRun("00_environment_setup", "ok", 1.0), lab.NotebookRun("01", "skipped")],
    )
    item = cleanup.Item("local folder", "/tmp/x", "1 MB", "remove", lambda: None)
    return {
        "readiness.show_run": printed(lambda: readiness.show_run(settings, "auto", tmp_path)),
        "readiness.show_devices": printed(readiness.show_devices),
        "lab.format_summary": lab.format_summary(run),
        "cleanup.Item.line": item.line(),
    }


def test_notebook_status_lines_follow_the_edition(tmp_path, monkeypatch):
    monkeypatch.delenv(i18n.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    english = _status_lines(tmp_path, monkeypatch)
    assert english["readiness.show_run"].startswith("mode: local (MODE='auto')")
    assert english["lab.format_summary"].splitlines()[0] == (
        "notebook                   status    wall time"
    )
    assert english["cleanup.Item.line"].startswith("local folder     /tmp/x  [1 MB] -> remove")
    for name, text in english.items():
        assert not CHINESE.search(text), f"{name} (English edition): {text}"
    with i18n.using("zh-CN"):
        chinese = _status_lines(tmp_path, monkeypatch)
    for name, text in chinese.items():
        assert CHINESE.search(text) and text != english[name], f"{name} (zh-CN): {text}"
    table = chinese["lab.format_summary"].splitlines()[:4]
    # the status column starts at one display column in every row, whatever the language
    starts = {
        i18n.display_width(row[: row.index(cell)])
        for row, cell in zip(table, ("状态", "通过", "已跳过", "失败"), strict=True)
    }
    assert len(starts) == 1, table
    assert i18n.display_width(chinese["cleanup.Item.line"].split(" /tmp/x")[0]) == 16


def test_messages_in_notebook_code_cells_are_translated():
    """Lines a notebook's own cell prints go through ``gettext("...")`` (code cells are the
    same in both editions; not ``_``, which a throwaway ``_`` in a cell would shadow); each
    literal needs its zh-CN entry, like the kit's own messages."""
    po = {e.msgid: e.msgstr for e in polib.pofile(str(CATALOG)) if "fuzzy" not in e.flags}
    missing = {}
    for path in sorted(notebooks.EN_DIR.glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "code":
                continue
            for node in ast.walk(ast.parse(cell.source)):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id in ("_", "gettext")
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and not po.get(node.args[0].value)
                ):
                    missing[node.args[0].value] = f"{path.name} cell {cell.id}"
    assert not missing, f"add these to {CATALOG}: {missing}"


def test_english_cost_table_keeps_its_layout():
    """Notebook 04's nbval reference pins this layout (fixed column widths)."""
    lines = _cost_text().splitlines()
    assert lines[1] == ("pool role     item                  qty     unit/h   per hour      total")
    assert lines[2].startswith("0    chief    n1-standard-8           1     0.4370     0.4370")


def test_zh_cn_tables_line_up(zh):
    from labkit.course import sample

    lines = _cost_text().splitlines()[1:7]
    widths = {i18n.display_width(line.split(" [")[0].rstrip()) for line in lines[1:]}
    assert len(widths) == 1, lines  # the number columns end at the same display column
    counts = {s: {c: 10 for c in sample.CLASSES} for s in sample.SPLITS}
    table = sample.format_counts(counts).splitlines()
    assert table[0].startswith("数据拆分") and len({i18n.display_width(x) for x in table}) == 1


def test_data_messages_have_translations():
    """Strings the kit translates from data, not literals (the scan above cannot see them):
    the price table's provenance and caveats, the APIs' descriptions, split and run names."""
    from labkit.cloud import permissions, setup_checks
    from labkit.cloud.specs import load_price_table
    from labkit.course import sample

    table = load_price_table()
    data = [table.source, table.training_read, table.excludes, table.spot]
    data += [table.workbench["read"], table.artifact_registry["read"]]
    data += [api.used_for for api in setup_checks.REQUIRED_APIS]
    data += [need.step for need in permissions.LAB_NEEDS]
    data += list(sample.SPLITS)  # the rows of the sample's table and the charts' legends
    data += ["codelab", "this run", "baseline"]  # run and resize labels the notebooks pass
    po = {e.msgid: e.msgstr for e in polib.pofile(str(CATALOG)) if e.msgstr}
    assert [m for m in data if m not in po] == [], "add these to the zh-CN catalog"


def _zh_charts() -> dict[str, object]:
    rng = np.random.default_rng(0)
    names = ["cbb", "cbsd", "cgm", "cmd", "healthy"]
    image = rng.integers(0, 255, (40, 60, 3), dtype=np.uint8)
    history = {"loss": [1.5, 1.2], "val_loss": [1.6, 1.3], "accuracy": [0.3, 0.5]}
    history["val_accuracy"] = [0.25, 0.45]
    return {
        "class_distribution": plots.class_distribution(
            {"train": [10, 20, 5, 40, 8], "validation": [2, 4, 1, 8, 2]},
            names,
            reference={n: c for n, c in zip(names, [466, 1443, 773, 2658, 316], strict=True)},
        ),
        "image_size_distribution": plots.image_size_distribution([(500, 400), (300, 300)]),
        "resize_before_after": plots.resize_before_after(image, {"codelab": image}),
        "learning_curves": plots.learning_curves(history, "baseline"),
        "confusion_matrix": plots.confusion_matrix([0, 1, 2, 3, 4], [0, 1, 2, 3, 3], names),
        "predictions_grid": plots.predictions_grid([image, image], [0, 1], [0, 2], names),
        "compare_runs": plots.compare_runs(
            {"baseline": {"images_per_sec": 15.0}, "2 workers": {"images_per_sec": 14.0}}
        ),
    }


def test_zh_cn_charts_have_every_glyph_they_draw(zh, tmp_path):
    for name, fig in _zh_charts().items():
        texts = [t.get_text() for t in fonts.text_artists(fig)]
        assert any(re.search(r"[\u4e00-\u9fff]", t) for t in texts), f"{name}: no Chinese"
        assert fonts.missing_glyphs(fig) == {}, name
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="Glyph .* missing")
            fig.savefig(tmp_path / f"{name}.png", dpi=60)


def test_the_glyph_check_catches_a_font_without_chinese(zh):
    import matplotlib.pyplot as plt

    with matplotlib.rc_context({"font.family": ["DejaVu Sans"]}):
        fig, ax = plt.subplots()
        ax.set_title("每个类别")
        plt.close(fig)
    assert fonts.missing_glyphs(fig) == {"每个类别": "个别每类"}


def test_cjk_font_comes_from_the_pinned_package():
    path = fonts.font_path()
    assert path.is_file() and path.suffix == ".ttc"
    assert fonts.register() == "Noto Sans CJK SC"
    assert "Noto Sans CJK SC" in matplotlib.rcParams["font.family"]
    pins = (paths.REPO_ROOT / "pyproject.toml").read_text()
    assert '"noto-cjk-sans-otc==' in pins and '"polib==' in pins


# --------------------------------------------------------------------------- the lab in zh-CN


def test_lab_resolves_the_edition_folder():
    from labkit.course import lab

    assert lab.resolve_notebooks(["00"], "zh-CN") == [
        notebooks.EN_DIR / "zh-CN" / "00_environment_setup.ipynb"
    ]
    assert lab.resolve_notebooks(["05"])[0].parent == notebooks.EN_DIR


@pytest.mark.slow
def test_zh_cn_notebooks_00_and_05_execute_with_papermill(tmp_path, sample_for_jobs):
    from lab_runs import make_lab_home, service_running

    env = make_lab_home(tmp_path / "home", sample_for_jobs)
    env.pop(i18n.ENV_VAR, None)
    out = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-m", "labkit", "lab", "--lang", "zh-CN"]
        + ["--notebooks", "00", "05", "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for name in ("00_environment_setup", "05_cleanup"):
        executed = nbformat.read(str(out / f"{name}.ipynb"), as_version=4)
        assert all(c.execution_count for c in executed.cells if c.cell_type == "code")
        assert "学习内容" in executed.cells[1].source
    html = (out / "00_environment_setup.html").read_text(encoding="utf-8")
    assert "<th>设置</th>" in html and "设置已保存" in html  # the kit's tables in Chinese
    assert "模式：local" in html and "本次运行的结果：" in html  # the notebook's status lines
    assert "设备：" in html and "本地 Vertex AI 服务：" in html
    cleanup_html = (out / "05_cleanup.html").read_text(encoding="utf-8")
    assert "提醒：Vertex AI Workbench" in cleanup_html
    results = json.loads((out / "results.json").read_text())
    assert results["setup"]["mode"] == "local" and results["cleanup"]["left"] == []
    assert not service_running(tmp_path / "home")


def test_no_line_break_inside_a_chinese_paragraph():
    """A soft line break renders as a space, which Chinese prose does not have: every zh-CN
    paragraph and list item is one line (`labkit.i18n.paragraphs`), outside code and tables."""
    from labkit.i18n import paragraphs

    found = []
    for path in notebooks.english_notebooks():
        zh = nbformat.read(str(notebooks.edition_dir("zh-CN") / path.name), as_version=4)
        for cell in zh.cells:
            if cell.cell_type == "markdown":
                found += [
                    f"{path.stem} {cell.id}: {line}" for line in paragraphs.hard_breaks(cell.source)
                ]
    assert found == [], "\n".join(found[:10])


def test_unwrap_joins_prose_and_leaves_code_tables_and_items():
    from labkit.i18n.paragraphs import unwrap

    text = (
        "第一行，\n第二行接着写 `code`\nand English.\n\n"
        "- 列表项\n  续行。\n- 下一项\n\n"
        "| a | b |\n|---|---|\n\n```bash\nmake\nlab\n```\n换行  \n保留。"
    )
    assert unwrap(text) == (
        "第一行，第二行接着写 `code` and English.\n\n"
        "- 列表项续行。\n- 下一项\n\n"
        "| a | b |\n|---|---|\n\n```bash\nmake\nlab\n```\n换行  \n保留。"
    )


def test_sync_keeps_the_editions_own_reference_outputs_while_the_code_is_unchanged(tmp_path):
    """Issue 29 item 2: each edition's nbval references come from a run of that edition, so a
    zh-CN learner reads Chinese before running; sync must not copy the English ones over them,
    except for a reference cell whose code changed (its zh-CN references are then re-recorded)."""
    en_dir = _copy_lab(tmp_path)
    zh_path = en_dir / "zh-CN" / "01_data_exploration.ipynb"
    zh = nbformat.read(str(zh_path), as_version=4)
    reference = next(c for c in zh.cells if notebooks.is_reference(c))
    chinese = [nbformat.v4.new_output("stream", name="stdout", text="拆分：{'train': 500}\n")]

    def record_chinese(nb, cell):
        cell.outputs = chinese

    _edit(zh_path, reference.id, record_chinese)
    notebooks.sync("zh-CN", ["01"], en_dir)
    en = nbformat.read(str(en_dir / "01_data_exploration.ipynb"), as_version=4)
    zh = nbformat.read(str(zh_path), as_version=4)
    assert next(c for c in zh.cells if c.id == reference.id).outputs == chinese
    assert notebooks.structure_problems(en, zh) == []

    def change_the_code(nb, cell):
        cell.source += "\nprint(len(class_names))"

    _edit(en_dir / "01_data_exploration.ipynb", reference.id, change_the_code)
    notebooks.sync("zh-CN", ["01"], en_dir)
    en = nbformat.read(str(en_dir / "01_data_exploration.ipynb"), as_version=4)
    zh = nbformat.read(str(zh_path), as_version=4)
    english_outputs = next(c for c in en.cells if c.id == reference.id).outputs
    assert next(c for c in zh.cells if c.id == reference.id).outputs == english_outputs


def test_each_editions_references_show_the_same_numbers_and_names():
    """The nbval lab checks the zh-CN references against a zh-CN run; the English ones,
    recorded from an English run of the same code, must show the same values: the numbers,
    paths and names of every reference cell agree, only the words differ (a reference
    re-recorded in one edition only shows up here)."""

    def values(cell) -> list[str]:
        text = "".join(
            out.get("text", "") or out.get("data", {}).get("text/plain", "") for out in cell.outputs
        )
        return [v.strip(".:,") for v in re.findall(r"[\w.:/{}-]*\d[\w.:/{}-]*", text)]

    for path in notebooks.english_notebooks():
        en = nbformat.read(str(path), as_version=4)
        zh = nbformat.read(str(notebooks.edition_dir("zh-CN") / path.name), as_version=4)
        pairs = [
            (e, z) for e, z in zip(en.cells, zh.cells, strict=True) if notebooks.is_reference(e)
        ]
        for e, z in pairs:
            assert z.outputs, f"{path.stem} cell {e.id}: no zh-CN reference"
            assert sorted(values(e)) == sorted(values(z)), (
                f"{path.stem} cell {e.id}: the editions' references differ"
            )


def test_zh_cn_text_uses_full_width_brackets_around_chinese():
    """Issue 29 item 5: 磁盘大小（GB）, not 磁盘大小 (GB): half-width brackets next to or around
    Chinese text read as English typography (README's English tables aside)."""
    half_width = re.compile(r"[\u4e00-\u9fff] ?\([^)]*\)|\([^)]*[\u4e00-\u9fff][^)]*\)")
    bad = [
        f"{where}: {match.group(0)!r}"
        for where, text in _zh_cn_texts()
        if not where.startswith("README")
        for match in half_width.finditer(text)
    ]
    assert not bad, "\n".join(bad)
