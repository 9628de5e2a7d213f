"""A CJK font for the charts, from a pinned PyPI package, and a check that it is used.

``noto-cjk-sans-otc`` ships Google's Noto Sans CJK collection (SIL OFL 1.1). Matplotlib's
own DejaVu Sans has no Chinese glyphs (the zh-CN charts would draw boxes), so
:func:`register` adds the collection's Simplified Chinese face and puts it *after* DejaVu Sans
in the sans-serif list: matplotlib falls back per glyph, so Latin text keeps its usual look in
both editions and Chinese text finds its glyphs. :func:`missing_glyphs` is what the tests use
to prove a rendered chart's fonts have every character it draws.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

CJK_FAMILY = "Noto Sans CJK SC"


def font_path() -> Path:
    """The Noto Sans CJK collection installed by the ``noto-cjk-sans-otc`` package."""
    try:
        from noto_cjk_sans_otc import FONT_PATH
    except ImportError as err:
        raise ImportError(
            "the CJK chart font is missing: install the project's pinned dependencies "
            "(make venv, or pip install -e .) which include noto-cjk-sans-otc"
        ) from err
    return Path(str(FONT_PATH))


@functools.cache
def register() -> str:
    """Add the CJK face to matplotlib (once) as a fallback after the default sans-serif font;
    returns its family name."""
    import matplotlib
    from matplotlib import font_manager

    font_manager.fontManager.addfont(str(font_path()))
    # Per-glyph fallback walks font.family, and a generic name such as "sans-serif" stands
    # for one font only, so the CJK face is listed after it in font.family itself.
    families = list(matplotlib.rcParams["font.family"])
    if CJK_FAMILY not in families:
        matplotlib.rcParams["font.family"] = [*families, CJK_FAMILY]
    return CJK_FAMILY


@functools.cache
def _charmap(fname: str, index: int) -> frozenset[int]:
    from fontTools.ttLib import TTFont

    with TTFont(fname, fontNumber=index, lazy=True) as font:
        return frozenset(font.getBestCmap())


def _fonts_for(prop: Any) -> list[tuple[str, int]]:
    """The font files (with collection index) matplotlib draws this text with, in fallback
    order."""
    from matplotlib import font_manager

    # the same lookup the Agg backend does; each result names its face in a collection
    paths = font_manager.fontManager._find_fonts_by_props(prop)
    return [(str(path), int(getattr(path, "face_index", 0))) for path in paths]


def text_artists(fig: Any) -> Iterable[Any]:
    """Every visible text of a figure: titles, labels, tick labels, legends, annotations."""
    from matplotlib.text import Text

    for artist in fig.findobj(Text):
        if artist.get_visible() and artist.get_text().strip():
            yield artist


def missing_glyphs(fig: Any) -> dict[str, str]:
    """``{text: characters no font in its fallback list has}`` for a figure; empty when the
    chart renders without boxes."""
    problems = {}
    for artist in text_artists(fig):
        text = artist.get_text()
        covered: set[int] = set()
        for fname, index in _fonts_for(artist.get_fontproperties()):
            covered |= _charmap(fname, index)
        missing = "".join(
            sorted({ch for ch in text if not ch.isspace() and ord(ch) not in covered})
        )
        if missing:
            problems[text] = missing
    return problems
