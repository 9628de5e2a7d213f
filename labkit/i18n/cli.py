"""`python -m labkit i18n ...`: keep the zh-CN notebooks in step with the English ones.

python -m labkit i18n sync [NB ...]           # rebuild notebooks/zh-CN/ from notebooks/
python -m labkit i18n stale                   # cells to (re-)translate; exit 1 if any
python -m labkit i18n reviewed NB CELL_ID ... # the zh-CN text of these cells is current
python -m labkit i18n terms                   # the glossary (en / zh-CN / where)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from labkit import i18n
from labkit.i18n import notebooks


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m labkit i18n", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--lang", default="zh-CN", help="the edition (default zh-CN)")
    parser.add_argument(
        "--source",
        type=Path,
        default=None,
        help="the folder of the English notebooks (default: notebooks/)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sync = sub.add_parser("sync", help="rebuild the edition's notebooks from the English ones")
    sync.add_argument("notebooks", nargs="*", metavar="NB", help="00..05 (default: all)")
    sub.add_parser("stale", help="list the cells that need (re-)translation, by notebook and cell")
    reviewed = sub.add_parser(
        "reviewed", help="record that these cells' translations match the current English"
    )
    reviewed.add_argument("notebook", metavar="NB")
    reviewed.add_argument("cell_ids", nargs="+", metavar="CELL_ID")
    sub.add_parser("terms", help="print the glossary")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    lang = i18n.normalize_language(args.lang)
    source = args.source or notebooks.EN_DIR
    if args.command == "sync":
        for report in notebooks.sync(lang, args.notebooks, source):
            counts = ", ".join(f"{n} {state}" for state, n in sorted(report.counts().items()))
            action = "written" if report.written else "unchanged"
            print(f"{lang}/{report.notebook}.ipynb: {action} ({counts})")
            for cell_id in report.dropped:
                print(f"    dropped the translation of English cell {cell_id} (cell removed)")
        return 0
    if args.command == "stale":
        found = notebooks.stale(lang, source)
        for state in found:
            print(state.describe())
        total = len(notebooks.status(lang, source))
        print(f"{len(found)} of {total} text cells need work" if found else f"all {total} current")
        return 1 if found else 0
    if args.command == "reviewed":
        for cell_id in args.cell_ids:
            notebooks.mark_translated(args.notebook, cell_id, lang=lang, en_dir=source)
            print(f"{args.notebook} cell {cell_id}: marked as translating the current English")
        return 0
    rows = [[t.en, t.zh_CN, t.where, f"[{t.source}]"] for t in i18n.glossary().values()]
    print(i18n.text_table(["en", "zh-CN", "where", "source"], rows))
    return 0
