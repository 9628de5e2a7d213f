"""Using a trained model: the numbers of a run, predictions, accuracy.

Predictions go through the exported SavedModel's ``serve_jpeg`` signature, the way a
deployed model is called (pictures in, classes out). This module imports TensorFlow:
notebooks import it after their settings load quieted TensorFlow's logs.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from labkit.course.dataviews import encoded_examples
from labkit.course.results import record
from trainer.export import SAVEDMODEL_DIR


def summarize_run(
    metrics: Mapping[str, Any],
    run_dir: str | Path | None = None,
    name: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The numbers 03 compares, from a `RunResult.to_dict()` or the chief's ``metrics.json``
    (the same keys), with ``extra`` ones over them (e.g. the wall time of two attempts).

    With ``run_dir`` and ``name``, the summary is recorded as this run's ``name``.
    """
    final = metrics.get("final_metrics") or {}
    summary: dict[str, Any] = {
        "replicas": metrics.get("replicas"),
        "images_per_sec": metrics.get("images_per_sec"),
        "accuracy": final.get("accuracy"),
        "val_accuracy": final.get("val_accuracy"),
        "wall_time_s": metrics.get("wall_time_s"),
        "epochs_run": metrics.get("epochs_run"),
        "model_dir": metrics.get("model_dir"),
        "metrics_file": metrics.get("metrics_file"),
    }
    if "workers" in metrics:
        summary["workers"] = metrics["workers"]
    summary.update(extra)
    if run_dir is not None and name:
        record(run_dir, name, summary)
    return summary


def savedmodel_path(model_dir: str | Path) -> str:
    """``<model dir>/savedmodel`` as the trainer exports it (local path or gs://)."""
    return f"{str(model_dir).rstrip('/')}/{SAVEDMODEL_DIR}"


def _load_savedmodel(savedmodel_dir: str) -> Any:
    """A SavedModel, loaded once per version of it: ResNet50 takes seconds to load, and a
    model saved again at the same path (a rerun training cell) must not be served stale."""
    pb = Path(savedmodel_dir) / "saved_model.pb"
    version = pb.stat().st_mtime_ns if pb.is_file() else None  # gs:// paths: by path only
    return _load_savedmodel_version(savedmodel_dir, version)


@functools.lru_cache(maxsize=4)
def _load_savedmodel_version(savedmodel_dir: str, version: int | None) -> Any:
    return tf.saved_model.load(savedmodel_dir)  # kept: its signatures need it alive


def accuracy(y_true: Sequence[int], y_pred: Sequence[int]) -> float:
    """The share of predictions that match the labels (0 for no labels)."""
    return sum(int(a == b) for a, b in zip(y_true, y_pred, strict=True)) / max(len(y_true), 1)


def predict_encoded(
    savedmodel_dir: str | Path,
    encoded: Sequence[bytes],
    batch: int = 64,
    *,
    labels: Sequence[int] | None = None,
    run_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Class probabilities for raw JPEG/PNG bytes through the ``serve_jpeg`` signature.

    That is how a deployed model is called: pictures in, classes out; the signature
    resizes and scales exactly as training did. With ``labels`` and ``run_dir``, the
    prediction and its share of right answers are recorded as this run's ``prediction``.
    """
    serve = _load_savedmodel(str(savedmodel_dir)).signatures["serve_jpeg"]
    probabilities, names = [], []
    for start in range(0, len(encoded), batch):
        out = serve(image_bytes=tf.constant(list(encoded[start : start + batch])))
        probabilities.append(out["probabilities"].numpy())
        names += [n.decode() for n in out["class_name"].numpy()]
    probs = np.concatenate(probabilities) if probabilities else np.zeros((0, 0))
    predicted = {
        "probabilities": probs,
        "class_id": probs.argmax(axis=-1) if len(probs) else np.zeros(0, int),
        "class_name": names,
    }
    if run_dir is not None and labels is not None:
        record(
            run_dir,
            "prediction",
            {
                "images": len(encoded),
                "probabilities": probs,
                "predicted": names,
                "right": accuracy(labels, predicted["class_id"]),
            },
        )
    return predicted


def evaluate_split(
    savedmodel_dir: str | Path, knobs: Mapping[str, Any], split: str, limit: int | None = None
) -> tuple[list[int], list[int], list[str]]:
    """(true labels, predicted labels, class names) for a split through the SavedModel."""
    encoded, labels, class_names = encoded_examples(knobs, split, limit or 10**9)
    predicted = predict_encoded(savedmodel_dir, encoded)
    return labels, [int(c) for c in predicted["class_id"]], class_names
