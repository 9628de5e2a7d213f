"""labkit's tree shows its architecture: subpackages only, and each imports only what it may.

The layering (each subpackage's docstring says it in words): `i18n` <- `cloud` <- `local` <-
`course` (`i18n` reads only `cloud.paths`, to find the notebooks it keeps in step). A module-level import that goes the other way would make `labkit spec validate` pay
for the platform, or the platform depend on notebooks; an import inside a function is allowed
for `cloud` -> `local` (local-mode code paths) and checked nowhere else.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LABKIT = Path(__file__).resolve().parents[1] / "labkit"
SUBPACKAGES = ("i18n", "cloud", "local", "course")
# What each subpackage may import at module level (besides itself and `labkit` constants):
# module prefixes. `i18n` needs only where the repository is (the notebooks it syncs).
ALLOWED = {
    "i18n": ("labkit.cloud.paths",),
    "cloud": ("labkit.i18n",),
    "local": ("labkit.i18n", "labkit.cloud"),
    "course": ("labkit.i18n", "labkit.cloud", "labkit.local"),
}


def test_top_level_holds_only_subpackages_and_the_cli_entry() -> None:
    entries = {p.name for p in LABKIT.iterdir() if not p.name.startswith((".", "__pycache__"))}
    assert entries == {"__init__.py", "__main__.py", *SUBPACKAGES}


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_each_subpackage_says_what_it_is_and_what_it_may_import(package: str) -> None:
    doc = ast.get_docstring(ast.parse((LABKIT / package / "__init__.py").read_text()))
    assert doc and "import" in doc.lower(), f"labkit/{package}/__init__.py needs a docstring"


def _module_level_labkit_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    found = []
    for node in tree.body:  # module level only: not inside functions
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return [(line, name) for line, name in found if name.startswith("labkit.")]


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_module_level_imports_follow_the_layering(package: str) -> None:
    wrong = []
    for path in sorted((LABKIT / package).rglob("*.py")):
        for line, name in _module_level_labkit_imports(path):
            first = name.split(".")[1]
            if first == package or first not in SUBPACKAGES:  # itself, or labkit's constants
                continue
            if not any(name == a or name.startswith(a + ".") for a in ALLOWED[package]):
                wrong.append(f"{path.relative_to(LABKIT.parent)}:{line} imports {name}")
    assert not wrong, f"labkit.{package} may import only {ALLOWED[package]}:\n" + "\n".join(wrong)
