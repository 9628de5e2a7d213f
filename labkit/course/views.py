"""How the notebooks show things: tables, the kit's own source, files, folder trees, log lines.

Every object here renders as HTML (or Markdown) in Jupyter and as plain aligned text
elsewhere: in papermill's executed notebooks and in the nbval reference outputs, which
compare that text.
"""

from __future__ import annotations

import dataclasses
import html
import inspect
import re
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from labkit.cloud import paths
from labkit.cloud.settings import Settings
from labkit.i18n import gettext, text_table


@dataclasses.dataclass
class Table:
    """Rows as an HTML table in Jupyter and as aligned text elsewhere (and in nbval)."""

    rows: list[Any]  # mappings or dataclass instances
    columns: list[str] | None = None

    def __post_init__(self) -> None:
        self.rows = [
            dataclasses.asdict(row) if dataclasses.is_dataclass(row) else dict(row)
            for row in self.rows
        ]

    def _columns(self) -> list[str]:
        if self.columns:
            return self.columns
        seen: dict[str, None] = {}
        for row in self.rows:
            seen.update(dict.fromkeys(row))
        return list(seen)

    @staticmethod
    def _cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.4g}"
        if isinstance(value, bool):
            return gettext("yes") if value else gettext("no")
        # the edition's words for the kit's fixed texts (headings, roles, check names)
        return "" if value is None else gettext(str(value))

    def __repr__(self) -> str:
        keys = self._columns()
        cols = [gettext(c) for c in keys]
        cells = [[self._cell(row.get(c)) for c in keys] for row in self.rows]
        return text_table(cols, cells)  # padded by display width: Chinese cells stay aligned

    def _repr_html_(self) -> str:
        cols = self._columns()
        head = "".join(f"<th>{html.escape(gettext(c))}</th>" for c in cols)
        body = "".join(
            "<tr>"
            + "".join(f"<td>{html.escape(self._cell(row.get(c)))}</td>" for c in cols)
            + "</tr>"
            for row in self.rows
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


@dataclasses.dataclass
class Code:
    """Source text shown with syntax highlighting in Jupyter, plain elsewhere."""

    text: str
    language: str = "python"

    def __repr__(self) -> str:
        return self.text

    def _repr_markdown_(self) -> str:
        return f"```{self.language}\n{self.text}\n```"


def show_source(obj: Any, around: str | None = None, context: int = 4) -> Code:
    """The package's own code for ``obj`` (never a copy), or only the lines ``around`` a
    snippet, with the file and line numbers so a learner can find it."""
    lines, first = inspect.getsourcelines(obj)
    where = f"# {Path(inspect.getsourcefile(obj) or '?').relative_to(paths.REPO_ROOT)}"
    if around is None:
        line = gettext("{where}, line {line}").format(where=where, line=first)
        return Code(line + "\n" + "".join(lines).rstrip())
    hits = [i for i, line in enumerate(lines) if around in line]
    if not hits:
        raise ValueError(
            f"{getattr(obj, '__qualname__', obj)} has no line containing {around!r}: the "
            "package changed; update the snippet in the notebook"
        )
    start, end = max(0, hits[0] - context), min(len(lines), hits[0] + context + 1)
    shown = textwrap.dedent("".join(lines[start:end])).rstrip()
    span = gettext("{where}, lines {first}-{last}").format(
        where=where, first=first + start, last=first + end - 1
    )
    return Code(f"{span}\n{shown}")


def show_file(path: str | Path, language: str = "") -> Code:
    """A file of the repository (e.g. the Dockerfile), as it is."""
    full = Path(path) if Path(path).is_absolute() else paths.REPO_ROOT / path
    return Code(full.read_text().rstrip(), language)


def show_settings(settings: Settings, knobs: Mapping[str, Any] | None = None) -> Table:
    """Mode, project, region, bucket, image and the size knobs in one table."""
    rows = [
        {"setting": "mode", "value": settings.mode},
        {"setting": "project", "value": settings.project_id},
        {"setting": "region", "value": settings.region},
        {"setting": "bucket", "value": settings.bucket_uri},
        {"setting": "image", "value": settings.image_uri},
        {"setting": "run id", "value": settings.run_id},
    ]
    rows += [{"setting": k, "value": v} for k, v in (knobs or {}).items()]
    return Table(rows, ["setting", "value"])


def tree(folder: str | Path, depth: int = 3) -> str:
    """The folder's files and sub-folders (to ``depth``), sizes in KB; what a run left."""
    root = Path(folder)
    if not root.exists():
        return f"{root} (does not exist)"
    lines = [str(root)]
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if len(rel.parts) > depth:
            continue
        size = "" if path.is_dir() else f"  {path.stat().st_size / 1024:.0f} KB"
        lines.append("  " * len(rel.parts) + rel.name + ("/" if path.is_dir() else "") + size)
    return "\n".join(lines)


def matching_lines(text: str, pattern: str) -> list[str]:
    """Lines of a log that match a regular expression (e.g. what each worker saved)."""
    return [line for line in text.splitlines() if re.search(pattern, line)]


def find_leftovers(folder: str | Path, marker: str = "workertemp") -> list[str]:
    """Paths under ``folder`` whose name contains ``marker`` (the non-chief copies)."""
    return sorted(str(p) for p in Path(folder).rglob(f"*{marker}*"))
