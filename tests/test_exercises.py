"""Notebook 03's and 04's exercises: every check passes the kit's solutions, fails stubs and
blanks with a hint (never a traceback), and the learner's trainer and image really run.

The notebook cells themselves are executed in tests/test_exercise_notebooks.py.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import textwrap
from pathlib import Path

import pytest

from labkit import i18n
from labkit.cloud.settings import Settings
from labkit.course import exercises
from labkit.course.exercises import checks, compare, dockerfile, pools, solutions, trainer

ROOT = Path(__file__).resolve().parents[1]
CODELAB_DOCKERFILE = """\
FROM gcr.io/deeplearning-platform-release/tf2-gpu.2-7

WORKDIR /

# Copies the trainer code to the docker image.
COPY trainer /trainer

# Sets up the entry point to invoke the trainer.
ENTRYPOINT ["python", "-m", "trainer.task"]
"""
# Each exercise's parameters, as the notebook's blank cells declare them.
SIGNATURES = {
    "_is_chief": "task_type, task_id, cluster_spec",
    "_get_temp_dir": "dirpath, task_id",
    "write_filepath": "filepath, task_type, task_id, cluster_spec",
    "create_strategy": "",
    "create_model_in_scope": "strategy, number_of_classes",
    "global_batch": "per_replica_batch_size, strategy",
    "data_options": "",
}
STUB_BODIES = {
    "blank": "...",
    "pass": "pass",
    "return True": "return True",
    "return False": "return False",
    "raises": "raise NotImplementedError('YOUR CODE HERE')",
}


def make_function(name: str, body: str, namespace: dict | None = None):
    """A function as a learner's cell would define it, in a namespace of its own."""
    namespace = {} if namespace is None else namespace
    exec(f"def {name}({SIGNATURES[name]}):\n    {body}\n", namespace)
    return namespace[name]


def load_module(path: Path, text: str):
    """A module from source text (so inspect.getsource works, as in a notebook)."""
    path.write_text(textwrap.dedent(text))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_exercise_has_a_check_a_signature_and_a_solution():
    assert exercises.names() == list(SIGNATURES)
    for name in exercises.names():
        assert callable(exercises.solution(name))
    with pytest.raises(KeyError, match="no exercise"):
        exercises.solution("nope")


@pytest.mark.parametrize("name", list(SIGNATURES))
def test_the_solution_passes_its_check(name):
    outcome = checks.CHECKS[name](exercises.solution(name))
    assert outcome.passed, str(outcome)
    assert "hint:" not in str(outcome)


@pytest.mark.parametrize("stub", list(STUB_BODIES))
@pytest.mark.parametrize("name", list(SIGNATURES))
def test_no_stub_passes_and_each_gets_a_hint(name, stub):
    outcome = checks.CHECKS[name](make_function(name, STUB_BODIES[stub]))
    assert not outcome.passed, f"{name} with `{STUB_BODIES[stub]}` passed its check"
    assert outcome.hint and "Traceback" not in str(outcome)
    assert f"{name}: not yet" in str(outcome)


def test_is_chief_hint_names_the_case_the_codelab_misses():
    codelab = make_function("_is_chief", "return task_type == 'chief'")
    outcome = checks.check_is_chief(codelab)
    assert "case 'no TF_CONFIG (one machine)'" in outcome.hint
    assert "expected True, got False" in outcome.hint
    wrong = [line for line in outcome.lines if line.startswith(checks.FAIL)]
    assert len(wrong) == 2 and "without a chief" in wrong[1]


def test_cases_are_what_tensorflow_reads_from_real_tf_configs():
    cases = {case.name: case for case in checks.cluster_cases()}
    assert len(cases) == 6
    lone = cases["no TF_CONFIG (one machine)"]
    assert (lone.task_type, lone.task_id, lone.cluster_spec) == (None, None, {})
    worker = cases["worker 0, cluster with a chief (Vertex AI pool 1)"]
    assert worker.task_type == "worker" and worker.task_id == 0
    assert sorted(worker.cluster_spec) == ["chief", "worker"]
    assert "TF_CONFIG" not in os.environ  # restored


def test_temp_dir_and_write_filepath_catch_shared_and_misplaced_folders():
    shared = make_function(
        "_get_temp_dir",
        "import os; p = os.path.join(dirpath, 'tmp'); os.makedirs(p, exist_ok=True); return p",
    )
    assert "also the folder of worker:0" in checks.check_get_temp_dir(shared).hint
    not_made = make_function(
        "_get_temp_dir", "import os; return os.path.join(dirpath, f'w{task_id}')"
    )
    assert "does not exist" in checks.check_get_temp_dir(not_made).hint

    namespace = {
        "_is_chief": solutions._is_chief,
        "_get_temp_dir": make_function("_get_temp_dir", "return True"),
    }
    uses_broken_helper = make_function(
        "write_filepath",
        "import os\n    d = os.path.dirname(filepath)\n"
        "    return filepath if _is_chief(task_type, task_id, cluster_spec) else "
        "os.path.join(_get_temp_dir(d, task_id), os.path.basename(filepath))",
        namespace,
    )
    hint = checks.check_write_filepath(uses_broken_helper).hint
    assert "worker 0, cluster with a chief" in hint
    assert "_get_temp_dir, whose check fails: fix it first" in hint


def test_scope_check_sees_a_model_built_outside_the_scope():
    namespace: dict = {}
    outside = make_function(
        "create_model_in_scope", "return create_model(number_of_classes)", namespace
    )
    outcome = checks.check_create_model_in_scope(outside)
    assert "ran outside the strategy's scope" in outcome.hint
    assert "create_model" not in namespace  # the stand-in was removed again


def test_shard_and_strategy_checks_explain_the_wrong_choice():
    import tensorflow as tf

    namespace = {"tf": tf}
    file_policy = make_function(
        "data_options",
        "o = tf.data.Options()\n    o.experimental_distribute.auto_shard_policy = "
        "tf.data.experimental.AutoShardPolicy.FILE\n    return o",
        namespace,
    )
    assert "FILE gives each worker whole files" in checks.check_data_options(file_policy).hint
    default = make_function("data_options", "return tf.data.Options()", namespace)
    assert "AUTO" in checks.check_data_options(default).hint
    mirrored = make_function(
        "create_strategy", "return tf.distribute.MirroredStrategy()", namespace
    )
    assert "one machine only" in checks.check_create_strategy(mirrored).hint


def test_check_returns_the_learners_function_or_the_solution(capsys):
    blank = make_function("global_batch", "...")
    assert exercises.check(blank) is blank
    out = capsys.readouterr().out
    assert "global_batch: not yet" in out and "hint:" in out
    assert exercises.check(blank, solved=True) is solutions.global_batch
    assert "SOLVED = True" in capsys.readouterr().out
    renamed = make_function("global_batch", "...")
    renamed.__name__ = "my_batch"
    assert exercises.check(renamed) is renamed
    assert "not one of the exercises" in capsys.readouterr().out
    with i18n.using("zh-CN"):  # the zh-CN edition's lines around the outcome
        exercises.check(blank, solved=True)
        exercises.check(renamed)
    out = capsys.readouterr().out
    assert (
        "SOLVED = True：正在检查本套件的解答（阅读解答：exercises.show_solution('global_batch')）"
        in out
    )
    assert "my_batch 不是练习之一" in out


def test_show_solution_is_the_solutions_source():
    shown = repr(exercises.show_solution("_is_chief"))
    assert shown.startswith("def _is_chief(task_type, task_id, cluster_spec):")
    assert 'cluster_spec.get("chief")' in shown


# --------------------------------------------------------------------------- zh-CN edition

CHINESE = re.compile(r"[\u4e00-\u9fff]")
# The first thing a learner often writes, wrong, for each exercise.
WRONG_ANSWERS = {
    "_is_chief": "return task_type == 'chief'",
    "_get_temp_dir": "return dirpath",
    "write_filepath": "return filepath",
    "create_strategy": "return tf.distribute.MirroredStrategy()",
    "create_model_in_scope": "return create_model(number_of_classes)",
    "global_batch": "return per_replica_batch_size",
    "data_options": "return tf.data.Options()",
}


def _answers_and_checks(name: str) -> list:
    """(answer, check) pairs for one exercise: the blank cell and typical wrong answers."""
    import tensorflow as tf

    if name == "worker_pool_specs":
        settings = Settings(mode="local", project_id="local-project", bucket="zh-check")
        knobs = settings.knobs(profile="job")
        kit = pools.solution(settings, knobs)
        chief_twice = [{**kit[0], "replica_count": 2}, *kit[1:]]
        placeholder = [
            {**p, "container_spec": {**p["container_spec"], "image_uri": "gcr.io/$PROJECT_ID/x"}}
            for p in kit
        ]
        expected = pools.expected_from(kit)
        return [(v, lambda v: pools.review(v, expected)) for v in ([], chief_twice, placeholder)]
    bodies = ["...", WRONG_ANSWERS[name]]
    fns = [make_function(name, body, {"tf": tf}) for body in bodies]
    return [(fn, checks.CHECKS[name]) for fn in fns]


def _same_run(text: str) -> str:
    return re.sub(r"/tmp/tmp\w+", "TMP", text)  # each check writes in a new temporary folder


@pytest.mark.parametrize("name", [*SIGNATURES, "worker_pool_specs"])
def test_zh_cn_outcomes_and_hints_are_chinese_and_english_is_unchanged(name):
    for answer, check in _answers_and_checks(name):
        english = check(answer)
        with i18n.using("zh-CN"):
            chinese = check(answer)
            text = str(chinese)  # the head and "hint" are words of the edition it prints in
        assert not english.passed and not chinese.passed
        assert _same_run(str(check(answer))) == _same_run(str(english))  # no edition leaks
        assert not CHINESE.search(str(english)), str(english)
        assert f"{english.name}: not yet (" in str(english) and "\nhint: " in str(english)
        assert text.startswith(f"{name}：尚未通过（") and "\n提示：" in text, text
        assert len(chinese.lines) == len(english.lines)
        for line in chinese.lines:  # the case in Chinese; after the colon what went wrong, or
            case, _, found = line[2:].partition("：")  # on a passed case the value (code)
            assert CHINESE.search(case), line
            assert line.startswith(checks.PASS) or not found or CHINESE.search(found), line
        assert CHINESE.search(chinese.hint), chinese.hint
        named = re.match(r"case '(.+?)' \(", english.hint)
        if named:  # the hint names the failing case, in the edition's words
            zh_case = i18n.gettext(named.group(1), "zh-CN")
            assert CHINESE.search(zh_case) and chinese.hint.startswith(f"用例“{zh_case}”（")
            assert "应为" in chinese.hint
    if name == "worker_pool_specs":  # the validator's own words, quoted in the edition's
        assert (
            "worker_pool_specs：没有任何工作器池。修复方法：请添加工作器池 0（主工作器"
            in _zh_pools_hint(0)
        )


def _zh_pools_hint(index: int) -> str:
    answer, check = _answers_and_checks("worker_pool_specs")[index]
    with i18n.using("zh-CN"):
        return check(answer).hint


def test_messages_the_checks_translate_from_data_are_in_the_catalog():
    """Case names, their reasons and the shard policies' texts go through gettext at check
    time, not as literals (the catalog scan in test_i18n cannot see them)."""
    data = [t for c in checks.cluster_cases() for t in (c.name, c.why)]
    data += list(checks.SHARD_POLICY_HINTS.values())
    untranslated = [m for m in data if i18n.gettext(m, "zh-CN") == m]
    assert untranslated == [], "add these to the zh-CN catalog"


# --------------------------------------------------------------------------- the file


def test_write_trainer_waits_for_every_exercise(tmp_path, capsys):
    functions = [exercises.solution(n) for n in exercises.names()]
    functions[0] = make_function("_is_chief", "return True")
    assert exercises.write_trainer(tmp_path, functions) is None
    assert "finish _is_chief first" in capsys.readouterr().out
    assert exercises.write_trainer(tmp_path, functions[1:]) is None
    assert not (tmp_path / "trainer").exists()


def test_learner_functions_are_assembled_into_the_codelab_layout(tmp_path):
    learner = load_module(
        tmp_path / "learner_cells.py",
        """
        import os
        import tensorflow as tf

        def _is_chief(task_type, task_id, cluster_spec):
            # learner's own words
            return task_type in (None, "chief") or (
                task_type == "worker" and task_id == 0 and "chief" not in cluster_spec
            )
        """,
    )
    functions = [
        learner._is_chief if n == "_is_chief" else exercises.solution(n) for n in exercises.names()
    ]
    task = exercises.write_trainer(tmp_path / "cassava", functions)
    assert task == tmp_path / "cassava" / "trainer" / "task.py"
    assert (task.parent / "__init__.py").is_file()  # found before the kit's own `trainer`
    text = task.read_text()
    assert "# learner's own words" in text and "ruff: noqa" not in text
    assert text.index("def create_model(") < text.index("def _is_chief(") < text.index("def main(")
    defined = compare.file_functions(task)
    assert set(exercises.names()) | {"main", "create_dataset", "create_model"} <= set(defined)
    # The codelab's values stay the defaults; LAB_* only shrink the lab's local runs.
    assert 'os.environ.get("LAB_IMAGE_SIZE", "300")' in text
    assert 'os.environ.get("LAB_BATCH_SIZE", "64")' in text
    assert 'os.environ.get("LAB_WEIGHTS", "imagenet")' in text


def test_side_by_side_names_real_functions(tmp_path):
    task = exercises.write_trainer(tmp_path, [exercises.solution(n) for n in exercises.names()])
    view = exercises.side_by_side(task)
    codelab = compare.file_functions(compare.CODELAB_TASK)
    for concern in compare.CONCERNS:
        assert set(concern.codelab) <= set(codelab), concern.what
        assert set(concern.learner) <= set(view.learner), concern.what
        for ref in concern.kit:
            where, source = compare.kit_source(ref)
            assert source.startswith(("def ", "class ")), ref
    text = repr(view)
    assert "return task_type == 'chief'" in text and "BackupAndRestore" in text
    assert "<details>" in view._repr_html_()
    assert exercises.side_by_side(None) is None


# --------------------------------------------------------------------------- Dockerfile


@pytest.fixture
def context(tmp_path):
    exercises.write_trainer(tmp_path, [exercises.solution(n) for n in exercises.names()])
    return tmp_path


def test_dockerfile_solution_passes_lint_clean_with_the_pinned_versions(context):
    outcome = dockerfile.check_dockerfile(dockerfile.solution(), context)
    assert outcome.passed, str(outcome)
    assert any("hadolint: no findings" in line for line in outcome.lines)
    pins = dict(re.findall(r'"([A-Za-z0-9_.-]+)==([^"]+)"', (ROOT / "pyproject.toml").read_text()))
    text = dockerfile.solution()
    assert f"tensorflow/tensorflow:{pins['tensorflow']}-gpu" in text
    for name, version in dockerfile.image_requirements().items():  # trainer/requirements.txt
        assert f'"{name}=={version}"' in text and pins[name] == version


def test_the_codelabs_dockerfile_passes_with_its_lint_finding_explained(context):
    outcome = dockerfile.check_dockerfile(CODELAB_DOCKERFILE, context)
    assert outcome.passed, str(outcome)
    (finding,) = [line for line in outcome.lines if "hadolint DL3006" in line]
    assert "pin the release you tested" in finding


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("# my Dockerfile\n", "write the four steps"),
        (
            "FROM python:3.11\nWORKDIR /app\nCOPY trainer trainer\nENTRYPOINT python -m trainer.task\n",
            "expected the exec form",
        ),
        (
            'FROM python:3.11\nWORKDIR /app\nCOPY trainer /trainer\nENTRYPOINT ["python", "-m", "trainer.task"]\n',
            "no /app/trainer/task.py is in the image",
        ),
        (
            'FROM tensorflow/tensorflow:2.21.0\nCOPY trainer /trainer\nENTRYPOINT ["python", "-m", "trainer.task"]\n',
            "has no tensorflow-datasets",
        ),
        ("WORKDIR /\n", "no FROM"),
    ],
)
def test_dockerfile_mistakes_get_hints(context, text, expected):
    outcome = dockerfile.check_dockerfile(text, context)
    assert not outcome.passed
    assert expected in str(outcome), str(outcome)


HAN = re.compile(r"[\u4e00-\u9fff]")


def test_the_dockerfile_check_answers_in_chinese_in_the_zh_cn_edition(context):
    """Issue 29, item 1: each finding, its reason and the hint, in the edition's language;
    what hadolint itself says and the Dockerfile lines quoted stay as written."""
    text = "FROM tensorflow/tensorflow:2.21.0-gpu\nWORKDIR app\nCOPY trainer trainer\n"
    text += "ENTRYPOINT python -m trainer.task\n"
    with i18n.using("zh-CN"):
        shown = str(dockerfile.check_dockerfile(text, context))
        empty = str(dockerfile.check_dockerfile("", context))
    assert "为什么重要：WORKDIR 应为绝对路径" in shown and "Use absolute WORKDIR" in shown
    assert "自带 Keras 3" in shown and "应为 exec 形式" in shown and "提示：" in shown
    assert "Why it matters" not in shown and "has no" not in shown
    for line in shown.splitlines():
        assert HAN.search(line), f"an English line in the zh-CN check: {line}"
    assert empty.startswith("Dockerfile：尚未通过（1 个检查项中 0 个正确）"), empty
    english = str(dockerfile.check_dockerfile(text, context))
    assert "Why it matters: WORKDIR should be an absolute path" in english
    assert not HAN.search(english)


def test_hadolints_reasons_are_in_the_catalog():
    """The rule reasons are data, translated when printed: the catalog scan cannot see them."""
    untranslated = [m for m in dockerfile.HADOLINT_WHY.values() if i18n.gettext(m, "zh-CN") == m]
    assert untranslated == [], "add these to the zh-CN catalog"


def test_dockerfile_exercise_without_a_trainer_says_to_run_03(tmp_path, capsys):
    assert dockerfile.dockerfile_exercise(CODELAB_DOCKERFILE, tmp_path) is None
    assert "run 03's exercises first" in capsys.readouterr().out
    # Solved (CI running 04 alone): the solved trainer is written, then the solution checked.
    path = dockerfile.dockerfile_exercise(None, tmp_path / "solved", solved=True)
    assert path == tmp_path / "solved" / "Dockerfile" and path.read_text() == dockerfile.solution()


# --------------------------------------------------------------------------- real runs


@pytest.mark.slow
@pytest.mark.timeout(3200)
def test_learners_trainer_ran_on_two_workers_in_the_lab_and_saved_once(nbval_lab):
    """The solved path of 03 ran for real in the nbval lab (SOLVED=True; its check cell raises
    if the run fails, and 04's container-job check likewise): here the learner's own
    trainer file, the chief's model that loads and predicts, and the collective save."""
    import numpy as np
    import tensorflow as tf

    run_dir = Path(nbval_lab["run_dir"])
    task = run_dir / "cassava" / "trainer" / "task.py"
    assert task.is_file(), "03 did not write the learner's trainer/task.py"
    source = task.read_text()
    assert "def _is_chief" in source and "AutoShardPolicy.DATA" in source

    out = run_dir / "my-trainer"
    model = tf.saved_model.load(str(out / "model"))
    serve = model.signatures["serving_default"]
    (probabilities,) = serve(tf.zeros([2, 32, 32, 3], tf.float32)).values()
    probabilities = np.asarray(probabilities)
    assert probabilities.shape == (2, 5)
    assert np.allclose(probabilities.sum(axis=1), 1.0, atol=1e-3)
    assert not list(out.rglob("workertemp*")), "a worker's temporary copy was left behind"
    logs = out / "replica-logs"
    assert "[my trainer] chief:0 saved the model" in (logs / "chief-0.log").read_text()
    assert "removed its temporary copy" in (logs / "worker-0.log").read_text()


def test_failed_run_check_shows_the_failing_replicas_log(tmp_path, capsys):
    log = tmp_path / "worker-0.log"
    log.write_text("line\nValueError: boom\n")

    class Failed:
        ok, outcome, message, failed_role = False, "failed", "worker-0 exited with 1", "worker-0"
        logs = {"worker-0": log}

        def log_text(self, role):
            return log.read_text()

    outcome = trainer.check_run(Failed(), tmp_path)
    assert not outcome.passed and "ValueError: boom" in outcome.hint
    assert trainer.check_run(None, tmp_path) is None


def test_python_finds_the_learners_trainer_before_the_kits(tmp_path):
    """`python -m trainer.task` from the learner's folder runs their file, not the kit's."""
    import subprocess

    package = tmp_path / "trainer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text("print('learner', __file__)\n")
    done = subprocess.run(
        [sys.executable, "-m", "trainer.task"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.stdout.startswith("learner") and str(tmp_path) in done.stdout, done.stderr
