"""The zh-CN notebooks, generated from the English ones so they cannot drift.

The English notebooks in ``notebooks/`` are the single source of code. ``sync`` rebuilds
``notebooks/zh-CN/NAME.ipynb`` cell by cell from the English notebook:

* code (and raw) cells are copied as they are: source, tags, nbval reference outputs;
* each markdown cell takes the stored translation of that English cell (the zh-CN cell with
  the same id, from the previous zh-CN notebook). A translation records in its metadata,
  ``{"i18n": {"source_id": ..., "source_sha": ...}}``, the hash of the English text it
  translates. When the English cell changes, the hash no longer matches and ``stale`` names
  the cell; a new English cell gets the English text with ``source_sha: null`` until someone
  translates it.

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
from labkit.i18n import LANGUAGES, normalize_language

EN_DIR = paths.REPO_ROOT / "notebooks"
META_KEY = "i18n"
TRANSLATED = ("markdown",)  # cell types whose text is translated; the rest are copied


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


def _translations(nb: Any | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The stored translations of a zh-CN notebook, by English cell id and by English hash."""
    by_id: dict[str, Any] = {}
    by_sha: dict[str, Any] = {}
    for cell in nb.cells if nb is not None else []:
        meta = cell.get("metadata", {}).get(META_KEY)
        if cell.cell_type not in TRANSLATED or not meta:
            continue
        by_id[meta.get("source_id") or cell.get("id")] = cell
        if meta.get("source_sha"):
            by_sha.setdefault(meta["source_sha"], cell)
    return by_id, by_sha


def build(english: Any, previous: Any | None, name: str) -> tuple[Any, list[CellState], list[str]]:
    """The zh-CN notebook for an English one, keeping ``previous``'s translations."""
    import nbformat

    by_id, by_sha = _translations(previous)
    used: set[int] = set()
    out = nbformat.v4.new_notebook()
    out.metadata = copy.deepcopy(english.metadata)
    states = []
    for index, cell in enumerate(english.cells):
        if cell.cell_type not in TRANSLATED:
            out.cells.append(copy.deepcopy(cell))
            continue
        text = _cell_source(cell)
        sha = source_hash(text)
        exact = by_id.get(cell.id)
        if exact is None or exact["metadata"][META_KEY].get("source_sha") != sha:
            exact = by_sha.get(sha) or exact
        if exact is not None and id(exact) in used:  # the same text twice: one translation each
            exact = None
        if exact is None:
            recorded, translated = None, text
        else:
            used.add(id(exact))
            recorded, translated = exact["metadata"][META_KEY].get("source_sha"), exact.source
        state = "ok" if recorded == sha else ("untranslated" if recorded is None else "stale")
        new = nbformat.v4.new_markdown_cell(translated)
        new.id = cell.id
        new.metadata = copy.deepcopy(cell.metadata)
        new.metadata[META_KEY] = {"source_id": cell.id, "source_sha": recorded}
        if cell.get("attachments"):
            new.attachments = copy.deepcopy(cell.attachments)
        out.cells.append(new)
        states.append(CellState(name, index, cell.id, state, text))
    dropped = [
        key
        for key, cell in by_id.items()
        if id(cell) not in used and key not in english_ids(english)
    ]
    return out, states, dropped


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
                if c.cell_type in TRANSLATED
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
    text: (index, id, what). Code cells must be identical, source and tags and outputs."""
    problems = []
    if len(english.cells) != len(edition.cells):
        problems.append((-1, "-", f"{len(edition.cells)} cells, English has {len(english.cells)}"))
    for index, (en, ed) in enumerate(zip(english.cells, edition.cells, strict=False)):
        if en.cell_type != ed.cell_type or en.get("id") != ed.get("id"):
            problems.append(
                (index, en.get("id"), f"cell differs: {en.cell_type} vs {ed.cell_type}")
            )
        elif en.cell_type not in TRANSLATED and not _same(en, ed):
            problems.append((index, en.get("id"), f"code differs: {_cell_source(en)[:60]!r}"))
    return problems


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
    cells = {c.get("id"): c for c in nb.cells if c.cell_type in TRANSLATED}
    for cell_id, (sha, text) in translations.items():
        if cell_id not in cells:
            raise KeyError(f"{path.name} has no text cell with id {cell_id!r}")
        cell = cells[cell_id]
        if text is not None:
            cell.source = text
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
