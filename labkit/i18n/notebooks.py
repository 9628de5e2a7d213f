"""The zh-CN notebooks, generated from the English ones so they cannot drift.

The English notebooks in ``notebooks/`` are the single source of code. ``sync`` rebuilds
``notebooks/zh-CN/NAME.ipynb`` cell by cell from the English notebook:

* code (and raw) cells are copied as they are: source and tags; an nbval reference cell keeps
  the edition's own recorded outputs while its code is unchanged;
* each markdown cell takes the stored translation of that English cell (the zh-CN cell with
  the same id, from the previous zh-CN notebook). A translation records in its metadata,
  ``{"i18n": {"source_id": ..., "source_sha": ...}}``, the hash of the English text it
  translates. When the English cell changes, the hash no longer matches and ``stale`` names
  the cell; a new English cell gets the English text with ``source_sha: null`` until someone
  translates it;
* a code cell with comments or docstrings (what a learner reads in the parameters and
  exercise cells) is translated the same way, but only its comments and docstrings: the
  stored translation is used only while its code, read without them (`code_fingerprint`),
  is the English cell's. When the English code changes, the edition gets the English cell
  (the code must run as written) and ``stale`` names it until it is translated again.

A translation survives a cell being re-created under another id as long as the English text
is the same (matched by hash). Workflow: ``python -m labkit i18n sync``, translate the cells
``python -m labkit i18n stale`` lists (edit them in Jupyter), then
``python -m labkit i18n reviewed NB CELL_ID...`` to record that they match the English again.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from labkit.cloud import paths
from labkit.i18n import LANGUAGES, normalize_language, paragraphs

EN_DIR = paths.REPO_ROOT / "notebooks"
META_KEY = "i18n"
TRANSLATED = ("markdown",)  # cell types whose text is translated; the rest are copied
# nbval's cell tag: the cell's stored outputs are its reference. Each edition records its own
# (`python -m labkit lab --update-references --lang zh-CN`), so sync keeps the edition's.
REFERENCE_TAG = "nbval-check-output"


def edition_dir(lang: str, en_dir: Path = EN_DIR) -> Path:
    """Where an edition's notebooks live: ``notebooks/`` for English, ``notebooks/zh-CN/``."""
    lang = normalize_language(lang)
    return en_dir if lang == "en" else en_dir / lang


def source_hash(text: str | Sequence[str]) -> str:
    """A short, stable fingerprint of a cell's English text."""
    text = "".join(text) if not isinstance(text, str) else text
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def english_notebooks(en_dir: Path = EN_DIR) -> list[Path]:
    return sorted(en_dir.glob("[0-9][0-9]_*.ipynb"))


def _read(path: Path) -> Any:
    import nbformat

    return nbformat.read(str(path), as_version=4)


def _cell_source(cell: Any) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


@dataclasses.dataclass(frozen=True)
class CellState:
    """One English text cell and the state of its translation."""

    notebook: str
    index: int  # position in the English notebook (0-based, all cells)
    cell_id: str
    state: str  # ok | stale | untranslated | missing-notebook | out-of-sync
    english: str  # the current English text

    def describe(self) -> str:
        first = next((ln for ln in self.english.splitlines() if ln.strip()), "")[:70]
        return f"{self.notebook} cell {self.index} (id {self.cell_id}): {self.state}: {first}"


@dataclasses.dataclass
class SyncReport:
    notebook: str
    written: bool
    states: list[CellState]
    dropped: list[str]  # ids of translations whose English cell is gone

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for state in self.states:
            out[state.state] = out.get(state.state, 0) + 1
        return out


def _parse_cell(source: str) -> Any | None:
    """The cell's Python tree (IPython's own transformer turns magics such as ``%pip`` and
    ``!ls`` into Python first), or None when it does not parse."""
    import ast

    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return None


def _strip_docstrings(tree: Any) -> int:
    """Remove the docstrings of the module, its classes and functions; return how many."""
    import ast

    removed = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        first = node.body[0] if node.body else None
        if (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            node.body = node.body[1:] or [ast.Pass()]
            removed += 1
    return removed


def code_fingerprint(source: str) -> str:
    """A code cell's code without its comments and docstrings (its parsed tree), so that two
    editions are compared token for token on what runs; source that does not parse is
    compared as text."""
    import ast

    tree = _parse_cell(source)
    if tree is None:
        return source
    _strip_docstrings(tree)
    return ast.dump(tree)


def _has_comment(source: str) -> bool:
    import io
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return "#" in source
    return any(t.type == tokenize.COMMENT for t in tokens)


def reads_for_a_person(cell: Any) -> bool:
    """Whether a cell holds text a translator translates: markdown, or a code cell with a
    comment or a docstring."""
    if cell.cell_type in TRANSLATED:
        return True
    if cell.cell_type != "code":
        return False
    source = _cell_source(cell)
    tree = _parse_cell(source)
    return _has_comment(source) or (tree is not None and _strip_docstrings(tree) > 0)


def _translations(nb: Any | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The stored translations of a zh-CN notebook, by English cell id and by English hash."""
    by_id: dict[str, Any] = {}
    by_sha: dict[str, Any] = {}
    for cell in nb.cells if nb is not None else []:
        meta = cell.get("metadata", {}).get(META_KEY)
        if not meta:
            continue
        by_id[meta.get("source_id") or cell.get("id")] = cell
        if meta.get("source_sha"):
            by_sha.setdefault(meta["source_sha"], cell)
    return by_id, by_sha


@dataclasses.dataclass
class _Store:
    """The previous edition's translations while one notebook is built (each used once)."""

    by_id: dict[str, Any]
    by_sha: dict[str, Any]
    used: set[int] = dataclasses.field(default_factory=set)

    def take(self, cell: Any, sha: str) -> Any | None:
        """The stored translation of ``cell``: the same id, else the same English text."""
        exact = self.by_id.get(cell.id)
        if exact is None or exact["metadata"][META_KEY].get("source_sha") != sha:
            exact = self.by_sha.get(sha) or exact
        if exact is None or id(exact) in self.used or exact.cell_type != cell.cell_type:
            return None  # the same text twice: one translation each
        self.used.add(id(exact))
        return exact


def _translated_cell(cell: Any, store: _Store) -> tuple[Any, str]:
    """The edition's cell for an English cell a person reads, and its state. A code cell
    keeps its translated comments only while its code is the English cell's."""
    import nbformat

    text = _cell_source(cell)
    sha = source_hash(text)
    stored = store.take(cell, sha)
    recorded = None if stored is None else stored["metadata"][META_KEY].get("source_sha")
    translated = text if stored is None else stored.source
    state = "ok" if recorded == sha else ("untranslated" if recorded is None else "stale")
    if cell.cell_type == "code":
        new = copy.deepcopy(cell)
        if code_fingerprint(translated) != code_fingerprint(text):
            translated, state = text, ("untranslated" if recorded is None else "stale")
        new.source = translated
    else:
        new = nbformat.v4.new_markdown_cell(translated)
        new.id = cell.id
        new.metadata = copy.deepcopy(cell.metadata)
        if cell.get("attachments"):
            new.attachments = copy.deepcopy(cell.attachments)
    new.metadata[META_KEY] = {"source_id": cell.id, "source_sha": recorded}
    return new, state


def build(english: Any, previous: Any | None, name: str) -> tuple[Any, list[CellState], list[str]]:
    """The zh-CN notebook for an English one, keeping ``previous``'s translations."""
    import nbformat

    store = _Store(*_translations(previous))
    references = _edition_references(previous)
    out = nbformat.v4.new_notebook()
    out.metadata = copy.deepcopy(english.metadata)
    states = []
    for index, cell in enumerate(english.cells):
        if not reads_for_a_person(cell):
            out.cells.append(_keep_edition_outputs(copy.deepcopy(cell), references))
            continue
        new, state = _translated_cell(cell, store)
        out.cells.append(_keep_edition_outputs(new, references))
        states.append(CellState(name, index, cell.id, state, _cell_source(cell)))
    dropped = [
        key
        for key, cell in store.by_id.items()
        if id(cell) not in store.used and key not in english_ids(english)
    ]
    return out, states, dropped


def is_reference(cell: Any) -> bool:
    """A code cell whose stored outputs nbval compares (tagged `REFERENCE_TAG`)."""
    tags = (cell.get("metadata") or {}).get("tags") or []
    return cell.get("cell_type") == "code" and REFERENCE_TAG in tags


def _edition_references(previous: Any | None) -> dict[str, Any]:
    """The edition's own reference cells, by id."""
    cells = previous.cells if previous is not None else []
    return {cell.get("id"): cell for cell in cells if is_reference(cell)}


def _keep_edition_outputs(cell: Any, references: Mapping[str, Any]) -> Any:
    """A reference cell keeps the outputs the edition's own run recorded, while its code is
    the English cell's; otherwise (new or changed code) it gets the English outputs until the
    edition's references are recorded again."""
    mine = references.get(cell.get("id"))
    same_code = mine is not None and (
        code_fingerprint(_cell_source(mine)) == code_fingerprint(_cell_source(cell))
    )
    if is_reference(cell) and same_code:
        cell.outputs = copy.deepcopy(mine.outputs)
        cell.execution_count = mine.get("execution_count")
    return cell


def english_ids(nb: Any) -> set[str]:
    return {cell.get("id") for cell in nb.cells}


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def sync(
    lang: str = "zh-CN",
    names: Iterable[str] | None = None,
    en_dir: Path = EN_DIR,
    *,
    write: bool = True,
) -> list[SyncReport]:
    """Rebuild the edition's notebooks from the English ones (written only when changed)."""
    import nbformat

    lang = normalize_language(lang)
    if lang == "en":
        raise ValueError(f"English is the source; sync one of {', '.join(LANGUAGES[1:])}")
    target_dir = edition_dir(lang, en_dir)
    reports = []
    for path in _select(english_notebooks(en_dir), names):
        target = target_dir / path.name
        previous = _read(target) if target.is_file() else None
        built, states, dropped = build(_read(path), previous, path.stem)
        changed = previous is None or not _same(built, previous)
        if write and changed:
            target_dir.mkdir(parents=True, exist_ok=True)
            nbformat.validate(built)
            nbformat.write(built, str(target))
        reports.append(SyncReport(path.stem, write and changed, states, dropped))
    return reports


def _select(found: list[Path], names: Iterable[str] | None) -> list[Path]:
    if not names:
        return found
    picked = []
    for name in names:
        matches = [p for p in found if p.stem == name or p.stem.split("_", 1)[0] == name]
        if len(matches) != 1:
            raise ValueError(
                f"unknown notebook {name!r}: use 00-05 or a name such as {found[0].stem}"
            )
        picked.extend(matches)
    return picked


def status(lang: str = "zh-CN", en_dir: Path = EN_DIR) -> list[CellState]:
    """Every English text cell and its translation's state, without writing anything.

    ``out-of-sync`` means the edition's notebook does not have the English notebook's cells
    (order, ids or code): run ``sync``."""
    lang = normalize_language(lang)
    target_dir = edition_dir(lang, en_dir)
    states: list[CellState] = []
    for path in english_notebooks(en_dir):
        target = target_dir / path.name
        english = _read(path)
        if not target.is_file():
            states += [
                CellState(path.stem, i, c.id, "missing-notebook", _cell_source(c))
                for i, c in enumerate(english.cells)
                if reads_for_a_person(c)
            ]
            continue
        edition = _read(target)
        built, cell_states, _ = build(english, edition, path.stem)
        states += cell_states
        for problem in structure_problems(english, edition):
            states.append(CellState(path.stem, problem[0], problem[1], "out-of-sync", problem[2]))
    return states


def stale(lang: str = "zh-CN", en_dir: Path = EN_DIR) -> list[CellState]:
    """The cells that need (re-)translation or a sync; empty when the edition is current."""
    return [s for s in status(lang, en_dir) if s.state != "ok"]


def structure_problems(english: Any, edition: Any) -> list[tuple[int, str, str]]:
    """Cells where the edition differs from the English notebook in anything but translated
    text: (index, id, what). Code cells must be identical (tags, outputs, and the code token
    for token), but for the translation of their comments and docstrings."""
    problems = []
    if len(english.cells) != len(edition.cells):
        problems.append((-1, "-", f"{len(edition.cells)} cells, English has {len(english.cells)}"))
    for index, (en, ed) in enumerate(zip(english.cells, edition.cells, strict=False)):
        if en.cell_type != ed.cell_type or en.get("id") != ed.get("id"):
            problems.append(
                (index, en.get("id"), f"cell differs: {en.cell_type} vs {ed.cell_type}")
            )
        elif en.cell_type not in TRANSLATED:
            problem = _code_difference(en, ed)
            if problem:
                problems.append((index, en.get("id"), problem))
    return problems


def _code_difference(english: Any, edition: Any) -> str:
    """What differs between two editions of a code cell, beyond translated comments and
    docstrings ("" when nothing does)."""
    if code_fingerprint(_cell_source(english)) != code_fingerprint(_cell_source(edition)):
        return f"code differs (comments and docstrings aside): {_cell_source(english)[:60]!r}"
    bare_en, bare_ed = (copy.deepcopy(c) for c in (english, edition))
    for bare in (bare_en, bare_ed):
        bare.pop("source", None)
        bare.get("metadata", {}).pop(META_KEY, None)
        if is_reference(bare):  # each edition's references come from its own run
            bare.pop("outputs", None)
            bare.pop("execution_count", None)
    if not _same(bare_en, bare_ed):
        return f"cell differs in tags, outputs or metadata: {_cell_source(english)[:60]!r}"
    return ""


def _refuse_changed_code(where: str, translation: str, english: Any) -> None:
    """Refuse a code cell's translation that changes more than comments and docstrings, before
    anything is written: the edition's code must run as the English cell's does."""
    if code_fingerprint(translation) != code_fingerprint(_cell_source(english)):
        raise ValueError(
            f"{where}: the translation changes the code, not only its comments and docstrings;"
            " translate those and keep every other token"
        )


def record_translations(
    notebook: str,
    translations: Mapping[str, tuple[str | None, str | None]],
    lang: str = "zh-CN",
    en_dir: Path = EN_DIR,
) -> list[CellState]:
    """Store translations: ``{cell_id: (source_sha, text)}``. ``source_sha`` is the hash of
    the English text that was translated (None: the current one; a translation made from an
    older English text then shows as stale, as it should); ``text`` None keeps the cell's
    text (a review). Syncs the notebook first; returns its cells' states afterwards."""
    import nbformat

    lang = normalize_language(lang)
    (report,) = sync(lang, [notebook], en_dir)
    path = edition_dir(lang, en_dir) / f"{report.notebook}.ipynb"
    english = {c.id: c for c in _read(en_dir / path.name).cells}
    nb = _read(path)
    cells = {c.get("id"): c for c in nb.cells if reads_for_a_person(c)}
    for cell_id, (sha, text) in translations.items():
        if cell_id not in cells:
            raise KeyError(f"{path.name} has no text cell with id {cell_id!r}")
        cell = cells[cell_id]
        if text is not None and cell.cell_type == "code":
            _refuse_changed_code(f"{path.name} cell {cell_id}", text, english[cell_id])
        if text is not None:
            cell.source = text
        if cell.cell_type != "code" and lang == "zh-CN":  # a break in a Chinese paragraph
            cell.source = paragraphs.unwrap(cell.source)  # shows as a space: one line each
        current = source_hash(_cell_source(english[cell_id]))
        cell.metadata[META_KEY] = {"source_id": cell_id, "source_sha": sha or current}
    nbformat.write(nb, str(path))
    return build(_read(en_dir / path.name), nb, report.notebook)[1]


def mark_translated(
    notebook: str, cell_id: str, text: str | None = None, lang: str = "zh-CN", en_dir: Path = EN_DIR
) -> None:
    """Record that a cell's translation (``text``, or what the edition's cell holds now)
    matches the current English cell."""
    record_translations(notebook, {cell_id: (None, text)}, lang, en_dir)
