"""Small image folders for trainer tests, written with Pillow in the cassava zip's layout."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from trainer.config import CASSAVA_CLASSES

COLOURS = [(200, 60, 50), (60, 190, 60), (60, 60, 200), (200, 190, 60), (60, 190, 200)]


def write_tiny_folder(root: Path, per_class: dict[str, int] | None = None, seed: int = 0) -> Path:
    """`root/cassavaleafdata/{train,validation}/CLASS/*.jpg`, one colour per class, varied sizes."""
    per_class = per_class or {"train": 8, "validation": 3}
    rng = np.random.default_rng(seed)
    for split, n in per_class.items():
        for ci, name in enumerate(CASSAVA_CLASSES):
            folder = root / "cassavaleafdata" / split / name
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(n):
                h, w = 40 + 7 * i, 50 + 5 * i
                pixels = np.clip(np.array(COLOURS[ci]) + rng.normal(0, 30, (h, w, 3)), 0, 255)
                Image.fromarray(pixels.astype(np.uint8)).save(folder / f"{split}-{name}-{i}.jpg")
    return root


@pytest.fixture(scope="session")
def tiny_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_folder(tmp_path_factory.mktemp("tiny"))
