"""The checks behind notebook 03's exercises: run the learner's function, say what is wrong.

Each check calls the learner's code on the inputs a real cluster gives it: the task type, id
and cluster that `strategy.cluster_resolver` returns for the TF_CONFIG Vertex AI writes
(built by `labkit.local.vertex_env`, read back by TensorFlow's own `TFConfigClusterResolver`), and
returns an `Outcome`: one line per case, and a hint naming the first case that failed and
what was expected. A blank body (``...``), a stub (``return True``) or code that raises
gives a failed outcome with a hint, never a traceback. Lines and hints are in the edition
active when the check runs (`labkit.i18n.gettext`, English text as the message id).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
import types
from collections.abc import Callable, Iterator
from typing import Any

from labkit.i18n import gettext

PASS, FAIL = "✓", "✗"


@dataclasses.dataclass
class Outcome:
    """What a check found: passed or not, a line per case, and the hint for the first failure."""

    name: str
    passed: bool
    lines: list[str]
    hint: str = ""
    unit: str = "cases"

    def _unit_word(self) -> str:
        return gettext("checks") if self.unit == "checks" else gettext("cases")

    def __str__(self) -> str:
        right = sum(line.startswith(PASS) for line in self.lines)
        head = (
            gettext("{name}: passed ({right} of {total} {unit} right)")
            if self.passed
            else gettext("{name}: not yet ({right} of {total} {unit} right)")
        ).format(name=self.name, right=right, total=len(self.lines), unit=self._unit_word())
        body = [head, *(f"  {line}" for line in self.lines)]
        if not self.passed and self.hint:
            body.append(gettext("hint: {hint}").format(hint=self.hint))
        return "\n".join(body)


def call(fn: Any, *args: Any) -> tuple[Any, str | None]:
    """``fn(*args)`` and None, or None and the error as one line (no traceback)."""
    if not callable(fn):
        return None, gettext("{fn} is not a function").format(fn=repr(fn))
    try:
        return fn(*args), None
    except Exception as err:  # the learner's code may raise anything: report, don't crash
        return None, gettext("raised {kind}: {error}").format(kind=type(err).__name__, error=err)


def _describe(value: Any) -> str:
    if value is None:
        return gettext("None (is the body still `...` or `pass`? `return` the answer)")
    return repr(value)


def _line(ok: bool, case: str, result: str) -> str:
    """One case's line: its mark, the case (in the edition's words) and what was found."""
    mark = PASS if ok else FAIL
    return f"{mark} " + gettext("{case}: {result}").format(case=case, result=result)


def _got_expected(got: Any, expected: Any) -> str:
    return gettext("got {got}, expected {expected}").format(got=got, expected=expected)


def _case_hint(case: str, args: str, problem: str, expected: str) -> str:
    return gettext("case '{case}' ({args}): {problem}. Expected: {expected}.").format(
        case=case, args=args, problem=problem, expected=expected
    )


# --------------------------------------------------------------------------- cluster cases


@dataclasses.dataclass(frozen=True)
class ClusterCase:
    """What `strategy.cluster_resolver` gives one replica, and whether it is the chief.

    ``name`` and ``why`` are English, the catalog's message ids: checks show them through
    ``gettext`` when they print them, in the edition of that moment."""

    name: str
    task_type: str | None
    task_id: int | None
    cluster_spec: dict[str, list[str]]
    chief: bool
    why: str


@contextlib.contextmanager
def _tf_config(value: dict[str, Any] | None) -> Iterator[None]:
    """TF_CONFIG set (or unset) for the duration, then restored."""
    old = os.environ.pop("TF_CONFIG", None)
    if value is not None:
        os.environ["TF_CONFIG"] = json.dumps(value)
    try:
        yield
    finally:
        os.environ.pop("TF_CONFIG", None)
        if old is not None:
            os.environ["TF_CONFIG"] = old


def _resolve(tf_config: dict[str, Any] | None) -> tuple[str | None, int | None, dict]:
    """(task_type, task_id, cluster_spec dict) as `strategy.cluster_resolver` reports them."""
    import tensorflow as tf

    with _tf_config(tf_config):
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        return resolver.task_type, resolver.task_id, resolver.cluster_spec().as_dict()


def cluster_cases() -> list[ClusterCase]:
    """The replicas of the clusters a trainer meets, each with the TF_CONFIG it really gets.

    No TF_CONFIG (a notebook, one machine); a Vertex AI job (pool 0 = chief, pool 1 = two
    workers); TensorFlow's own layout of workers only, where worker 0 acts as the chief.
    """
    from labkit.local import vertex_env

    vertex = vertex_env.plan_cluster([1, 2], ports=[2222, 2223, 2224])
    workers_only = vertex_env.plan_cluster([0, 2], ports=[2222, 2223])
    chief, worker0, worker1 = (vertex.tf_config(r) for r in vertex.replicas)
    only0, only1 = (workers_only.tf_config(r) for r in workers_only.replicas)
    table = [
        ("no TF_CONFIG (one machine)", None, True,
         "without TF_CONFIG there is no cluster: task_type and task_id are None, and the "
         "one process is the chief (it must save the real model)"),
        ("chief 0 (Vertex AI pool 0)", chief, True,
         "the task of type 'chief' is always the chief"),
        ("worker 0, cluster with a chief (Vertex AI pool 1)", worker0, False,
         "when the cluster has a 'chief' entry, worker 0 is an ordinary worker"),
        ("worker 1, cluster with a chief (Vertex AI pool 1)", worker1, False,
         "only one replica is the chief"),
        ("worker 0, cluster without a chief (workers only)", only0, True,
         "when cluster_spec has no 'chief' entry, worker 0 takes the chief's role"),
        ("worker 1, cluster without a chief (workers only)", only1, False,
         "only one replica is the chief: here worker 0"),
    ]  # fmt: skip
    cases = []
    for name, config, is_chief, why in table:
        task_type, task_id, spec = _resolve(config)
        cases.append(ClusterCase(name, task_type, task_id, spec, is_chief, why))
    return cases


def _case_args(case: ClusterCase) -> str:
    return (
        f"task_type={case.task_type!r}, task_id={case.task_id!r}, cluster_spec={case.cluster_spec}"
    )


# --------------------------------------------------------------------------- the checks


def check_is_chief(fn: Callable) -> Outcome:
    lines, hint = [], ""
    for case in cluster_cases():
        value, error = call(fn, case.task_type, case.task_id, case.cluster_spec)
        ok = error is None and isinstance(value, bool) and value == case.chief
        got = error or _describe(value)
        name = gettext(case.name)
        lines.append(_line(ok, name, f"{value}" if ok else _got_expected(got, case.chief)))
        if not ok and not hint:
            hint = gettext(
                "case '{case}' ({args}): expected {expected}, got {got}. Why: {why}."
            ).format(
                case=name,
                args=_case_args(case),
                expected=case.chief,
                got=got,
                why=gettext(case.why),
            )
    return Outcome("_is_chief", not hint, lines, hint)


def _inside(path: str, folder: str) -> bool:
    path, folder = os.path.normpath(path), os.path.normpath(folder)
    return path != folder and os.path.commonpath([path, folder]) == folder


def _temp_dir_problem(value: Any, dirpath: str) -> str | None:
    """What is wrong with one worker's returned folder on its own (None: nothing)."""
    if not isinstance(value, (str, os.PathLike)):
        return gettext("returned {value}; return the folder's path").format(value=_describe(value))
    value = os.fspath(value)
    if os.path.normpath(value) == os.path.normpath(dirpath):
        return gettext("returned dirpath itself: the worker would write over the chief's files")
    if not _inside(value, dirpath):
        return gettext("returned {value}, which is not inside dirpath {dirpath}").format(
            value=repr(value), dirpath=repr(dirpath)
        )
    if not os.path.isdir(value):
        return gettext("{value} does not exist: create it (tf.io.gfile.makedirs)").format(
            value=repr(value)
        )
    return None


def check_get_temp_dir(fn: Callable) -> Outcome:
    lines, hint = [], ""
    non_chiefs = [c for c in cluster_cases() if not c.chief]
    with tempfile.TemporaryDirectory() as tmp:
        dirpath = os.path.join(tmp, "mwms")
        os.makedirs(dirpath)
        seen: dict[str, str] = {}
        for case in non_chiefs:
            value, error = call(fn, dirpath, case.task_id)
            problem = error or _temp_dir_problem(value, dirpath)
            if problem is None:
                value = os.fspath(value)
            key = f"{case.task_type}:{case.task_id}"
            if problem is None and value in seen and seen[value] != key:
                problem = gettext(
                    "{value} is also the folder of {other}: each worker needs its own (use task_id)"
                ).format(value=repr(value), other=seen[value])
            if problem is None:
                seen[value] = key
            name = gettext(case.name)
            shown = os.path.relpath(value, tmp) if problem is None else problem
            lines.append(_line(problem is None, name, shown))
            if problem and not hint:
                args = f"dirpath={dirpath!r}, task_id={case.task_id!r}"
                expected = gettext(
                    "a new folder inside dirpath, named after task_id, so that every worker has "
                    "its own, e.g. dirpath/workertemp_1"
                )
                hint = _case_hint(name, args, problem, expected)
    return Outcome("_get_temp_dir", not hint, lines, hint)


def _filepath_problem(value: Any, filepath: str, chief: bool) -> str | None:
    """What is wrong with one replica's returned save path on its own (None: nothing)."""
    if not isinstance(value, (str, os.PathLike)):
        return gettext("returned {value}; return the path to save to").format(
            value=_describe(value)
        )
    value = os.fspath(value)
    same = os.path.normpath(value) == os.path.normpath(filepath)
    if chief and not same:
        return gettext("returned {value}: the chief must save to filepath itself").format(
            value=repr(value)
        )
    if not chief and same:
        return gettext(
            "returned filepath: this worker is not the chief; its copy would overwrite the chief's"
        )
    if not chief and _inside(value, filepath):
        return gettext(
            "returned {value}, inside the chief's model folder: the kept model would hold the "
            "worker's copy"
        ).format(value=repr(value))
    if not chief and os.path.basename(value) != os.path.basename(filepath):
        return gettext(
            "returned {value}: keep the file name ({name}) and change only the folder"
        ).format(value=repr(value), name=repr(os.path.basename(filepath)))
    return None


def _failing_helpers(fn: Callable) -> str:
    """What to add to write_filepath's hint for each helper of the learner's that fails."""
    globals_ = getattr(fn, "__globals__", {})
    text = ""
    for name, checker in (("_is_chief", check_is_chief), ("_get_temp_dir", check_get_temp_dir)):
        if name in globals_ and not checker(globals_[name]).passed:
            text += gettext(
                " write_filepath calls {name}, whose check fails: fix it first."
            ).format(name=name)
    return text


def check_write_filepath(fn: Callable) -> Outcome:
    lines, hint = [], ""
    with tempfile.TemporaryDirectory() as tmp:
        filepath = os.path.join(tmp, "mwms", "model")
        os.makedirs(os.path.dirname(filepath))
        by_cluster: dict[str, dict[str, str]] = {}
        for case in cluster_cases():
            value, error = call(fn, filepath, case.task_type, case.task_id, case.cluster_spec)
            problem = error or _filepath_problem(value, filepath, case.chief)
            if problem is None:
                value = os.fspath(value)
            cluster = json.dumps(case.cluster_spec, sort_keys=True)
            others = by_cluster.setdefault(cluster, {})
            if problem is None and not case.chief and value in others.values():
                problem = gettext(
                    "{value} is also where another worker of this cluster saves: use the task_id"
                ).format(value=repr(value))
            if problem is None:
                others[case.name] = value
            name = gettext(case.name)
            shown = os.path.relpath(value, tmp) if problem is None else problem
            lines.append(_line(problem is None, name, shown))
            if problem and not hint:
                expected = (
                    "filepath"
                    if case.chief
                    else gettext("a path in this worker's own temporary folder (_get_temp_dir)")
                )
                hint = _case_hint(name, _case_args(case), problem, expected)
    if hint:
        hint += _failing_helpers(fn)
    return Outcome("write_filepath", not hint, lines, hint)


def _local_strategy() -> Any:
    """MultiWorkerMirroredStrategy of this process alone (no TF_CONFIG: 1 replica)."""
    import tensorflow as tf

    with _tf_config(None):
        return tf.distribute.MultiWorkerMirroredStrategy()


def check_create_strategy(fn: Callable) -> Outcome:
    import tensorflow as tf

    with _tf_config(None):
        value, error = call(fn)
    problem = error
    if problem is None and not isinstance(value, tf.distribute.MultiWorkerMirroredStrategy):
        kind = type(value).__name__
        if value is None:
            problem = gettext("returned {value}").format(value=_describe(value))
        elif isinstance(value, tf.distribute.MirroredStrategy):
            problem = gettext(
                "returned a MirroredStrategy: it uses the devices of one machine only"
            )
        elif isinstance(value, tf.distribute.Strategy):
            problem = gettext("returned a {kind}: that is not the strategy for several workers")
            problem = problem.format(kind=kind)
        else:
            problem = gettext("returned {kind} {value}, not a strategy").format(
                kind=kind, value=repr(value)
            )
    found = (
        gettext("MultiWorkerMirroredStrategy, {n} replica").format(n=value.num_replicas_in_sync)
        if problem is None
        else problem
    )
    lines = [_line(problem is None, gettext("no TF_CONFIG (this notebook)"), found)]
    hint = (
        gettext(
            "{problem}. Expected: a tf.distribute.MultiWorkerMirroredStrategy (it reads "
            "TF_CONFIG itself; the 2-worker run below checks it in a real cluster)."
        ).format(problem=problem)
        if problem
        else ""
    )
    return Outcome("create_strategy", problem is None, lines, hint)


def _probe_model_builder(strategy: Any, calls: list[tuple[Any, bool]]) -> Callable:
    """A small stand-in for create_model that records whether it ran inside the scope."""
    import tensorflow as tf
    import tf_keras

    def create_model(number_of_classes):
        in_scope = tf.distribute.has_strategy() and tf.distribute.get_strategy() is strategy
        calls.append((number_of_classes, in_scope))
        inputs = tf_keras.Input((4,))
        outputs = tf_keras.layers.Dense(int(number_of_classes), activation="softmax")(inputs)
        model = tf_keras.Model(inputs, outputs)
        model.compile(loss="sparse_categorical_crossentropy", optimizer=tf_keras.optimizers.Adam())
        return model

    return create_model


def _scope_problem(value: Any, calls: list[tuple[Any, bool]], strategy: Any) -> str | None:
    """What is wrong with how the learner built the model (None: nothing)."""
    if not calls:
        return gettext(
            "create_model was not called: build the model with create_model(number_of_classes)"
        )
    if calls[0][0] != 5:
        return gettext("create_model got {got} classes, expected number_of_classes (5)").format(
            got=repr(calls[0][0])
        )
    if not calls[0][1]:
        return gettext(
            "create_model ran outside the strategy's scope: its variables are not mirrored on "
            "the replicas"
        )
    if value is None or not hasattr(value, "weights"):
        return gettext("returned {value}; return the model").format(value=_describe(value))
    if not all(strategy.extended.variable_created_in_scope(v) for v in value.weights):
        return gettext("the returned model's variables were not created in strategy.scope()")
    return None


def check_create_model_in_scope(fn: Callable) -> Outcome:
    """The learner's function runs with ``create_model`` replaced by a small model (building
    ResNet50 here would take a minute); the check sees where it was called and what came back."""
    strategy = _local_strategy()
    calls: list[tuple[Any, bool]] = []
    globals_ = getattr(fn, "__globals__", None)
    missing = object()
    original = globals_.get("create_model", missing) if globals_ is not None else missing
    if globals_ is not None:
        globals_["create_model"] = _probe_model_builder(strategy, calls)
    try:
        value, error = call(fn, strategy, 5)
    finally:
        if globals_ is not None:
            if original is missing:
                globals_.pop("create_model", None)
            else:
                globals_["create_model"] = original
    problem = error or _scope_problem(value, calls, strategy)
    found = (
        gettext("model built and compiled inside strategy.scope()") if problem is None else problem
    )
    lines = [_line(problem is None, gettext("strategy of this notebook, 5 classes"), found)]
    hint = (
        gettext(
            "{problem}. Expected: `with strategy.scope():` around create_model(...), which "
            "creates the model's and the optimizer's variables; then return the model."
        ).format(problem=problem)
        if problem
        else ""
    )
    return Outcome("create_model_in_scope", problem is None, lines, hint)


def check_global_batch(fn: Callable) -> Outcome:
    cases = [
        ("this notebook: no TF_CONFIG, 1 device", _local_strategy(), 64),
        ("the codelab's job: chief + 1 worker, 1 device each", types.SimpleNamespace(num_replicas_in_sync=2), 64),
        ("2 machines with 4 GPUs each", types.SimpleNamespace(num_replicas_in_sync=8), 64),
        ("the lab's local run: 2 workers, 8 per replica", types.SimpleNamespace(num_replicas_in_sync=2), 8),
    ]  # fmt: skip
    lines, hint = [], ""
    for name, strategy, per_replica in cases:
        replicas = strategy.num_replicas_in_sync
        expected = per_replica * replicas
        value, error = call(fn, per_replica, strategy)
        ok = (
            error is None
            and isinstance(value, int)
            and not isinstance(value, bool)
            and value == expected
        )
        got = error or _describe(value)
        shown = gettext(name)  # the case names are message ids, shown in the edition's words
        lines.append(_line(ok, shown, f"{value}" if ok else _got_expected(got, expected)))
        if not ok and not hint:
            hint = gettext(
                "case '{case}' (per_replica_batch_size={per_replica}, "
                "strategy.num_replicas_in_sync={replicas}): expected {expected}, got {got}. "
                "Every replica takes per_replica_batch_size examples per step, so one step of "
                "the whole cluster takes that times strategy.num_replicas_in_sync."
            ).format(
                case=shown, per_replica=per_replica, replicas=replicas, expected=expected, got=got
            )
    return Outcome("global_batch", not hint, lines, hint)


# Why each other policy is wrong: English, the catalog's message ids (shown through gettext)
SHARD_POLICY_HINTS = {
    "AUTO": "AUTO (the default) tries FILE first and falls back to DATA only when it must; "
    "say what you mean",
    "FILE": "FILE gives each worker whole files: cassava's training split is a few files, so "
    "workers get unequal shares or none",
    "OFF": "OFF gives every worker every example: the workers train on the same data",
    "HINT": "HINT is for tf.data service sharding, not for this pipeline",
}


def _shard_problem(value: Any) -> str | None:
    """What is wrong with the learner's tf.data.Options (None: nothing)."""
    import tensorflow as tf

    if not isinstance(value, tf.data.Options):
        return gettext("returned {value}; return the tf.data.Options object").format(
            value=_describe(value)
        )
    policy = tf.data.experimental.AutoShardPolicy(value.experimental_distribute.auto_shard_policy)
    if policy == tf.data.experimental.AutoShardPolicy.DATA:
        return None
    why = SHARD_POLICY_HINTS.get(policy.name, "")
    return gettext("auto_shard_policy is {policy}: {why}").format(
        policy=policy.name, why=gettext(why) if why else ""
    )


def check_data_options(fn: Callable) -> Outcome:
    value, error = call(fn)
    problem = error or _shard_problem(value)
    found = (
        gettext("AutoShardPolicy.DATA, each worker takes every 2nd example")
        if problem is None
        else problem
    )
    lines = [_line(problem is None, gettext("2 workers reading cassava"), found)]
    hint = (
        gettext(
            "{problem}. Expected: options.experimental_distribute.auto_shard_policy = "
            "tf.data.experimental.AutoShardPolicy.DATA (shard by element)."
        ).format(problem=problem)
        if problem
        else ""
    )
    return Outcome("data_options", problem is None, lines, hint)


CHECKS: dict[str, Callable[[Callable], Outcome]] = {
    "_is_chief": check_is_chief,
    "_get_temp_dir": check_get_temp_dir,
    "write_filepath": check_write_filepath,
    "create_strategy": check_create_strategy,
    "create_model_in_scope": check_create_model_in_scope,
    "global_batch": check_global_batch,
    "data_options": check_data_options,
}
