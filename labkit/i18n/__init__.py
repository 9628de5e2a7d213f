"""The kit in two editions, English (``en``) and Simplified Chinese (``zh-CN``).

One place for every learner-facing word that is not notebook prose:

* :func:`gettext` / :func:`translator` translate the kit's own messages (printed summaries,
  table headings, chart titles, console labels) through a gettext catalog,
  ``locale/zh_CN/LC_MESSAGES/labkit.po``, read with ``polib`` (no compiled ``.mo`` in git).
  The English text is the message id, so the English edition needs no catalog at all.
* :func:`term` looks up Google Cloud / Vertex AI vocabulary in ``glossary.csv``: the single
  list of official zh-CN console terms (工作器池, 主工作器, 自定义训练（高级）...). The
  catalog, the zh-CN notebooks and the console page must use these words; tests check it.

Which edition is active: :func:`set_language` if called, else ``$LABKIT_LANG``, else the
notebook's own folder (a kernel started for ``notebooks/zh-CN/*.ipynb`` runs with that folder
as its working directory, so identical code cells print Chinese there), else English.
Error messages stay English, as TensorFlow's do.

Public API (kept stable; the console page uses it): ``LANGUAGES``, ``DEFAULT_LANGUAGE``,
``normalize_language``, ``current_language``, ``set_language``, ``translator``,
``Translator``, ``gettext`` (alias ``_``), ``term``, ``glossary``, ``Term``, ``using`` (a
language for one block, e.g. one web request), ``text_table`` / ``display_width`` (plain-text
tables that stay aligned when cells hold Chinese, see ``tables.py``).

May import: the standard library, its pinned packages (polib, wcwidth, matplotlib's font
manager) and `labkit.cloud.paths` (where the notebooks are); nothing else in labkit, since
every other subpackage prints through it.
"""

from __future__ import annotations

import contextlib
import contextvars
import csv
import dataclasses
import functools
import os
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
LANGUAGES: tuple[str, ...] = ("en", "zh-CN")
DEFAULT_LANGUAGE = "en"
ENV_VAR = "LABKIT_LANG"
GLOSSARY_FILE = HERE / "glossary.csv"
LOCALE_DIR = HERE / "locale"
DOMAIN = "labkit"
_ALIASES = {
    "en": "en",
    "en-us": "en",
    "en_us": "en",
    "english": "en",
    "zh": "zh-CN",
    "zh-cn": "zh-CN",
    "zh_cn": "zh-CN",
    "zh-hans": "zh-CN",
    "zh-hans-cn": "zh-CN",
    "cn": "zh-CN",
}
_chosen: str | None = None
# a language for one block of work (a web request, a test), safe across threads and tasks
_scoped: contextvars.ContextVar[str | None] = contextvars.ContextVar("labkit_lang", default=None)


def normalize_language(value: str | None, *, strict: bool = True) -> str:
    """``"zh-CN"`` for zh-CN/zh_CN/zh/zh-Hans..., ``"en"`` for en/en-US, the default for
    None/"". Unknown codes raise ValueError, or fall back to English with ``strict=False``
    (what a web page does with an unknown ``?hl=``)."""
    if not value:
        return DEFAULT_LANGUAGE
    found = _ALIASES.get(value.strip().lower())
    if found:
        return found
    if strict:
        raise ValueError(f"unknown language {value!r}: use one of {', '.join(LANGUAGES)}")
    return DEFAULT_LANGUAGE


def _language_of_folder(folder: Path) -> str | None:
    """``zh-CN`` when the folder itself is an edition folder (``notebooks/zh-CN``); only the
    last part counts, so a checkout that merely lives under such a name stays English."""
    return "zh-CN" if folder.name.lower() in ("zh-cn", "zh_cn") else None


def current_language() -> str:
    """The active edition: using(), else set_language(), else $LABKIT_LANG, else a working
    directory named ``zh-CN`` (the zh-CN notebooks' kernels), else English."""
    if _scoped.get():
        return _scoped.get()  # type: ignore[return-value]
    if _chosen:
        return _chosen
    if os.environ.get(ENV_VAR):
        return normalize_language(os.environ[ENV_VAR])
    try:
        return _language_of_folder(Path.cwd()) or DEFAULT_LANGUAGE
    except OSError:  # the working directory was deleted
        return DEFAULT_LANGUAGE


def set_language(lang: str | None) -> str:
    """Fix the edition for this process (None: back to automatic); returns the active one."""
    global _chosen
    _chosen = normalize_language(lang) if lang else None
    return current_language()


@contextlib.contextmanager
def using(lang: str | None) -> Iterator[str]:
    """Everything inside the block speaks ``lang`` (e.g. one console request with ``?hl=``),
    without changing the edition of the rest of the process."""
    token = _scoped.set(normalize_language(lang) if lang else None)
    try:
        yield current_language()
    finally:
        _scoped.reset(token)


# --------------------------------------------------------------------------- glossary


@dataclasses.dataclass(frozen=True)
class Term:
    """One glossary row: the English term, Google's zh-CN term, where it appears, source, and
    the zh-CN words it replaces (one term per concept: tests/test_i18n.py fails when one of
    them appears in zh-CN text)."""

    key: str
    en: str
    zh_CN: str
    where: str
    source: str
    replaces: tuple[str, ...] = ()

    def text(self, lang: str | None = None) -> str:
        return self.zh_CN if normalize_language(lang or current_language()) == "zh-CN" else self.en


@functools.cache
def glossary() -> dict[str, Term]:
    """Every glossary term by key, in file order."""
    with GLOSSARY_FILE.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    terms = {}
    for row in rows:
        key = row["key"].strip()
        if key in terms:
            raise ValueError(f"{GLOSSARY_FILE.name}: duplicate key {key!r}")
        replaces = tuple(word for word in (row.get("replaces") or "").split("|") if word)
        terms[key] = Term(key, row["en"], row["zh-CN"], row["where"], row["source"], replaces)
    return terms


def term(key: str, lang: str | None = None) -> str:
    """A glossary term in the given (default: active) edition, e.g. term("chief") ->
    "chief" or "主工作器"."""
    try:
        return glossary()[key].text(lang)
    except KeyError:
        raise KeyError(
            f"no glossary term {key!r}: add it to {GLOSSARY_FILE} (known: {', '.join(glossary())})"
        ) from None


# --------------------------------------------------------------------------- catalogs


def catalog_path(lang: str) -> Path:
    """Where the gettext catalog of an edition lives (``zh-CN`` -> ``locale/zh_CN/...``)."""
    return LOCALE_DIR / normalize_language(lang).replace("-", "_") / "LC_MESSAGES" / f"{DOMAIN}.po"


@dataclasses.dataclass(frozen=True)
class Translator:
    """The kit's messages in one edition. ``gettext``/``ngettext`` follow the gettext
    interface, so ``jinja2``'s i18n extension can use them:
    ``env.install_gettext_callables(t.gettext, t.ngettext, newstyle=True)``."""

    lang: str
    messages: dict[str, str]

    def gettext(self, message: str) -> str:
        return self.messages.get(message) or message

    def ngettext(self, singular: str, plural: str, n: int) -> str:
        return self.gettext(singular if n == 1 else plural)

    def term(self, key: str) -> str:
        return term(key, self.lang)

    __call__ = gettext


def translator(lang: str | None = None) -> Translator:
    """The translator for an edition (default: the active one at call time)."""
    return _translator(normalize_language(lang or current_language()))


@functools.cache
def _translator(lang: str) -> Translator:
    if lang == DEFAULT_LANGUAGE:
        return Translator(lang, {})
    import polib

    path = catalog_path(lang)
    if not path.is_file():
        raise FileNotFoundError(f"no catalog for {lang}: expected {path}")
    messages = {
        entry.msgid: entry.msgstr
        for entry in polib.pofile(str(path))
        if entry.msgstr and not entry.obsolete and "fuzzy" not in entry.flags
    }
    return Translator(lang, messages)


def gettext(message: str, lang: str | None = None) -> str:
    """``message`` (English, the msgid) in the given or active edition. Use
    ``_("Images per class").format(...)`` with named placeholders for values."""
    return translator(normalize_language(lang or current_language())).gettext(message)


_ = gettext


def N_(message: str) -> str:
    """Mark ``message`` (English) for the catalog where it is kept as data, to be translated
    with `gettext` where it is shown (the catalog test finds ``N_("...")`` as it finds
    ``gettext("...")``)."""
    return message


from labkit.i18n.tables import display_width, text_table  # noqa: E402  (after the API it extends)

__all__ = [
    "N_",
    "DEFAULT_LANGUAGE",
    "LANGUAGES",
    "Term",
    "Translator",
    "_",
    "current_language",
    "display_width",
    "gettext",
    "glossary",
    "normalize_language",
    "set_language",
    "term",
    "text_table",
    "translator",
    "using",
]
