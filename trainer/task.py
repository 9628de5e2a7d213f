"""Container entrypoint: `python -m trainer.task [options]` (see `--help`).

Vertex AI sets TF_CONFIG and the AIP_* directories on every replica; nothing needs editing.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from trainer.config import ConfigError, parse_config


def main(argv: Sequence[str] | None = None) -> int:
    try:
        config = parse_config(argv)
        from trainer.train import run

        result = run(config)
    except ConfigError as err:
        print(f"[trainer] error: {err}", file=sys.stderr, flush=True)
        return 2
    acc = result.final_metrics.get("val_accuracy", result.final_metrics.get("accuracy"))
    rate = f"{result.images_per_sec:.1f}" if result.images_per_sec else "n/a"
    print(
        f"[trainer] done task={result.task} replicas={result.replicas} epochs_run={result.epochs_run} "
        f"accuracy={acc:.4f} images_per_sec={rate} wall_time_s={result.wall_time_s:.1f}"
        + (
            f" model={result.savedmodel_dir} metrics={result.metrics_file}"
            if result.is_chief
            else ""
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
