"""The list ``filter`` expressions Vertex accepts for custom jobs (the subset the kit needs).

Supported, as in Vertex's ListCustomJobs: ``labels.KEY="VALUE"``, ``labels.KEY:*`` (has the
label), ``state="JOB_STATE_SUCCEEDED"`` (also ``!=``), ``display_name="..."``,
``create_time>"2024-01-01T00:00:00Z"`` (and ``<``, ``>=``, ``<=``), combined with ``AND``,
``OR`` (AND binds tighter), ``NOT`` and parentheses. Any other field is a 400 naming it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from labkit.local.emulator.errors import bad_request

Predicate = Callable[[dict[str, Any]], bool]

_TOKEN_RE = re.compile(
    r'\s*(?:(?P<lp>\()|(?P<rp>\))|(?P<op>!=|>=|<=|=|:|>|<)|"(?P<q>(?:[^"\\]|\\.)*)"'
    r"|(?P<word>[^\s()=!<>:\"]+))"
)
_FIELDS = {
    "state": "state",
    "display_name": "displayName",
    "displayName": "displayName",
    "create_time": "createTime",
    "createTime": "createTime",
    "update_time": "updateTime",
    "updateTime": "updateTime",
    "name": "name",
}
_KEYWORDS = {"AND", "OR", "NOT"}


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m or m.end() == pos:
            raise bad_request(f"Invalid filter {text!r}: cannot parse near {text[pos:]!r}.")
        pos = m.end()
        kind = m.lastgroup or ""
        value = m.group(kind)
        if kind == "q":
            tokens.append(("str", value.replace('\\"', '"')))
        elif kind == "word" and value in _KEYWORDS:
            tokens.append((value, value))
        elif kind == "word":
            tokens.append(("str", value))
        else:
            tokens.append((kind, value))
    return tokens


def _compare(actual: Any, op: str, expected: str) -> bool:
    if actual is None:
        return op == "!="
    actual = str(actual)
    return {
        "=": actual == expected,
        "!=": actual != expected,
        ":": expected == "*" or expected in actual,
        ">": actual > expected,
        "<": actual < expected,
        ">=": actual >= expected,
        "<=": actual <= expected,
    }[op]


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos][0] if self.pos < len(self.tokens) else None

    def take(self, kind: str) -> str:
        if self.peek() != kind:
            raise bad_request(
                f"Invalid filter {self.text!r}: expected {kind} at token {self.pos + 1}."
            )
        value = self.tokens[self.pos][1]
        self.pos += 1
        return value

    def parse(self) -> Predicate:
        predicate = self.disjunction()
        if self.peek() is not None:
            raise bad_request(
                f"Invalid filter {self.text!r}: unexpected {self.tokens[self.pos][1]!r}."
            )
        return predicate

    def disjunction(self) -> Predicate:
        terms = [self.conjunction()]
        while self.peek() == "OR":
            self.take("OR")
            terms.append(self.conjunction())
        return lambda job: any(t(job) for t in terms)

    def conjunction(self) -> Predicate:
        terms = [self.unary()]
        while self.peek() in ("AND", "str", "lp", "NOT"):  # juxtaposition means AND
            if self.peek() == "AND":
                self.take("AND")
            terms.append(self.unary())
        return lambda job: all(t(job) for t in terms)

    def unary(self) -> Predicate:
        if self.peek() == "NOT":
            self.take("NOT")
            inner = self.unary()
            return lambda job: not inner(job)
        if self.peek() == "lp":
            self.take("lp")
            inner = self.disjunction()
            self.take("rp")
            return inner
        return self.comparison()

    def comparison(self) -> Predicate:
        field = self.take("str")
        negate = field.startswith("-")
        field = field.lstrip("-")
        op = self.take("op")
        expected = self.take("str")
        if field.startswith("labels."):
            key = field[len("labels.") :]

            def predicate(job: dict[str, Any]) -> bool:
                return _compare((job.get("labels") or {}).get(key), op, expected)

        elif field in _FIELDS:
            json_key = _FIELDS[field]

            def predicate(job: dict[str, Any]) -> bool:
                return _compare(job.get(json_key), op, expected)

        else:
            raise bad_request(
                f"Unsupported filter field {field!r}: use labels.KEY, state, display_name, "
                "create_time or update_time."
            )
        return (lambda job: not predicate(job)) if negate else predicate


def compile_filter(text: str | None) -> Predicate:
    """A predicate over job JSON; an empty filter matches everything."""
    if not text or not text.strip():
        return lambda job: True
    return _Parser(text).parse()
