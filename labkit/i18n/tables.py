"""Plain-text tables whose columns line up in both editions.

``str.ljust`` counts characters, but a terminal, a notebook's text output and nbval all draw
a Chinese character two columns wide, so a table padded with ``ljust`` leans right as soon as a
cell holds 主工作器. The display width comes from ``wcwidth`` (the Unicode East Asian Width
tables, pinned in pyproject.toml and environment.yml); every plain-text table the kit prints
goes through :func:`text_table`, so there is one place that pads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal: 2 for each CJK character, 1 for ASCII."""
    from wcwidth import wcswidth

    width = wcswidth(text)
    # -1: a control character (a tab, say); count characters rather than fail
    return width if width >= 0 else len(text)


def pad(text: str, width: int, align: str = "<") -> str:
    """``text`` padded with spaces to ``width`` display columns, left (``<``) or right (``>``)."""
    fill = " " * max(width - display_width(text), 0)
    return fill + text if align == ">" else text + fill


def text_table(
    header: Sequence[Any],
    rows: Sequence[Sequence[Any]],
    align: str | Sequence[str] = "<",
    sep: str = "  ",
    min_widths: Sequence[int] | None = None,
) -> str:
    """Header and rows as aligned text. ``align``: one of ``<``/``>`` for every column or one
    per column, e.g. ``"<<>"`` (numbers read best right-aligned). ``min_widths``: columns at least this wide
    (a fixed layout that nbval reference outputs pin). Cells are shown with ``str``; trailing
    spaces are trimmed so reference outputs stay stable."""
    head = [str(h) for h in header]
    body = [["" if c is None else str(c) for c in row] for row in rows]
    for row in body:
        if len(row) != len(head):
            raise ValueError(f"a row has {len(row)} cells for {len(head)} columns: {row}")
    aligns = [align] * len(head) if align in ("<", ">") else list(align)
    if len(aligns) != len(head) or set(aligns) - {"<", ">"}:
        raise ValueError(f"align must be '<' or '>' once per column, got {align!r}")
    least = list(min_widths) if min_widths is not None else [0] * len(head)
    if len(least) != len(head):
        raise ValueError(f"min_widths needs one width per column, got {min_widths!r}")
    widths = [
        max([least[i], *(display_width(r[i]) for r in [head, *body])]) for i in range(len(head))
    ]
    return "\n".join(
        sep.join(pad(c, w, a) for c, w, a in zip(r, widths, aligns, strict=True)).rstrip()
        for r in [head, *body]
    )
