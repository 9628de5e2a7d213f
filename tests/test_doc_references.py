"""Every file a doc or docstring names exists in the repository.

Read: Markdown files, the notebooks' Markdown cells (English and any translated edition),
Python docstrings and comments, and the comments of the Makefile, Dockerfile, YAML/TOML
files and CI scripts. A name with a file extension (``trainer/model.py``,
``README.md``, ``environment.yml``), or ``Dockerfile``/``Makefile``, must resolve to a file
of this checkout: from the repository's root, from the folder of the file that names it, or
by its base name (``task.py``). Files the kit *writes* at run time (``results.json``,
``metrics.json``, ...) and placeholders (``FILE.json``, ``DIR/gpu.json``) are listed below
with their writer, so a reference to a file that lives outside the repository (such as a
coordinator's ``design.md``) fails and is named.
"""

from __future__ import annotations

import ast
import io
import json
import re
import subprocess
import tokenize
from collections.abc import Iterator
from pathlib import Path

from labkit.cloud.paths import REPO_ROOT

EXTENSIONS = "py|md|json|ya?ml|toml|ipynb|txt|cfg|sh|csv|pb|keras|h5|html|lock"
REFERENCE = re.compile(
    rf"(?<![\w/.\-])((?:\.{{0,2}}/)?[\w.\-]+(?:/[\w.\-]+)*\.(?:{EXTENSIONS})|Dockerfile|Makefile)"
    r"(?![\w/])"
)
# Files written at run time, not shipped: base name -> what writes it.
WRITTEN_AT_RUN_TIME = {
    "results.json": "labkit.course.results.record (each notebook's results in the run folder)",
    "metrics.json": "trainer.export (the chief's training metrics)",
    "model.keras": "trainer.export (the Keras archive next to the SavedModel)",
    "saved_model.pb": "trainer.export",
    "latest.json": "python -m bench (bench/results/; the committed one is a clean make bench)",
    "quick.json": "python -m bench --quick",
    "gpu.json": "python -m bench.gpu",
    "processes.json": "labkit.local.emulator (the local service's state)",
    "job.json": "labkit.local.emulator",
    "server.json": "labkit.local.emulator",
    "images.json": "labkit.local.emulator",
    "iam.json": "labkit.local.emulator.iam (the local project's number and caller)",
    "services.json": "labkit.local.emulator.services (the local projects' enabled APIs)",
    "repositories.json": "labkit.local.emulator.artifact_registry (the local repositories)",
    "sample.json": "labkit.course.sample",
    "settings.json": "labkit.cloud.settings",
    "dataset_info.json": "TFDS, when it prepares a dataset",
    "owner.lock": "trainer.data (cache folders)",
    "index.html": "labkit.course.lab.write_report (the run folder's report page)",
    "overrides.json": "labkit.course.jupyterlab.write_settings (JupyterLab's settings)",
}
THIS_FILE = "tests/test_doc_references.py"
CONFIG_SUFFIXES = {".yml", ".yaml", ".toml", ".cfg"}
CONFIG_NAMES = {"Makefile", "Dockerfile", ".dockerignore", ".gitignore"}
NOT_FILES = {"tf.keras"}  # a module, not a file
# my_specs.json, FILE.json, DIR/x, folder/trainer/task.py: names a reader substitutes
PLACEHOLDER = re.compile(r"(^|/)(my[_.]|[A-Z][A-Z_]*(/|\.))|^(folder|path|some)/")


def tracked_files() -> list[str]:
    try:
        out = subprocess.run(
            ["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout
        return [line for line in out.splitlines() if (REPO_ROOT / line).is_file()]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: the kit's folders
        roots = ("trainer", "labkit", "bench", "tests", "notebooks", "codelab")
        files = [p for root in roots for p in (REPO_ROOT / root).rglob("*") if p.is_file()]
        files += [p for p in REPO_ROOT.glob("*") if p.is_file()]
        return [str(p.relative_to(REPO_ROOT)) for p in files if "__pycache__" not in p.parts]


def doc_texts(path: str) -> Iterator[tuple[str, str]]:
    """(where, text) for each doc piece of a file: Markdown, Markdown cells, docstrings,
    comments."""
    full = REPO_ROOT / path
    if full.suffix == ".md":
        yield path, full.read_text(encoding="utf-8")
    elif full.suffix == ".ipynb":
        cells = json.loads(full.read_text(encoding="utf-8"))["cells"]
        for index, cell in enumerate(cells):
            if cell["cell_type"] == "markdown":
                yield f"{path} cell {index}", "".join(cell["source"])
    elif full.suffix == ".py":
        source = full.read_text(encoding="utf-8")
        try:
            tree = ast.parse(source)
        except SyntaxError as err:  # name the file rather than fail somewhere inside ast
            raise AssertionError(f"{path} does not parse (line {err.lineno}): {err.msg}") from err
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    yield f"{path} docstring of {getattr(node, 'name', 'the module')}", doc
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                yield f"{path}:{token.start[0]}", token.string
    elif full.suffix in CONFIG_SUFFIXES or full.name in CONFIG_NAMES or path.startswith(".ci/"):
        for number, line in enumerate(full.read_text(encoding="utf-8").splitlines(), 1):
            if "#" in line:  # the comment part of a Makefile, Dockerfile, YAML, TOML or script
                yield f"{path}:{number}", line[line.index("#") :]


def resolves(reference: str, named_in: str, base_names: set[str]) -> bool:
    candidates = [
        (REPO_ROOT / reference.lstrip("/")).resolve(),
        (REPO_ROOT / Path(named_in).parent / reference).resolve(),
    ]
    if any(c.is_file() for c in candidates):
        return True
    name = Path(reference).name
    return ("/" not in reference.strip("./") and name in base_names) or name in WRITTEN_AT_RUN_TIME


def unresolved_references() -> list[str]:
    files = tracked_files()
    base_names = {Path(f).name for f in files}
    bad = []
    for path in files:
        if path == THIS_FILE:
            continue  # this file names stale references on purpose
        for where, text in doc_texts(path):
            for match in REFERENCE.finditer(text):
                reference = match.group(1)
                if reference in NOT_FILES or PLACEHOLDER.search(reference):
                    continue
                if not resolves(reference, path, base_names):
                    bad.append(f"{where}: {reference}")
    return bad


def test_doc_and_docstring_file_references_resolve():
    bad = unresolved_references()
    assert not bad, (
        "these docs name files that are not in the repository (point them at a file that "
        "is, or list a run-time output in WRITTEN_AT_RUN_TIME):\n  " + "\n  ".join(bad)
    )


def test_the_checker_catches_a_stale_reference():
    """design.md lives in the coordinator's folder, not here: naming it must fail."""
    assert not (REPO_ROOT / "design.md").exists()
    names = {Path(f).name for f in tracked_files()}
    assert not resolves("design.md", "trainer/model.py", names)
    assert resolves("trainer/model.py", "README.md", names)
    assert resolves("task.py", "bench/baseline.py", names)  # by base name
    assert resolves("metrics.json", "trainer/export.py", names)  # written at run time
    found = [m.group(1) for m in REFERENCE.finditer("see `docs/setup.md` and Dockerfile.")]
    assert found == ["docs/setup.md", "Dockerfile"]
