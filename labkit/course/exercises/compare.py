"""The learner's trainer beside the codelab's `codelab/trainer/task.py` and the kit's trainer.

One row per concern: the codelab's function, the learner's, and the kit's (whole functions,
read from the files with `ast` or from the package with `inspect.getsource`, never sliced),
with what the kit adds and why. HTML in Jupyter (the kit's code folded), text elsewhere.
"""

from __future__ import annotations

import ast
import dataclasses
import html
import importlib
import inspect
from pathlib import Path

from labkit.cloud import paths
from labkit.i18n import N_, gettext

CODELAB_TASK = paths.REPO_ROOT / "codelab" / "trainer" / "task.py"


@dataclasses.dataclass(frozen=True)
class Concern:
    """One thing every MWMS trainer does, where each trainer does it, and what the kit adds."""

    what: str
    codelab: tuple[str, ...]  # function names in codelab/trainer/task.py
    learner: tuple[str, ...]  # function names in the learner's task.py
    kit: tuple[str, ...]  # "module:function" in the kit's trainer package
    kit_adds: str


CONCERNS = (
    Concern(
        N_("who is the chief"),
        ("_is_chief",),
        ("_is_chief",),
        ("trainer.distribution:is_chief",),
        N_(
            "the same three cases you wrote (the codelab's rule misses no TF_CONFIG and worker 0 "
            "of a workers-only cluster, and its model then lands in workertemp_None/)"
        ),
    ),
    Concern(
        N_("where each worker saves"),
        ("_get_temp_dir", "write_filepath"),
        ("_get_temp_dir", "write_filepath"),
        ("trainer.distribution:worker_temp_dir", "trainer.distribution:write_dir"),
        N_(
            "temporary folders named by task type and index beside the model folder; like your "
            "main(), it deletes them after the save (the codelab leaves them in the bucket)"
        ),
    ),
    Concern(
        N_("the strategy"),
        ("main",),
        ("create_strategy",),
        ("trainer.distribution:create_strategy",),
        N_(
            "MWMS only when TF_CONFIG has a cluster (one machine: MirroredStrategy or none); "
            "gradients all-reduced in 4 MiB packs (0.25 s instead of 0.68 s per step between two "
            "local workers); a clear error for ps/evaluator pools"
        ),
    ),
    Concern(
        N_("the data"),
        ("create_dataset", "preprocess_data"),
        ("global_batch", "data_options", "create_dataset"),
        ("trainer.train:scale_batch", "trainer.train:shard_data", "trainer.data:make_pipeline"),
        N_(
            "shuffles encoded images before decoding and keeps uint8 until the batch (0.88 GB "
            "instead of 2.05 GB peak memory, about 1.4x faster); validation and test splits; any "
            "folder of class sub-folders as well as TFDS; every image checked once before "
            "training (--bad-images); a global batch larger than the split refused"
        ),
    ),
    Concern(
        N_("the model in the scope"),
        ("create_model", "main"),
        ("create_model_in_scope", "create_model"),
        ("trainer.train:build_in_scope", "trainer.model:build_model"),
        N_(
            "tf_keras imported explicitly (Keras 3's fit fails under MWMS on TensorFlow 2.21, "
            "keras-team/keras#20585); weights from ImageNet, none, or a local file (offline)"
        ),
    ),
    Concern(
        N_("training and saving"),
        ("main",),
        ("main",),
        (
            "trainer.train:run",
            "trainer.train:fit_with_callbacks",
            "trainer.train:save_where_this_task_should",
        ),
        N_(
            "AIP_MODEL_DIR / AIP_CHECKPOINT_DIR / AIP_TENSORBOARD_LOG_DIR from Vertex AI; "
            "BackupAndRestore, so a restarted job resumes after a preempted worker; evaluation on "
            "the validation split each epoch; a SavedModel with serving signatures and metrics.json"
        ),
    ),
)


def file_functions(path: str | Path) -> dict[str, str]:
    """Every top-level function of a Python file, name -> its whole source."""
    text = Path(path).read_text()
    tree = ast.parse(text)
    return {
        node.name: ast.get_source_segment(text, node) or ""
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
    }


def kit_source(ref: str) -> tuple[str, str]:
    """(``file:line``, whole source) of ``module:function`` in the kit's trainer."""
    module_name, _, name = ref.partition(":")
    obj = getattr(importlib.import_module(module_name), name)
    lines, first = inspect.getsourcelines(obj)
    where = Path(inspect.getsourcefile(obj) or "?").relative_to(paths.REPO_ROOT)
    return f"{where}:{first}", "".join(lines).rstrip()


@dataclasses.dataclass
class SideBySide:
    """The three trainers, concern by concern (see the module doc)."""

    learner_file: Path
    codelab: dict[str, str]
    learner: dict[str, str]

    def _kit(self, concern: Concern) -> list[tuple[str, str]]:
        return [kit_source(ref) for ref in concern.kit]

    def _pick(self, functions: dict[str, str], names: tuple[str, ...]) -> str:
        return "\n\n".join(functions.get(n, f"# (no {n})") for n in names)

    def __repr__(self) -> str:
        codelab = CODELAB_TASK.relative_to(paths.REPO_ROOT)
        out = [
            gettext("yours: {yours}   the codelab's: {codelab}").format(
                yours=self.learner_file, codelab=codelab
            )
        ]
        for concern in CONCERNS:
            out.append(f"\n=== {gettext(concern.what)} ===")
            out.append(
                gettext("--- the codelab ---") + "\n" + self._pick(self.codelab, concern.codelab)
            )
            out.append(gettext("--- yours ---") + "\n" + self._pick(self.learner, concern.learner))
            kit = "; ".join(
                f"{ref.split(':')[1]} ({where})"
                for ref, (where, _) in zip(concern.kit, self._kit(concern), strict=True)
            )
            out.append(gettext("--- the kit: {kit} ---").format(kit=kit))
            out.append(gettext("adds: {what}").format(what=gettext(concern.kit_adds)))
        return "\n".join(out)

    def _repr_html_(self) -> str:
        def pre(text: str) -> str:
            return f"<pre style='font-size:11px;white-space:pre-wrap'>{html.escape(text)}</pre>"

        rows = []
        for concern in CONCERNS:
            kit = "".join(
                f"<details><summary><code>{html.escape(where)}</code></summary>{pre(source)}</details>"
                for where, source in self._kit(concern)
            )
            rows.append(
                f"<tr><th colspan='3' style='text-align:left'>{html.escape(gettext(concern.what))}</th></tr>"
                f"<tr style='vertical-align:top'><td>{pre(self._pick(self.codelab, concern.codelab))}</td>"
                f"<td>{pre(self._pick(self.learner, concern.learner))}</td>"
                f"<td>{kit}<p><b>{html.escape(gettext('adds:'))}</b> "
                f"{html.escape(gettext(concern.kit_adds))}</p></td></tr>"
            )
        head = "".join(
            f"<th>{html.escape(gettext(label))}</th>"
            for label in ("the codelab's task.py", "your task.py", "the kit's trainer")
        )
        head = f"<tr>{head}</tr>"
        return f"<table style='table-layout:fixed;width:100%'>{head}{''.join(rows)}</table>"


def side_by_side(learner_file: str | Path | None) -> SideBySide | None:
    """The comparison for the learner's ``trainer/task.py`` (None: it was not written yet)."""
    if learner_file is None or not Path(learner_file).is_file():
        print(gettext("your trainer/task.py is not written yet: finish the exercises first"))
        return None
    return SideBySide(
        Path(learner_file), file_functions(CODELAB_TASK), file_functions(learner_file)
    )
