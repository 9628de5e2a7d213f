"""The offline synthetic cassava sample: leaf-like JPEGs, prepared through the real TFDS builder.

The codelab trains on ``tfds.load('cassava')``, a 1.26 GiB download that no laptop, CI
runner or offline machine should need. This module draws a small stand-in with the same
layout, labels and features, and prepares it with TFDS's own ``cassava`` builder into a
data dir of its own, so the lab code (and the codelab's unchanged ``task.py``) reads it
with ``tfds.load('cassava', data_dir=...)`` and no network.

Every image is a real JPEG in the original zip's layout
(``cassavaleafdata/{train,validation,test}/{cbb,cbsd,cgm,cmd,healthy}/train-cbb-0.jpg``),
sized around 500x400, with the real data's class order (cmd largest, cbsd next). Each class
carries a visual signal a small CNN picks up quickly even from random weights at 32x32: a
class colour cast plus a class pattern (mosaic patches, vein streaks, angular spots,
stippling), on noisy backgrounds, with per-image jitter. It is SYNTHETIC: accuracy on it
says the pipeline works, nothing about cassava disease.

TensorFlow and TFDS are imported only when preparing, so a warm `ensure_sample` (manifest
present and matching) answers in milliseconds.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import functools
import io
import json
import math
import os
import shutil
import sys
import textwrap
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageChops, ImageDraw, ImageFilter

from labkit.cloud import paths
from labkit.i18n import gettext, text_table

# --------------------------------------------------------------------------------------
# What the real dataset looks like (the TFDS `cassava` builder, cassavaleafdata.zip)
# --------------------------------------------------------------------------------------

CLASSES: tuple[str, ...] = ("cbb", "cbsd", "cgm", "cmd", "healthy")  # TFDS label order
SPLITS: tuple[str, ...] = ("train", "validation", "test")
IMAGES_FOLDER = "cassavaleafdata"
REAL_SPLIT_SIZES: dict[str, int] = {"train": 5656, "validation": 1889, "test": 1885}
# The real training split per class (iCassava 2019); cmd and cbsd hold 72% of the images.
REAL_TRAIN_CLASS_COUNTS: dict[str, int] = {
    "cbb": 466,
    "cbsd": 1443,
    "cgm": 773,
    "cmd": 2658,
    "healthy": 316,
}

Counts = dict[str, dict[str, int]]  # split -> class -> number of images


@dataclasses.dataclass(frozen=True)
class SizePlan:
    """How many images per split, and how strongly the real class imbalance is applied.

    ``imbalance`` is an exponent on the real class shares: 1.0 keeps them (cmd 47%),
    0.5 softens them (cmd 33%, healthy 11%) so that on the small sample a model that only
    predicts the majority class cannot pass for one that learned something.
    """

    split_sizes: dict[str, int]
    imbalance: float


SIZES: dict[str, SizePlan] = {
    "small": SizePlan({"train": 500, "validation": 125, "test": 125}, imbalance=0.5),
    "medium": SizePlan({"train": 1500, "validation": 500, "test": 500}, imbalance=1.0),
    "full": SizePlan(dict(REAL_SPLIT_SIZES), imbalance=1.0),
}

# Bump when the drawings change: a manifest from another version is regenerated.
GENERATOR_VERSION = 1
MANIFEST_NAME = "sample.json"
RAW_FOLDER = "raw"  # under the sample root: the JPEGs
TFDS_FOLDER = "tfds"  # under the sample root: the TFDS data dir (paths.sample_tfds_dir())
TFDS_NAME = "cassava"
TFDS_VERSION = "0.1.0"  # the real builder's VERSION; the prepared data must match it

SYNTHETIC_NOTE = textwrap.fill(
    "SYNTHETIC SAMPLE made by the course kit (labkit.course.sample), NOT the real cassava data. "
    "The images are drawn leaf-like shapes with a colour cast and a pattern per class "
    "(cmd: yellow mosaic, cbsd: yellow streaks along the veins, cbb: angular brown spots and "
    "brown tips, cgm: pale stippling, healthy: even green), in the real dataset's layout, "
    "labels and features so the lab's code runs unchanged offline. Accuracy on this sample "
    "shows that the pipeline works; it says nothing about cassava disease.",
    width=80,
)


def class_shares(imbalance: float) -> dict[str, float]:
    """The real training split's class shares raised to ``imbalance`` and renormalised."""
    if not 0.0 <= imbalance <= 1.0:
        raise ValueError(f"imbalance must be between 0 (balanced) and 1 (real), got {imbalance}")
    total = sum(REAL_TRAIN_CLASS_COUNTS.values())
    weights = {c: (n / total) ** imbalance for c, n in REAL_TRAIN_CLASS_COUNTS.items()}
    norm = sum(weights.values())
    return {c: w / norm for c, w in weights.items()}


def _allocate(total: int, shares: Mapping[str, float]) -> dict[str, int]:
    """Split ``total`` by ``shares`` exactly (largest remainder), at least one per class."""
    if total < len(shares):
        raise ValueError(
            f"a split needs at least {len(shares)} images (one per class), got {total}"
        )
    raw = {c: total * s for c, s in shares.items()}
    counts = {c: max(1, math.floor(v)) for c, v in raw.items()}
    by_remainder = sorted(shares, key=lambda c: raw[c] - math.floor(raw[c]), reverse=True)
    i = 0
    while sum(counts.values()) < total:
        counts[by_remainder[i % len(by_remainder)]] += 1
        i += 1
    while sum(counts.values()) > total:  # only when the one-per-class floor overshot
        largest = max(counts, key=counts.get)
        counts[largest] -= 1
    return counts


def plan_counts(size: str = "small", *, scale: float | None = None) -> Counts:
    """Images per split and class for a named size, or ``scale`` x the real split sizes.

    ``plan_counts("full")`` is the real dataset's 5,656 / 1,889 / 1,885 with the real
    training split's class counts; ``plan_counts(scale=0.25)`` is a quarter of that.
    """
    if scale is not None:
        if not 0 < scale <= 1:
            raise ValueError(
                f"scale must be in (0, 1] (a fraction of the real dataset), got {scale}"
            )
        plan = SizePlan({s: round(n * scale) for s, n in REAL_SPLIT_SIZES.items()}, 1.0)
    elif size in SIZES:
        plan = SIZES[size]
    else:
        raise ValueError(f"unknown sample size {size!r}: choose one of {', '.join(SIZES)}")
    shares = class_shares(plan.imbalance)
    return {split: _allocate(plan.split_sizes[split], shares) for split in SPLITS}


def _check_seed(seed: int) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")


def _check_counts(counts: Mapping[str, Mapping[str, int]]) -> Counts:
    if set(counts) != set(SPLITS):
        raise ValueError(f"counts must have exactly the splits {SPLITS}, got {sorted(counts)}")
    checked: Counts = {}
    for split in SPLITS:
        per_class = counts[split]
        if set(per_class) != set(CLASSES):
            raise ValueError(
                f"counts[{split!r}] must have exactly the classes {CLASSES}, got {sorted(per_class)}"
            )
        bad = {c: n for c, n in per_class.items() if not isinstance(n, int) or n < 1}
        if bad:
            raise ValueError(f"counts[{split!r}] needs at least one image per class, got {bad}")
        checked[split] = {c: int(per_class[c]) for c in CLASSES}
    return checked


# --------------------------------------------------------------------------------------
# Drawing one leaf photo (PIL compositing at full size, numpy only on small grids: fast)
# --------------------------------------------------------------------------------------

RGB = tuple[int, int, int]

# Mean leaf colour per class before per-image jitter: the class colour cast.
_LEAF_RGB: dict[str, RGB] = {
    "healthy": (36, 122, 34),
    "cmd": (104, 150, 44),
    "cbsd": (100, 120, 44),
    "cbb": (62, 96, 34),
    "cgm": (150, 176, 118),
}
_BACKGROUNDS: tuple[RGB, ...] = (
    (92, 76, 62),  # soil
    (50, 62, 46),  # shade under the canopy
    (120, 112, 92),  # dry grass
    (70, 74, 62),  # mixed
)


def _grid(rng: np.random.Generator, cells: int, aspect: float, channels: int = 1) -> np.ndarray:
    """Uniform noise in [0, 1] on a coarse grid, ``cells`` wide, shape (h, w, channels)."""
    grid_w = max(2, cells)
    grid_h = max(2, round(cells / aspect))
    return rng.random((grid_h, grid_w, channels), dtype=np.float32)


def _upsample(grid: np.ndarray, size: tuple[int, int]) -> Image.Image:
    """A small grid (values 0..255, 1 or 3 channels) as a smooth full-size image."""
    array = np.clip(grid, 0, 255).astype(np.uint8)
    image = Image.fromarray(array[:, :, 0] if array.shape[2] == 1 else array)
    return image.resize(size, Image.Resampling.BICUBIC)


def _resize_grid(grid: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Bilinear-ish resize of a small float grid onto another small grid (for mixing scales)."""
    channels = grid.shape[2]
    layers = [
        np.asarray(
            Image.fromarray(grid[:, :, c].astype(np.float32), "F").resize(
                (shape[1], shape[0]), Image.Resampling.BICUBIC
            )
        )
        for c in range(channels)
    ]
    return np.stack(layers, axis=2)


def _fade(mask: Image.Image, opacity: float) -> Image.Image:
    """Scale an "L" mask by ``opacity`` (a lookup table: fast at any size)."""
    if opacity >= 1.0:
        return mask
    return mask.point([round(v * opacity) for v in range(256)])


def _ramp(threshold: float, gain: float) -> list[int]:
    """A lookup table that turns smooth noise into patches: 0 below ``threshold``, then up."""
    return [int(min(255.0, max(0.0, (v - threshold) * gain))) for v in range(256)]


def _paint(base: Image.Image, colour: Any, mask: Image.Image, opacity: float = 1.0) -> Image.Image:
    """``colour`` laid over ``base`` where ``mask`` is set, at ``opacity``."""
    if isinstance(colour, Image.Image):
        top = colour
    else:
        top = Image.new("RGB", base.size, tuple(int(min(255.0, max(0.0, v))) for v in colour))
    return Image.composite(top, base, _fade(mask, opacity))


def _lobe_polygon(
    rng: np.random.Generator,
    centre: tuple[float, float],
    angle: float,
    length: float,
    half_width: float,
    wavy: float = 0.0,
) -> list[tuple[float, float]]:
    """A lanceolate lobe from ``centre``: narrow base, widest at ~40%, pointed tip."""
    t = np.linspace(0.0, 1.0, 16)
    width = half_width * np.sin(np.pi * t**0.75) ** 0.9
    if wavy:
        width = width * (1 + wavy * np.sin(t * np.pi * rng.uniform(3, 6) + rng.uniform(0, 6)))
    along = length * (0.04 + 0.96 * t)
    ca, sa = math.cos(angle), math.sin(angle)
    cx, cy = centre
    xs_left, ys_left = cx + along * ca - width * sa, cy + along * sa + width * ca
    xs_right, ys_right = cx + along * ca + width * sa, cy + along * sa - width * ca
    xs = np.concatenate([xs_left, xs_right[::-1]])
    ys = np.concatenate([ys_left, ys_right[::-1]])
    return list(zip(xs.tolist(), ys.tolist(), strict=True))


@dataclasses.dataclass
class _Leaf:
    """A drawn palmate leaf: its mask, its lobes' axes, and the outer part of each lobe."""

    mask: Image.Image  # "L", 255 inside the leaf
    axes: list[tuple[float, float, float, float]]  # (cx, cy, angle, length) per lobe
    tips: Image.Image  # "L", 255 on the outer third of each lobe


def _draw_leaf(
    rng: np.random.Generator,
    size: tuple[int, int],
    scale: float,
    centre_jitter: float,
    stunted: float = 1.0,
    narrow: float = 1.0,
    wavy: float = 0.0,
) -> _Leaf:
    """A cassava-like palmate leaf: 5-7 lanceolate lobes fanned out, and a petiole."""
    width, height = size
    short = min(size)
    centre = (
        width / 2 + rng.uniform(-centre_jitter, centre_jitter) * width,
        height / 2 + rng.uniform(-centre_jitter, centre_jitter) * height,
    )
    n_lobes = int(rng.integers(5, 8))
    fan = rng.uniform(math.radians(230), math.radians(300))
    heading = rng.uniform(0, 2 * math.pi)
    mask, tips = Image.new("L", size, 0), Image.new("L", size, 0)
    draw, draw_tips = ImageDraw.Draw(mask), ImageDraw.Draw(tips)
    axes = []
    for k in range(n_lobes):
        rel = k / (n_lobes - 1) - 0.5  # -0.5 .. 0.5 across the fan
        angle = heading + rel * fan + rng.normal(0, 0.06)
        length = short * scale * stunted * (1.0 - 0.45 * abs(rel)) * rng.uniform(0.9, 1.05)
        half_width = length * rng.uniform(0.15, 0.19) * narrow
        draw.polygon(_lobe_polygon(rng, centre, angle, length, half_width, wavy), fill=255)
        tip_from = (
            centre[0] + 0.68 * length * math.cos(angle),
            centre[1] + 0.68 * length * math.sin(angle),
        )
        draw_tips.polygon(_lobe_polygon(rng, tip_from, angle, 0.34 * length, half_width), fill=255)
        axes.append((centre[0], centre[1], angle, length))
    stalk = heading + math.pi + rng.normal(0, 0.15)  # the petiole, opposite the fan
    stalk_len = short * rng.uniform(0.25, 0.45)
    stalk_end = (centre[0] + stalk_len * math.cos(stalk), centre[1] + stalk_len * math.sin(stalk))
    draw.line([centre, stalk_end], fill=255, width=max(2, short // 70))
    return _Leaf(mask=mask, axes=axes, tips=ImageChops.multiply(tips, mask))


def _cmd_mosaic(rng: np.random.Generator, image: Image.Image, leaf: _Leaf) -> Image.Image:
    """Cassava mosaic disease: yellow chlorotic patches between green, distorted lobes."""
    width, height = image.size
    noise = _grid(rng, int(rng.integers(12, 18)), width / height) * 255
    threshold = float(np.quantile(noise, rng.uniform(0.3, 0.45)))
    patches = _upsample(noise, image.size).point(_ramp(threshold, 10))
    return _paint(
        image, (222, 212, 92), ImageChops.multiply(patches, leaf.mask), rng.uniform(0.7, 0.9)
    )


def _cbsd_streaks(rng: np.random.Generator, image: Image.Image, leaf: _Leaf) -> Image.Image:
    """Cassava brown streak: feathery yellow bands along the secondary veins, brown patches."""
    short = min(image.size)
    streaks = Image.new("L", image.size, 0)
    draw = ImageDraw.Draw(streaks)
    for cx, cy, angle, length in leaf.axes:
        for d in np.linspace(0.15, 0.85, int(rng.integers(5, 8))) * length:
            x0, y0 = cx + d * math.cos(angle), cy + d * math.sin(angle)
            for side in (-1, 1):
                a = angle + side * rng.uniform(0.6, 0.9)
                seg = length * rng.uniform(0.12, 0.2)
                end = (x0 + seg * math.cos(a), y0 + seg * math.sin(a))
                draw.line([(x0, y0), end], fill=255, width=max(3, short // 45))
    streaks = ImageChops.multiply(streaks.filter(ImageFilter.BoxBlur(short / 150)), leaf.mask)
    image = _paint(image, (206, 188, 72), streaks, rng.uniform(0.75, 0.9))
    necrosis = _upsample(_grid(rng, 24, image.size[0] / image.size[1]) * 255, image.size)
    necrosis = necrosis.point(_ramp(135, 5))
    return _paint(image, (128, 88, 44), ImageChops.multiply(necrosis, streaks))


def _cbb_spots(rng: np.random.Generator, image: Image.Image, leaf: _Leaf) -> Image.Image:
    """Cassava bacterial blight: angular water-soaked brown spots with a halo; tips die back."""
    short = min(image.size)
    spots, halos = Image.new("L", image.size, 0), Image.new("L", image.size, 0)
    draw_spots, draw_halos = ImageDraw.Draw(spots), ImageDraw.Draw(halos)
    ys, xs = np.nonzero(np.asarray(leaf.mask)[::4, ::4])
    for _ in range(int(rng.integers(18, 30))):
        j = int(rng.integers(len(xs)))
        x, y = xs[j] * 4.0, ys[j] * 4.0
        n = int(rng.integers(5, 8))
        a = np.sort(rng.uniform(0, 2 * np.pi, n))
        rad = short * rng.uniform(0.025, 0.05) * rng.uniform(0.6, 1.0, n)
        for draw, grow in ((draw_halos, 1.5), (draw_spots, 1.0)):
            outline = zip(x + grow * rad * np.cos(a), y + grow * rad * np.sin(a), strict=True)
            draw.polygon(list(outline), fill=255)
    image = _paint(
        image,
        (176, 170, 70),
        ImageChops.multiply(halos.filter(ImageFilter.BoxBlur(1)), leaf.mask),
        0.6,
    )
    image = _paint(image, (92, 62, 34), ImageChops.multiply(spots, leaf.mask))
    tips = leaf.tips.filter(ImageFilter.BoxBlur(short / 80))
    return _paint(image, (120, 84, 42), ImageChops.multiply(tips, leaf.mask), 0.85)


def _cgm_stipple(rng: np.random.Generator, image: Image.Image, leaf: _Leaf) -> Image.Image:
    """Cassava green mite: dense pale stippling, the leaf looks bleached and small."""
    width, height = image.size
    cell = 2
    dots = rng.random((height // cell + 1, width // cell + 1)) < rng.uniform(0.3, 0.4)
    dots_image = Image.fromarray(dots.astype(np.uint8) * 255).resize(
        (dots.shape[1] * cell, dots.shape[0] * cell), Image.Resampling.NEAREST
    )
    stipple = ImageChops.multiply(dots_image.crop((0, 0, width, height)), leaf.mask)
    return _paint(image, (226, 230, 178), stipple, rng.uniform(0.6, 0.8))


_DISEASE_PAINTERS = {
    "cmd": _cmd_mosaic,
    "cbsd": _cbsd_streaks,
    "cbb": _cbb_spots,
    "cgm": _cgm_stipple,
}
_LEAF_SHAPE = {  # symptoms in the outline: mites stunt leaves, mosaic narrows and crinkles them
    "cgm": {"stunted": 0.8},
    "cmd": {"narrow": 0.75, "wavy": 0.18},
}


def render_leaf_image(rng: np.random.Generator, cls: str) -> Image.Image:
    """One synthetic photo of a cassava leaf of class ``cls`` (RGB, about 500x400)."""
    if cls not in CLASSES:
        raise ValueError(f"unknown cassava class {cls!r}: choose one of {CLASSES}")
    width = int(round(500 * rng.uniform(0.85, 1.15)))
    height = int(round(400 * rng.uniform(0.85, 1.15)))
    if rng.random() < 0.15:  # some photos are portrait
        width, height = height, width
    # Drawn at half size and scaled up at the end: four times less work, soft focus.
    size, aspect = (width // 2, height // 2), width / height

    # One light field (a coarse grid) shades background and leaf alike.
    light = 0.8 + 0.35 * _grid(rng, 4, aspect)
    light *= rng.uniform(0.85, 1.12)

    # Background: blotchy soil or foliage (mostly brightness, a little hue), out-of-focus
    # leaves of other plants behind.
    bg_base = np.asarray(_BACKGROUNDS[int(rng.integers(len(_BACKGROUNDS)))], np.float32)
    brightness = 0.7 + 0.6 * _grid(rng, 9, aspect)
    hue = (_grid(rng, 9, aspect, channels=3) - 0.5) * 24
    blotches = bg_base * brightness + hue
    background = _upsample(blotches * _resize_grid(light, blotches.shape[:2]), size)
    for _ in range(int(rng.integers(1, 4))):
        behind = _draw_leaf(rng, size, scale=rng.uniform(0.45, 0.7), centre_jitter=0.45)
        tint = np.asarray((22, 62, 26), np.float32) * rng.uniform(0.8, 1.5)
        behind_rgb = bg_base * 0.3 + tint
        blurred = behind.mask.filter(ImageFilter.BoxBlur(3))
        background = _paint(background, behind_rgb, blurred, rng.uniform(0.6, 0.85))

    # The leaf in focus: the class colour, smooth shading, lighter midribs, the symptoms.
    leaf = _draw_leaf(
        rng, size, scale=rng.uniform(0.6, 0.72), centre_jitter=0.06, **_LEAF_SHAPE.get(cls, {})
    )
    colour = np.asarray(_LEAF_RGB[cls], np.float32) + rng.normal(0, 9, 3).astype(np.float32)
    shading = 0.85 + 0.3 * _grid(rng, 6, aspect)
    leaf_rgb = colour * shading * _resize_grid(light, shading.shape[:2])
    leaf_image = _upsample(leaf_rgb, size)
    veins = Image.new("L", size, 0)
    draw = ImageDraw.Draw(veins)
    for cx, cy, angle, length in leaf.axes:
        end = (cx + 0.92 * length * math.cos(angle), cy + 0.92 * length * math.sin(angle))
        draw.line([(cx, cy), end], fill=255, width=max(2, min(size) // 150))
    leaf_image = _paint(leaf_image, colour * 1.35 + 30, veins, 0.7)
    if cls in _DISEASE_PAINTERS:
        leaf_image = _DISEASE_PAINTERS[cls](rng, leaf_image, leaf)
    photo = np.asarray(Image.composite(leaf_image, background, leaf.mask), dtype=np.int16)
    grain = rng.integers(-7, 8, size=(size[1], size[0], 1), dtype=np.int16)  # sensor noise
    photo = Image.fromarray(np.clip(photo + grain, 0, 255).astype(np.uint8), "RGB")
    return photo.resize((width, height), Image.Resampling.BILINEAR)


def image_rng(seed: int, split: str, cls: str, index: int) -> np.random.Generator:
    """The random stream of one image: the same file for the same (seed, split, class, index),
    whatever the sample size, the order of generation or the number of processes."""
    return np.random.default_rng([seed, SPLITS.index(split), CLASSES.index(cls), index])


def image_filename(split: str, cls: str, index: int) -> str:
    """``train-cbb-0.jpg``: unique within a split, as in the real zip."""
    return f"{split}-{cls}-{index}.jpg"


def _write_group(job: tuple[str, int, str, str, int]) -> int:
    """Write one split/class folder (a unit of work for the process pool)."""
    folder, seed, split, cls, count = job
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        rng = image_rng(seed, split, cls, index)
        image = render_leaf_image(rng, cls)
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=int(rng.integers(82, 93)))
        (out / image_filename(split, cls, index)).write_bytes(buffer.getvalue())
    return count


def generate_images(
    raw_root: Path,
    *,
    counts: Mapping[str, Mapping[str, int]] | None = None,
    size: str = "small",
    seed: int = 0,
    workers: int | None = None,
) -> Path:
    """Write the sample's JPEGs under ``raw_root/cassavaleafdata`` and return that folder.

    ``counts`` (split -> class -> n) overrides ``size`` (see `plan_counts`). The folder is
    written beside its final place and swapped in at the end, so an interrupted run never
    leaves a half sample. The same seed gives the same bytes. ``workers`` processes share
    the work (default: one per CPU, at most 4, for more than 1,500 images only: on 2 shared
    cores the small sample was slower in 2 processes, 14 s, than in one, 11 s).
    """
    plan = _check_counts(counts if counts is not None else plan_counts(size))
    _check_seed(seed)
    raw_root = Path(raw_root)
    final = raw_root / IMAGES_FOLDER
    staging = raw_root / f".{IMAGES_FOLDER}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    jobs = [
        (str(staging / split / cls), seed, split, cls, plan[split][cls])
        for split in SPLITS
        for cls in CLASSES
    ]
    total = sum(job[-1] for job in jobs)
    if workers is None:
        workers = min(4, os.cpu_count() or 1) if total > 1500 else 1
    try:
        if workers > 1:
            # spawn, not fork: the caller (a notebook) may have TensorFlow's threads running.
            with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
                list(pool.map(_write_group, jobs))
        else:
            for job in jobs:
                _write_group(job)
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


# --------------------------------------------------------------------------------------
# Preparing it through the real TFDS `cassava` builder, offline
# --------------------------------------------------------------------------------------


def _check_images_dir(images_dir: Path) -> None:
    """The real builder lists every sub-folder as a label: the layout must be exact."""
    if not images_dir.is_dir():
        raise FileNotFoundError(
            f"{images_dir} does not exist: generate the images first "
            "(`python -m labkit sample --root DIR` or labkit.course.sample.generate_images)."
        )
    for split in SPLITS:
        split_dir = images_dir / split
        found = sorted(p.name for p in split_dir.iterdir()) if split_dir.is_dir() else []
        if found != sorted(CLASSES):
            raise ValueError(
                f"{split_dir} must hold exactly the class folders {list(CLASSES)}, found {found}: "
                "regenerate the sample with --force."
            )
        for cls in CLASSES:
            if not any((split_dir / cls).glob("*.jpg")):
                raise ValueError(f"{split_dir / cls} has no .jpg files: regenerate with --force.")


@functools.cache
def _synthetic_builder_class() -> type:
    """The real `Cassava` builder, reading a local folder instead of downloading the zip.

    Defined on first use because importing TFDS costs seconds. ``skip_registration`` keeps
    it out of TFDS's registry, so in this process too ``tfds.builder('cassava')`` stays the
    real builder; ``name = "cassava"`` makes it write where the real one reads.
    """
    import tensorflow_datasets as tfds
    from tensorflow_datasets.image_classification.cassava import Cassava

    class SyntheticCassava(Cassava, skip_registration=True):
        name = TFDS_NAME
        # TFDS looks for a checksums file beside the builder's code, through a path lookup
        # that needs the `importlib_resources` package for any module outside TFDS itself.
        # Nothing is downloaded here, so there are no checksums to look up.
        code_path = None

        def __init__(self, *, images_dir: Path, provenance: Mapping[str, Any], **kwargs: Any):
            self._images_dir = Path(images_dir)
            self._provenance = dict(provenance)
            super().__init__(**kwargs)

        def _info(self) -> tfds.core.DatasetInfo:
            real = super()._info()
            info = tfds.core.DatasetInfo(
                builder=self,
                description=SYNTHETIC_NOTE + "\n\nThe real dataset:\n" + real.description,
                features=real.features,
                supervised_keys=real.supervised_keys,
                homepage=real.homepage,
                citation=real.citation,
                metadata=tfds.core.MetadataDict(synthetic=True, **self._provenance),
            )
            # A process that reads the data with the real builder takes `description` from
            # the real code; `config_description` is not in that code, so it comes from the
            # prepared dataset_info.json and shows in `print(info)` there too.
            info.as_proto.config_description = SYNTHETIC_NOTE
            return info

        def _split_generators(self, dl_manager: Any) -> list[Any]:
            del dl_manager  # nothing to download: the images are on disk
            return [
                tfds.core.SplitGenerator(
                    name=split, gen_kwargs={"datapath": str(self._images_dir / split)}
                )
                for split in SPLITS
            ]

    return SyntheticCassava


def prepare_tfds(
    raw_root: Path, data_dir: Path, *, provenance: Mapping[str, Any] | None = None
) -> Path:
    """Prepare ``raw_root/cassavaleafdata`` as TFDS ``cassava`` in ``data_dir``; return it.

    Afterwards ``tfds.load('cassava', data_dir=data_dir)`` works offline in any process,
    with the real builder and no kit code. A previous preparation there is replaced.
    Nothing is written outside ``data_dir`` (not ``~/tensorflow_datasets``).
    """
    images_dir = Path(raw_root) / IMAGES_FOLDER
    _check_images_dir(images_dir)
    data_dir = Path(data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(data_dir / TFDS_NAME, ignore_errors=True)
    builder = _synthetic_builder_class()(
        images_dir=images_dir.resolve(),
        provenance=provenance or {"made_by": "labkit.course.sample"},
        data_dir=str(data_dir),
    )
    with _no_progress_output():
        builder.download_and_prepare(download_dir=str(data_dir / "downloads"))
    shutil.rmtree(data_dir / "downloads", ignore_errors=True)  # empty: nothing was downloaded
    return data_dir


@contextlib.contextmanager
def _no_progress_output() -> Iterator[None]:
    """TFDS's progress bars and its "Downloading and preparing" line (nothing is downloaded)
    would only confuse a learner; failures still raise with their own message."""
    import tensorflow_datasets as tfds

    tfds.disable_progress_bar()
    with contextlib.redirect_stdout(io.StringIO()):
        yield


# --------------------------------------------------------------------------------------
# ensure_sample: the one call notebooks, `make lab` and tests use
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SampleInfo:
    """A prepared sample: where its JPEGs and its TFDS data dir are, and what is in them."""

    root: Path
    images_dir: Path  # .../cassavaleafdata, the original zip's layout
    tfds_data_dir: Path  # pass as --data-dir / tfds.load(..., data_dir=...)
    counts: Counts
    seed: int
    size: str

    @property
    def split_sizes(self) -> dict[str, int]:
        return {split: sum(per_class.values()) for split, per_class in self.counts.items()}

    @property
    def majority_baseline(self) -> float:
        """Validation accuracy of always answering the largest class: what "learned" must beat."""
        validation = self.counts["validation"]
        return max(validation.values()) / sum(validation.values())


def _size_label(size: str, scale: float | None) -> str:
    return f"scale={scale:g}" if scale is not None else size


def _manifest_params(size: str, scale: float | None, seed: int, counts: Counts) -> dict[str, Any]:
    return {
        "generator_version": GENERATOR_VERSION,
        "size": _size_label(size, scale),
        "seed": seed,
        "counts": counts,
    }


def _read_manifest(root: Path) -> dict[str, Any] | None:
    try:
        return json.loads((root / MANIFEST_NAME).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _prepared(root: Path) -> bool:
    tfds_info = root / TFDS_FOLDER / TFDS_NAME / TFDS_VERSION / "dataset_info.json"
    return tfds_info.is_file() and (root / RAW_FOLDER / IMAGES_FOLDER).is_dir()


def _info_from_manifest(root: Path, manifest: Mapping[str, Any]) -> SampleInfo:
    return SampleInfo(
        root=root,
        images_dir=root / RAW_FOLDER / IMAGES_FOLDER,
        tfds_data_dir=root / TFDS_FOLDER,
        counts=manifest["counts"],
        seed=manifest["seed"],
        size=manifest["size"],
    )


@contextlib.contextmanager
def _exclusive(root: Path) -> Iterator[None]:
    """One preparer per root: a notebook and `make lab` may ask at the same time."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure_sample(
    root: Path | None = None,
    *,
    size: str = "small",
    seed: int = 0,
    force: bool = False,
    scale: float | None = None,
) -> SampleInfo:
    """The prepared sample under ``root`` (default ``LAB_HOME/sample``), made only if needed.

    Layout: ``root/raw/cassavaleafdata/...`` (JPEGs), ``root/tfds`` (TFDS data dir),
    ``root/sample.json`` (the manifest, written last). A sample with the same size, seed and
    generator version is returned as is, without importing TensorFlow; anything else (or
    ``force``) regenerates the images and re-prepares the TFDS data.
    """
    root = Path(root if root is not None else paths.sample_root()).resolve()
    counts = plan_counts(size, scale=scale)
    _check_seed(seed)
    wanted = _manifest_params(size, scale, seed, counts)
    manifest = _read_manifest(root)
    if not force and manifest and _matches(manifest, wanted) and _prepared(root):
        return _info_from_manifest(root, manifest)
    with _exclusive(root):
        manifest = _read_manifest(root)  # someone may have made it while we waited
        if not force and manifest and _matches(manifest, wanted) and _prepared(root):
            return _info_from_manifest(root, manifest)
        (root / MANIFEST_NAME).unlink(missing_ok=True)
        generate_images(root / RAW_FOLDER, counts=counts, seed=seed)
        prepare_tfds(
            root / RAW_FOLDER,
            root / TFDS_FOLDER,
            provenance={"made_by": "labkit.course.sample", "size": wanted["size"], "seed": seed},
        )
        manifest = {
            **wanted,
            "images_dir": f"{RAW_FOLDER}/{IMAGES_FOLDER}",
            "tfds_data_dir": TFDS_FOLDER,
        }
        tmp = root / f".{MANIFEST_NAME}.tmp"
        tmp.write_text(json.dumps(manifest, indent=2) + "\n")
        tmp.replace(root / MANIFEST_NAME)
    return _info_from_manifest(root, manifest)


def _matches(manifest: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    return all(manifest.get(key) == value for key, value in wanted.items())


# --------------------------------------------------------------------------------------
# CLI: python -m labkit sample
# --------------------------------------------------------------------------------------


def format_counts(counts: Counts) -> str:
    """A split x class table of image counts, in the edition's words (class names stay the
    dataset's own)."""
    rows = [
        [gettext(split), *(counts[split][c] for c in CLASSES), sum(counts[split].values())]
        for split in SPLITS
    ]
    return text_table(
        [gettext("split"), *CLASSES, gettext("total")],
        rows,
        align="<" + ">" * (len(CLASSES) + 1),
        sep=" ",
        min_widths=(11, *[8] * (len(CLASSES) + 1)),  # the English layout: 11, then 9 a column
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m labkit sample",
        description="Generate the SYNTHETIC cassava sample (real JPEGs, the original zip's "
        "layout) and prepare it through the real TFDS `cassava` builder, offline.",
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        help="folder for raw/ (JPEGs), tfds/ (TFDS data dir) and sample.json "
        "(default: $CASSAVA_LAB_HOME/sample, i.e. <repo>/.lab/sample)",
    )
    how_many = parser.add_mutually_exclusive_group()
    how_many.add_argument(
        "--size",
        choices=list(SIZES),
        default="small",
        help="small: 500/125/125 images (about 20 s on 2 cores); medium: 1500/500/500; "
        "full: the real 5656/1889/1885 (default: small)",
    )
    how_many.add_argument(
        "--scale",
        type=float,
        default=None,
        help="instead of --size: this fraction of the real split sizes, real class shares",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument(
        "--force", action="store_true", help="regenerate even if a matching sample exists"
    )
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    started = time.perf_counter()
    try:
        info = ensure_sample(
            args.root, size=args.size, seed=args.seed, force=args.force, scale=args.scale
        )
    except ValueError as err:
        print(f"labkit sample: {err}", file=sys.stderr)
        return 2
    elapsed = time.perf_counter() - started
    print(
        gettext("SYNTHETIC cassava sample ({size}, seed {seed}), ready in {elapsed:.1f} s").format(
            size=info.size, seed=info.seed, elapsed=elapsed
        )
    )
    print(
        text_table(
            [gettext("images:"), info.images_dir],
            [
                [gettext("tfds dir:"), info.tfds_data_dir],
                ["", f"tfds.load('cassava', data_dir='{info.tfds_data_dir}')"],
                ["", f"python -m trainer.task --data tfds:cassava --data-dir {info.tfds_data_dir}"],
            ],
            sep=" ",
        )
    )
    print(format_counts(info.counts))
    return 0
