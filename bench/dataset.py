"""The JPEG set every section reads: made once with `labkit.course.sample`, cached under `.lab/bench/`.

Both the codelab's pipeline and the kit's read the same files: the sample is prepared
through TFDS's real `cassava` builder, so the codelab's `tfds.load(name='cassava')` (with
``TFDS_DATA_DIR`` pointing here, `bench.baseline`) and the kit's
`trainer.data.load_split('tfds:cassava', data_dir=...)` see identical encoded JPEGs of
cassava-like sizes (about 500x400).
"""

from __future__ import annotations

from pathlib import Path

from bench import bench_home
from labkit.course.sample import SampleInfo, ensure_sample

# Fractions of the real cassava splits (train 5,656): 0.36 gives 2,036 training images
# (3,395 in all), enough for two full 1,000-image shuffle buffers of the codelab's pipeline.
FULL_SCALE = 0.36
QUICK_SCALE = 0.005  # 28 training images: seconds to make, for smoke tests


def bench_data_root(scale: float) -> Path:
    return bench_home() / f"data-scale{scale:g}"


def ensure_bench_data(quick: bool = False, root: Path | None = None) -> SampleInfo:
    """The cached JPEG set (generated on first use, a minute or two for the full set)."""
    scale = QUICK_SCALE if quick else FULL_SCALE
    return ensure_sample(root if root is not None else bench_data_root(scale), scale=scale)
