"""The lab's charts. Each function takes plain data and returns a matplotlib Figure.

Figures are closed in pyplot before they are returned, so a notebook shows each one once
(as the cell's value) and a test can inspect or save it without a display.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from labkit.i18n import _, fonts

# Chinese glyphs for the zh-CN edition (a fallback after the default font; Latin text unchanged)
fonts.register()


def _done(fig: Figure) -> Figure:
    fig.tight_layout()
    plt.close(fig)
    fig.alt_text = describe_figure(fig)  # type: ignore[attr-defined]
    fig._repr_mimebundle_ = lambda include=None, exclude=None: _mimebundle(fig)  # type: ignore[attr-defined]
    return fig


def describe_figure(fig: Figure) -> str:
    """Alternative text for a chart, from what it draws: each panel's title, axes and series.

    Screen readers and the executed-run report (nbconvert warns on an image without it) show
    this instead of the picture; built from the figure, it follows its (localised) titles.
    """
    panels = []
    for ax in fig.axes:
        parts = [ax.get_title() or _("untitled panel")]
        xlabel, ylabel = ax.get_xlabel(), ax.get_ylabel()
        if xlabel or ylabel:
            parts.append(_("x: {x}, y: {y}").format(x=xlabel or "-", y=ylabel or "-"))
        ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        if ticks and len(ticks) <= 8:
            parts.append(_("categories: {names}").format(names=", ".join(ticks)))
        legend = ax.get_legend()
        if legend is not None:
            names = ", ".join(t.get_text() for t in legend.get_texts())
            parts.append(_("series: {names}").format(names=names))
        if ax.images and not (xlabel or ylabel):
            parts.append(_("picture"))
        panels.append(" (".join([parts[0], "; ".join(parts[1:])]) + ")" if parts[1:] else parts[0])
    shown = panels[:12]
    more = (
        _("; and {n} more panels").format(n=len(panels) - len(shown))
        if len(panels) > len(shown)
        else ""
    )
    return _("Chart with {n} panel(s): ").format(n=len(panels)) + "; ".join(shown) + more


def _mimebundle(fig: Figure) -> tuple[dict[str, Any], dict[str, Any]]:
    """The PNG Jupyter would show, with the alternative text in its metadata."""
    from IPython.core.pylabtools import print_figure

    png = print_figure(fig, "png", base64=True)
    alt = getattr(fig, "alt_text", "") or describe_figure(fig)
    return {"image/png": png, "text/plain": alt}, {"image/png": {"alt": alt}}


def _check_same_length(**named: Sequence[Any]) -> None:
    lengths = {name: len(values) for name, values in named.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"these must have the same length: {lengths}")


def class_distribution(
    counts: Mapping[str, Sequence[int]],
    class_names: Sequence[str],
    reference: Mapping[str, int] | None = None,
    highlight: Sequence[str] = ("cmd", "cbsd"),
) -> Figure:
    """Bars of images per class for each split, and the class shares next to a reference
    (the real training split), with the ``highlight`` classes' combined share in the title."""
    if not counts:
        raise ValueError("counts is empty: pass {split: [images per class]}")
    for split, values in counts.items():
        _check_same_length(**{f"counts[{split!r}]": values, "class_names": class_names})
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4))
    x = np.arange(len(class_names))
    width = 0.8 / len(counts)
    for i, (split, values) in enumerate(counts.items()):
        left.bar(x + i * width, values, width, label=f"{_(split)} ({sum(values)})")
    left.set_xticks(x + width * (len(counts) - 1) / 2, class_names)
    left.set_ylabel(_("images"))
    left.set_title(_("Images per class and split"))
    left.legend()

    first = "train" if "train" in counts else next(iter(counts))
    shares = np.array(counts[first], dtype=float) / max(sum(counts[first]), 1)
    right.bar(x - 0.2, shares * 100, 0.4, label=_("this data ({split})").format(split=_(first)))
    title = _("Class share (%)")
    picked = [class_names.index(c) for c in highlight if c in class_names]
    if reference:
        ref = np.array([reference.get(c, 0) for c in class_names], dtype=float)
        ref_shares = ref / max(ref.sum(), 1)
        right.bar(x + 0.2, ref_shares * 100, 0.4, label=_("real cassava (train)"))
        if picked:
            title += _(": {classes} = {here:.1%} here, {real:.1%} in the real data").format(
                classes=" + ".join(class_names[i] for i in picked),
                here=shares[picked].sum(),
                real=ref_shares[picked].sum(),
            )
    elif picked:
        title += f": {' + '.join(class_names[i] for i in picked)} = {shares[picked].sum():.1%}"
    right.set_xticks(x, class_names)
    right.set_title(title, fontsize=10)
    right.legend()
    return _done(fig)


def examples_grid(
    images: Sequence[np.ndarray], labels: Sequence[int], class_names: Sequence[str]
) -> Figure:
    """One row per class, its example images side by side, with their sizes."""
    _check_same_length(images=images, labels=labels)
    if not images:
        raise ValueError("no images to show")
    rows = sorted(set(labels))
    per_row = max(sum(1 for y in labels if y == r) for r in rows)
    fig, axes = plt.subplots(
        len(rows), per_row, figsize=(2.2 * per_row, 2.2 * len(rows)), squeeze=False
    )
    for ax in axes.flat:
        ax.axis("off")
    for r, cls in enumerate(rows):
        mine = [img for img, y in zip(images, labels, strict=True) if y == cls]
        for c, img in enumerate(mine):
            ax = axes[r][c]
            ax.imshow(img)
            ax.set_title(f"{class_names[cls]}  {img.shape[1]}x{img.shape[0]}", fontsize=8)
    return _done(fig)


def image_size_distribution(sizes: Sequence[tuple[int, int]], target: int = 300) -> Figure:
    """Widths against heights of the images, with the square size the model is fed."""
    if not sizes:
        raise ValueError("no image sizes to plot")
    heights = np.array([h for h, _ in sizes])
    widths = np.array([w for _, w in sizes])
    fig, (scatter, hist) = plt.subplots(1, 2, figsize=(11, 4))
    scatter.scatter(widths, heights, s=8, alpha=0.5)
    scatter.scatter([target], [target], marker="s", s=60, color="red", label=f"{target}x{target}")
    scatter.set_xlabel(_("width (px)"))
    scatter.set_ylabel(_("height (px)"))
    scatter.set_title(_("Image sizes ({n} images)").format(n=len(sizes)))
    scatter.legend()
    ratios = widths / heights
    hist.hist(ratios, bins=20)
    hist.axvline(1.0, color="red", label=_("square (what resizing produces)"))
    hist.set_xlabel(_("aspect ratio width / height"))
    hist.set_title(_("Aspect ratios: resizing to a square stretches most images"))
    hist.legend()
    return _done(fig)


def resize_before_after(original: np.ndarray, resized: Mapping[str, np.ndarray]) -> Figure:
    """The original picture next to what each resize turns it into (labelled by size)."""
    fig, axes = plt.subplots(1, 1 + len(resized), figsize=(4 * (1 + len(resized)), 4))
    axes = np.atleast_1d(axes)
    axes[0].imshow(original)
    axes[0].set_title(
        _("original {width}x{height}").format(width=original.shape[1], height=original.shape[0])
    )
    for ax, (label, image) in zip(axes[1:], resized.items(), strict=True):
        ax.imshow(image)
        ax.set_title(f"{_(label)}: {image.shape[1]}x{image.shape[0]} {image.dtype}")
    for ax in axes:
        ax.axis("off")
    return _done(fig)


def learning_curves(history: Mapping[str, Sequence[float]], title: str = "") -> Figure:
    """Loss and accuracy per epoch, training and validation."""
    if not history.get("loss"):
        raise ValueError("history has no 'loss': pass RunResult.history")
    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(11, 4))
    epochs = np.arange(1, len(history["loss"]) + 1)
    for ax, metric in ((loss_ax, "loss"), (acc_ax, "accuracy")):
        for key, style in ((metric, "o-"), (f"val_{metric}", "s--")):
            if history.get(key):
                ax.plot(epochs[: len(history[key])], history[key], style, label=_(key))
        ax.set_xlabel(_("epoch"))
        ax.set_xticks(epochs)
        ax.set_title(f"{_(title) if title else ''} {_(metric)}".strip())
        ax.legend()
    acc_ax.axhline(0.2, color="grey", linestyle=":", label=_("chance (5 classes)"))
    acc_ax.legend()
    return _done(fig)


def confusion_counts(y_true: Sequence[int], y_pred: Sequence[int], n: int) -> np.ndarray:
    """n x n counts: row = true class, column = predicted class."""
    _check_same_length(y_true=y_true, y_pred=y_pred)
    matrix = np.zeros((n, n), dtype=int)
    for t, p in zip(y_true, y_pred, strict=True):
        matrix[int(t), int(p)] += 1
    return matrix


def confusion_matrix(
    y_true: Sequence[int], y_pred: Sequence[int], class_names: Sequence[str], title: str = ""
) -> Figure:
    """Counts of (true, predicted) pairs; the diagonal is what the model got right."""
    matrix = confusion_counts(y_true, y_pred, len(class_names))
    fig, ax = plt.subplots(figsize=(5.5, 5))
    ax.imshow(matrix, cmap="Blues")
    for (t, p), value in np.ndenumerate(matrix):
        colour = "white" if value > matrix.max() / 2 else "black"
        ax.text(p, t, str(value), ha="center", va="center", color=colour)
    ax.set_xticks(range(len(class_names)), class_names)
    ax.set_yticks(range(len(class_names)), class_names)
    ax.set_xlabel(_("predicted"))
    ax.set_ylabel(_("true"))
    right = int(np.trace(matrix))
    score = _("{right}/{total} right").format(right=right, total=matrix.sum())
    ax.set_title(f"{_(title) if title else ''} {score}".strip())
    return _done(fig)


def predictions_grid(
    images: Sequence[np.ndarray],
    y_true: Sequence[int],
    y_pred: Sequence[int],
    class_names: Sequence[str],
    probabilities: Sequence[Sequence[float]] | None = None,
    columns: int = 4,
) -> Figure:
    """Each image with its true and predicted class (green when right, red when wrong)."""
    _check_same_length(images=images, y_true=y_true, y_pred=y_pred)
    if not images:
        raise ValueError("no images to show")
    rows = -(-len(images) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3 * columns, 3.2 * rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for i, (ax, image, t, p) in enumerate(zip(axes.flat, images, y_true, y_pred, strict=False)):
        ax.imshow(image)
        confidence = f" {probabilities[i][p]:.0%}" if probabilities is not None else ""
        ax.set_title(
            _("true {true}\npredicted {predicted}").format(
                true=class_names[t], predicted=class_names[p]
            )
            + confidence,
            color="green" if t == p else "red",
            fontsize=9,
        )
    return _done(fig)


def _run_name(name: str) -> str:
    """A run's label in the edition's words: the kit's own names ("baseline", "2 workers"),
    anything else as given."""
    workers = re.fullmatch(r"(\d+) workers?", name)
    return _("{n} workers").format(n=workers.group(1)) if workers else _(name)


def compare_runs(
    runs: Mapping[str, Mapping[str, float | None]],
    metrics: Sequence[tuple[str, str]] = (
        ("images_per_sec", "training images/s"),
        ("val_accuracy", "validation accuracy"),
        ("wall_time_s", "wall time (s)"),
    ),
) -> Figure:
    """One panel per metric, one bar per run (e.g. the baseline and the 2-worker run)."""
    if not runs:
        raise ValueError("no runs to compare")
    fig, axes = plt.subplots(1, len(metrics), figsize=(4 * len(metrics), 3.8))
    names = list(runs)
    for ax, (key, label) in zip(np.atleast_1d(axes), metrics, strict=True):
        values = [float(runs[n].get(key) or 0.0) for n in names]
        bars = ax.bar(
            [_run_name(n) for n in names],
            values,
            color=["tab:blue", "tab:orange", "tab:green"][: len(names)],
        )
        ax.bar_label(bars, fmt="%.3g")
        ax.set_title(_(label))
    return _done(fig)
