"""The synthetic cassava sample: real JPEGs in the zip's layout, read by the real TFDS builder.

One small sample is made per module (about 20 s on 2 cores) and shared; the subprocess
tests (marked slow) use a 1% sample so the fresh processes spend their time importing
TensorFlow, not reading images.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from labkit.cloud.paths import REPO_ROOT
from labkit.course import sample

TINY = {split: dict.fromkeys(sample.CLASSES, 1) for split in sample.SPLITS}


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> sample.SampleInfo:
    """The default sample (size small, seed 0), made in a temporary root."""
    return sample.ensure_sample(tmp_path_factory.mktemp("lab") / "sample")


def _files(images_dir: Path) -> dict[str, dict[str, list[Path]]]:
    return {
        split: {cls: sorted((images_dir / split / cls).iterdir()) for cls in sample.CLASSES}
        for split in sample.SPLITS
    }


# ---- plans --------------------------------------------------------------------------


def test_full_plan_is_the_real_dataset() -> None:
    counts = sample.plan_counts("full")
    assert {s: sum(c.values()) for s, c in counts.items()} == sample.REAL_SPLIT_SIZES
    assert counts["train"] == sample.REAL_TRAIN_CLASS_COUNTS


@pytest.mark.parametrize("size", ["small", "medium", "full"])
def test_every_size_keeps_the_real_class_order(size: str) -> None:
    for per_class in sample.plan_counts(size).values():
        ranked = sorted(per_class, key=per_class.get, reverse=True)
        assert ranked[:2] == ["cmd", "cbsd"], per_class
        assert min(per_class.values()) >= 1


def test_small_plan_fits_a_one_minute_run() -> None:
    sizes = {s: sum(c.values()) for s, c in sample.plan_counts("small").items()}
    assert 400 <= sizes["train"] <= 600
    assert 100 <= sizes["validation"] <= 150 and 100 <= sizes["test"] <= 150


def test_scale_is_a_fraction_of_the_real_sizes() -> None:
    counts = sample.plan_counts(scale=0.1)
    assert {s: sum(c.values()) for s, c in counts.items()} == {
        "train": 566,
        "validation": 189,
        "test": 188,
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"size": "huge"}, "unknown sample size 'huge'"),
        ({"scale": 0.0}, "scale must be in"),
        ({"scale": 0.0001}, "at least 5 images"),
    ],
)
def test_bad_plans_say_what_to_do(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        sample.plan_counts(**kwargs)


def test_bad_counts_and_seed_are_refused_before_writing(tmp_path: Path) -> None:
    missing_class = {s: {"cbb": 1} for s in sample.SPLITS}
    with pytest.raises(ValueError, match="must have exactly the classes"):
        sample.generate_images(tmp_path, counts=missing_class)
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        sample.generate_images(tmp_path, counts=TINY, seed=-1)
    assert list(tmp_path.iterdir()) == []


# ---- the images ----------------------------------------------------------------------


def test_layout_and_unique_names_match_the_manifest(small: sample.SampleInfo) -> None:
    assert small.images_dir == small.root / "raw" / "cassavaleafdata"
    assert sorted(p.name for p in small.images_dir.iterdir()) == sorted(sample.SPLITS)
    files = _files(small.images_dir)
    for split, per_class in files.items():
        names = [p.name for paths in per_class.values() for p in paths]
        assert len(names) == len(set(names))
        for cls, paths in per_class.items():
            assert len(paths) == small.counts[split][cls]
            assert all(re.fullmatch(rf"{split}-{cls}-\d+\.jpg", p.name) for p in paths)
    manifest = json.loads((small.root / "sample.json").read_text())
    assert manifest["counts"] == small.counts == sample.plan_counts("small")


def test_images_are_real_jpegs_of_varied_sizes_around_500x400(small: sample.SampleInfo) -> None:
    paths = [p for per_class in _files(small.images_dir)["validation"].values() for p in per_class]
    sizes = []
    for path in paths:
        with Image.open(path) as image:
            assert image.format == "JPEG" and image.mode == "RGB"
            image.load()  # decodes the whole file: a truncated JPEG raises here
            sizes.append(image.size)
    widths, heights = zip(*sizes, strict=True)
    assert len(set(sizes)) > len(sizes) // 2
    assert 420 <= np.median(widths) <= 580 and 340 <= np.median(heights) <= 460
    assert min(min(s) for s in sizes) >= 300 and max(max(s) for s in sizes) <= 600


def test_imbalance_on_disk_like_the_real_data(small: sample.SampleInfo) -> None:
    for split, per_class in _files(small.images_dir).items():
        counts = Counter({cls: len(paths) for cls, paths in per_class.items()})
        assert [c for c, _ in counts.most_common(2)] == ["cmd", "cbsd"], (split, counts)
    assert small.majority_baseline < 0.4  # a model that only says "cmd" cannot look good


def test_same_seed_same_bytes_whatever_the_sample_size(
    small: sample.SampleInfo, tmp_path: Path
) -> None:
    first = sample.generate_images(tmp_path / "a", counts=TINY, seed=0, workers=1)
    again = sample.generate_images(tmp_path / "b", counts=TINY, seed=0, workers=2)
    other = sample.generate_images(tmp_path / "c", counts=TINY, seed=1, workers=1)
    for split in sample.SPLITS:
        for cls in sample.CLASSES:
            name = f"{split}/{cls}/{split}-{cls}-0.jpg"
            data = (first / name).read_bytes()
            assert data == (again / name).read_bytes()
            assert data == (small.images_dir / name).read_bytes()  # same image in the small one
            assert data != (other / name).read_bytes()


def test_regenerating_replaces_the_old_images(tmp_path: Path) -> None:
    bigger = {s: dict.fromkeys(sample.CLASSES, 2) for s in sample.SPLITS}
    sample.generate_images(tmp_path, counts=bigger, seed=0)
    images_dir = sample.generate_images(tmp_path, counts=TINY, seed=0)
    assert len(list(images_dir.rglob("*.jpg"))) == 15
    assert [p.name for p in tmp_path.iterdir()] == ["cassavaleafdata"]  # no staging left


def _pixels(images_dir: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Every image of a split at 32x32, flattened, as the lab's small runs see them."""
    features, labels = [], []
    for label, cls in enumerate(sample.CLASSES):
        for path in sorted((images_dir / split / cls).iterdir()):
            with Image.open(path) as image:
                small_image = image.convert("RGB").resize((32, 32), Image.Resampling.BILINEAR)
            features.append(np.asarray(small_image, np.float32).ravel() / 255.0)
            labels.append(label)
    return np.stack(features), np.asarray(labels)


def test_classes_are_learnable_at_32x32(small: sample.SampleInfo) -> None:
    """A nearest-centroid classifier on raw 32x32 pixels, trained on `train`, scored on
    `validation` by mean recall per class (chance: 20%, whatever the imbalance)."""
    train_x, train_y = _pixels(small.images_dir, "train")
    val_x, val_y = _pixels(small.images_dir, "validation")
    centroids = np.stack([train_x[train_y == k].mean(axis=0) for k in range(5)])
    distances = ((val_x[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=-1)
    predicted = distances.argmin(axis=1)
    recalls = [(predicted[val_y == k] == k).mean() for k in range(5)]
    assert np.mean(recalls) > 0.6, recalls
    assert min(recalls) > 0.3, recalls  # every class, not just the big ones


# ---- TFDS and ensure_sample -----------------------------------------------------------


def test_prepared_tfds_data_says_synthetic(small: sample.SampleInfo) -> None:
    version_dir = small.tfds_data_dir / "cassava" / sample.TFDS_VERSION
    info = json.loads((version_dir / "dataset_info.json").read_text())
    assert info["description"].startswith("SYNTHETIC SAMPLE made by the course kit")
    assert "NOT the real cassava data" in info["configDescription"].replace("\n", " ")
    splits = {s["name"]: int(sum(map(int, s["shardLengths"]))) for s in info["splits"]}
    assert splits == small.split_sizes
    metadata = json.loads((version_dir / "metadata.json").read_text())
    assert metadata["synthetic"] is True and metadata["seed"] == 0
    assert not (small.tfds_data_dir / "downloads").exists()


def test_ensure_sample_is_idempotent_and_fast_when_warm(small: sample.SampleInfo) -> None:
    stamp = (small.root / "sample.json").stat().st_mtime_ns
    started = time.perf_counter()
    again = sample.ensure_sample(small.root)
    assert time.perf_counter() - started < 0.2
    assert again == small
    assert (small.root / "sample.json").stat().st_mtime_ns == stamp


def test_ensure_sample_regenerates_on_other_parameters(tmp_path: Path) -> None:
    first = sample.ensure_sample(tmp_path, scale=0.01, seed=1)
    image = first.images_dir / "train" / "cmd" / "train-cmd-0.jpg"
    before = image.read_bytes()
    second = sample.ensure_sample(tmp_path, scale=0.01, seed=2)
    assert second.seed == 2 and image.read_bytes() != before
    manifest = json.loads((tmp_path / "sample.json").read_text())
    assert manifest["seed"] == 2 and manifest["size"] == "scale=0.01"
    forced = sample.ensure_sample(tmp_path, scale=0.01, seed=2, force=True)
    assert forced == second and image.read_bytes() != before


def test_prepare_refuses_a_wrong_layout(tmp_path: Path) -> None:
    images_dir = sample.generate_images(tmp_path / "raw", counts=TINY, seed=0)
    (images_dir / "validation" / "extra").mkdir()
    with pytest.raises(ValueError, match=r"validation must hold exactly the class folders"):
        sample.prepare_tfds(tmp_path / "raw", tmp_path / "tfds")
    with pytest.raises(FileNotFoundError, match="generate the images first"):
        sample.prepare_tfds(tmp_path / "nothing", tmp_path / "tfds")


# ---- the CLI and a fresh process that never imported labkit ---------------------------


def _clean_env(home: Path) -> dict[str, str]:
    """Only what a fresh shell has: no PYTHONPATH, no TFDS_DATA_DIR, a HOME of our own."""
    home.mkdir(exist_ok=True)
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8"}


@pytest.fixture(scope="module")
def cli_sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """`python -m labkit sample --scale 0.01` run in a clean environment: (root, home, output)."""
    base = tmp_path_factory.mktemp("cli")
    root, home = base / "sample", base / "home"
    run = subprocess.run(
        [sys.executable, "-m", "labkit", "sample", "--root", str(root), "--scale", "0.01"],
        env=_clean_env(home),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return root, home, run.stdout


@pytest.mark.slow
def test_cli_prints_both_paths_and_the_counts(cli_sample: tuple[Path, Path, str]) -> None:
    root, home, out = cli_sample
    assert f"images:   {root.resolve() / 'raw' / 'cassavaleafdata'}" in out
    assert f"tfds dir: {root.resolve() / 'tfds'}" in out
    assert "SYNTHETIC" in out
    planned = sample.plan_counts(scale=0.01)["train"]
    row = next(line for line in out.splitlines() if line.startswith("train "))
    assert row.split()[1:] == [str(planned[c]) for c in sample.CLASSES] + [
        str(sum(planned.values()))
    ]
    assert not (home / "tensorflow_datasets").exists()


FRESH_READER = """
import json, sys
import tensorflow_datasets as tfds
data_dir = sys.argv[1]
train = tfds.load("cassava", split="train", data_dir=data_dir, as_supervised=True)
images = [(list(image.shape), image.dtype.name, int(label)) for image, label in train.take(4)]
splits, info = tfds.load("cassava", data_dir=data_dir, with_info=True)
print(json.dumps({
    "images": images,
    "splits": {name: info.splits[name].num_examples for name in splits},
    "labels": info.features["label"].names,
    "config_description": info.config_description,
    "synthetic": info.metadata["synthetic"],
    "repr_says_synthetic": "SYNTHETIC SAMPLE" in repr(info),
    "labkit_imported": "labkit" in sys.modules,
}))
"""


@pytest.mark.slow
def test_tfds_load_works_offline_in_a_fresh_process(
    cli_sample: tuple[Path, Path, str], tmp_path: Path
) -> None:
    root, home, _ = cli_sample
    run = subprocess.run(
        [sys.executable, "-c", FRESH_READER, str(root / "tfds")],
        env=_clean_env(home),
        cwd=tmp_path,  # not the repo: nothing of the kit on the path
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    manifest = json.loads((root / "sample.json").read_text())
    assert seen["labels"] == ["cbb", "cbsd", "cgm", "cmd", "healthy"]
    assert seen["splits"] == {s: sum(c.values()) for s, c in manifest["counts"].items()}
    for shape, dtype, label in seen["images"]:
        assert dtype == "uint8" and shape[2] == 3 and min(shape[:2]) >= 300
        assert 0 <= label < 5
    assert seen["config_description"].startswith("SYNTHETIC SAMPLE")
    assert seen["synthetic"] is True and seen["repr_says_synthetic"]
    assert seen["labkit_imported"] is False
    assert not (home / "tensorflow_datasets").exists()
