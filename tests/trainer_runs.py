"""Run the real trainer as a user would (`python -m trainer.task`) and read what it wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from labkit.cloud.settings import MODE_DEFAULTS

LOCAL = MODE_DEFAULTS["local"]


def small_args(tfds_dir: Path | str, out: Path, **overrides: object) -> list[str]:
    """Trainer arguments with the local mode's small knobs, writing under ``out``."""
    values: dict[str, object] = {
        "--data": "tfds:cassava",
        "--data-dir": str(tfds_dir),
        "--image-size": LOCAL["image_size"],
        "--batch-size": LOCAL["batch_size"],
        "--epochs": LOCAL["epochs"],
        "--learning-rate": LOCAL["learning_rate"],
        "--bn-momentum": LOCAL["bn_momentum"],
        "--weights": "none",
        "--model-dir": str(out / "model"),
        "--checkpoint-dir": str(out / "checkpoints"),
        "--tensorboard-dir": str(out / "logs"),
    }
    values.update({k: v for k, v in overrides.items()})
    args: list[str] = []
    for key, value in values.items():
        if value is True:
            args.append(key)
        elif value is not None and value is not False:
            args += [key, str(value)]
    return args


def run_trainer(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 900
) -> subprocess.CompletedProcess:
    """`python -m trainer.task ARGS` in a clean environment (no TF_CONFIG, no AIP_*)."""
    base = {k: v for k, v in os.environ.items() if k != "TF_CONFIG" and not k.startswith("AIP_")}
    return subprocess.run(
        [sys.executable, "-m", "trainer.task", *args],
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def read_metrics(model_dir: Path) -> dict:
    return json.loads((model_dir / "metrics.json").read_text())
