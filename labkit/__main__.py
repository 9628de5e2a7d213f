"""`python -m labkit SUBCOMMAND ...`: one entry point, one module per subcommand.

Each subcommand module exposes ``main(argv: list[str]) -> int``; it is imported only
when asked for, so `python -m labkit spec validate` never pays for importing TensorFlow.
"""

from __future__ import annotations

import importlib
import sys

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "sample": (
        "labkit.course.sample",
        "generate the synthetic cassava sample and prepare it for TFDS",
    ),
    "cluster": (
        "labkit.local.cluster",
        "run a command as N local replicas with Vertex's TF_CONFIG",
    ),
    "emulator": (
        "labkit.local.emulator",
        "the local Vertex AI training service (serve/start/stop/status)",
    ),
    "console": (
        "labkit.local.console",
        "the local console page: Training, Create, job pages (opens it)",
    ),
    "spec": ("labkit.cloud.specs", "build or validate worker pool specs (spec validate FILE.json)"),
    "cost": ("labkit.cloud.cost", "estimate what a worker pool spec costs"),
    "cleanup": ("labkit.cloud.cleanup", "list, then delete, only what the kit created"),
    "lab": ("labkit.course.lab", "execute the notebooks 00..05 with papermill into a run folder"),
    "settings": (
        "labkit.cloud.settings",
        "show the resolved settings (mode, project, region, bucket)",
    ),
    "durations": (
        "labkit.course.durations",
        "check the docs' durations against bench/measurements.json; record or refresh them",
    ),
    "jupyter": (
        "labkit.course.jupyterlab",
        "JupyterLab on one edition, in its language (jupyter --lang zh-CN)",
    ),
    "i18n": ("labkit.i18n.cli", "the zh-CN edition: sync notebooks, list stale translations"),
}


def usage() -> str:
    lines = ["usage: python -m labkit SUBCOMMAND [options]", "", "subcommands:"]
    lines += [f"  {name:<9} {text}" for name, (_, text) in SUBCOMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in {"-h", "--help", "help"}:
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(f"labkit: unknown subcommand {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
