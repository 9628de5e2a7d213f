"""The baseline: the codelab's own `codelab/trainer/task.py`, loaded as it is.

`codelab/trainer/task.py` is the file the codelab ships (a script, not a package of this
repo): the bench loads it with importlib and calls its `create_dataset`, whose
`tfds.load(name='cassava')` takes no `data_dir`, so TFDS reads ``TFDS_DATA_DIR``: the bench
points that at its prepared JPEG set, the same files the kit's pipeline reads. Its
`preprocess_data` resizes to the codelab's fixed 300x300, then `create_dataset` shuffles
1,000 of those float32 images, batches and prefetches: what is measured is the codelab's
code line for line. Processes that run it also get ``TF_USE_LEGACY_KERAS=1``, as the
codelab's TF 2.x container had `tf.keras` = Keras 2 (`CHILD_ENV`).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from labkit.cloud.paths import REPO_ROOT

CODELAB_TASK = REPO_ROOT / "codelab" / "trainer" / "task.py"
MODULE_NAME = "codelab_task"
CODELAB_IMAGE_SIZE = 300  # fixed in the codelab's `preprocess_data`
CODELAB_SHUFFLE_BUFFER = 1000
CHILD_ENV = {"TF_USE_LEGACY_KERAS": "1"}


def codelab_env(tfds_data_dir: str | Path) -> dict[str, str]:
    """What a process running the codelab's pipeline needs in its environment."""
    return {**CHILD_ENV, "TFDS_DATA_DIR": str(tfds_data_dir)}


def point_tfds_at(tfds_data_dir: str | Path) -> None:
    """Make `tfds.load` without `data_dir` read ``tfds_data_dir``.

    TFDS reads ``TFDS_DATA_DIR`` once, when it is imported (`tfds.core.constants.DATA_DIR`);
    in a process that imported it before, that constant is set to what the variable
    would have given.
    """
    os.environ["TFDS_DATA_DIR"] = str(tfds_data_dir)
    constants = sys.modules.get("tensorflow_datasets.core.constants")
    if constants is not None and str(tfds_data_dir) != constants.DATA_DIR:
        constants.DATA_DIR = str(tfds_data_dir)


def load_codelab(tfds_data_dir: str | Path | None = None) -> ModuleType:
    """The codelab's `task.py` as a module (its `main()` is not run)."""
    if tfds_data_dir is not None:
        point_tfds_at(tfds_data_dir)
    module = sys.modules.get(MODULE_NAME)
    if module is not None:
        return module
    if not CODELAB_TASK.is_file():
        raise FileNotFoundError(f"the codelab's trainer is missing: {CODELAB_TASK}")
    spec = importlib.util.spec_from_file_location(MODULE_NAME, CODELAB_TASK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module
    spec.loader.exec_module(module)
    for name in ("preprocess_data", "create_dataset"):
        if not callable(getattr(module, name, None)):
            raise AttributeError(f"{CODELAB_TASK} has no {name}(): not the codelab's trainer")
    return module
