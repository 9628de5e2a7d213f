"""Chinese markdown paragraphs on one line each: a line break inside one is a space on screen.

Markdown renders a line break inside a paragraph (a soft break) as a space. English prose
wants that space; Chinese prose does not: JupyterLab shows "每写一部分就检查一部分； 然后…"
for a paragraph wrapped after "；". So the zh-CN notebooks keep each paragraph and each list
item on one line. `unwrap` joins the lines of a paragraph (with nothing between two
Chinese characters or at full-width punctuation, with a space where Latin text or code
meets Chinese), and
leaves alone what is not prose: fenced code, tables, headings, block quotes, HTML, a line
ending in a hard break (two spaces or a backslash), and every new list item.
`record_translations` stores zh-CN markdown through it, and a test keeps the editions so.
"""

from __future__ import annotations

import re
import unicodedata

_FENCE = re.compile(r"^\s*(```|~~~)")
_BLOCK_START = re.compile(r"^\s*([-*+]\s|\d+[.)]\s|#|>|\||<|!\[|```|~~~|\$\$)")


def _is_cjk(char: str) -> bool:
    """A Chinese character or full-width punctuation (，。；：（）“” and the like)."""
    if not char:
        return False
    name = unicodedata.name(char, "")
    return (
        unicodedata.east_asian_width(char) in ("W", "F")
        and not char.isspace()
        or name.startswith(("CJK", "FULLWIDTH", "IDEOGRAPHIC"))
    )


def _is_punctuation(char: str) -> bool:
    return bool(char) and _is_cjk(char) and unicodedata.category(char).startswith("P")


def _joiner(left: str, right: str) -> str:
    """What goes between the end of one line and the start of the next, joined: nothing
    between two Chinese characters or at full-width punctuation; elsewhere (Latin text,
    code) the space markdown would have shown."""
    last, first = left[-1:], right[:1]
    if _is_punctuation(last) or _is_punctuation(first) or (_is_cjk(last) and _is_cjk(first)):
        return ""
    return " "


def _is_item(line: str) -> bool:
    return re.match(r"^\s*([-*+]|\d+[.)])\s", line) is not None and not line.endswith(("  ", "\\"))


def _plain(line: str) -> bool:
    """A line of prose: not the start of another block."""
    return _BLOCK_START.match(line) is None


def unwrap(markdown: str) -> str:
    """``markdown`` with each paragraph and list item on one line, the rest as it was."""
    out: list[str] = []
    in_fence = False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
            out.append(line)
            continue
        if in_fence or not out or _FENCE.match(out[-1]) or not _joinable(out[-1], line):
            out.append(line)
            continue
        previous, rest = out[-1].rstrip(), line.strip()
        out[-1] = previous + _joiner(previous, rest) + rest
    return "\n".join(out)


def _joinable(previous: str, line: str) -> bool:
    """Join ``line`` to ``previous``: both prose of one paragraph, or ``line`` continuing a
    list item; never after a hard break, a heading, a table row or other block lines."""
    if not previous.strip() or not line.strip() or previous.endswith(("  ", "\\")):
        return False
    if not _plain(line):
        return False
    return _plain(previous) or _is_item(previous)


def hard_breaks(markdown: str) -> list[str]:
    """The lines of ``markdown`` that end inside a paragraph (what `unwrap` would join)."""
    kept = markdown.split("\n")
    joined = unwrap(markdown).split("\n")
    if kept == joined:
        return []
    return [line for line in kept if line not in joined]
