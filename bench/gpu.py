"""The GPU benchmark: one short script for one device call (`python -m bench.gpu --out DIR`).

On one GPU at the codelab's 300x300 and batch 64 it measures:
- training images/s of the kit's model (`trainer.model.build_model` + `compile_model`) in
  float32 and mixed_float16, each with and without XLA (`jit_compile`), on synthetic
  images already on the device, so the figure is the model's and not the input's;
- MFU (model FLOPs utilisation): 3 x forward FLOPs per image (counted by TensorFlow's
  profiler on the frozen forward graph) x images/s, over the GPU's dense peak for that
  math (TF32 for float32, FP16 tensor cores for mixed precision);
- the input pipeline's ceiling on this machine's CPUs: images/s of the codelab's own
  `create_dataset` (`codelab/trainer/task.py`, always 300x300) and of the kit's
  `make_pipeline` (cache off: decoding every epoch; cache memory: replaying resized
  images) on JPEGs drawn by `labkit.course.sample`, no model attached.
  When the kit's ceiling is below the best GPU figure, training there is input-bound.
Every stage is bounded (fixed steps, a time budget), and `DIR/gpu.json` is rewritten after
each stage, so a call cut short still returns what was measured. Without a GPU it runs on
the CPU and says so (the smoke test does that with tiny sizes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

VARIANTS = {  # name -> (mixed precision, XLA)
    "fp32": (False, False),
    "fp32_xla": (False, True),
    "mixed": (True, False),
    "mixed_xla": (True, True),
}
# Dense peak TFLOP/s by device-name fragment: (TF32 or FP32 math used by float32, FP16 tensor).
# Vendor data sheets, without sparsity; first match wins (more specific names first).
PEAK_TFLOPS: tuple[tuple[str, float, float], ...] = (
    ("H200", 494.7, 989.4),
    ("H100 PCIe", 378.0, 756.0),
    ("H100", 494.7, 989.4),
    ("A100", 156.0, 312.0),
    ("L4", 60.0, 121.0),
    ("A10G", 35.0, 70.0),
    ("T4", 8.1, 65.0),
    ("V100", 15.7, 125.0),
)
RESNET50_FORWARD_MACS_224 = 4.09e9  # fallback when the profiler cannot count


def peak_tflops(device_name: str | None) -> tuple[float | None, float | None]:
    """(float32-path peak, FP16 peak) for a known GPU name, else (None, None)."""
    for fragment, fp32_path, fp16 in PEAK_TFLOPS:
        if device_name and fragment.lower() in device_name.lower():
            return fp32_path, fp16
    return None, None


def forward_flops_per_image(image_size: int) -> tuple[float, str]:
    """Forward FLOPs of the kit's model for one image, and how they were obtained."""
    import tensorflow as tf
    import tf_keras as keras
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    from trainer import model as model_lib

    model, _ = model_lib.build_model(5, image_size=image_size, weights="none")
    try:
        forward = tf.function(lambda x: model(x, training=False))
        concrete = forward.get_concrete_function(
            tf.TensorSpec([1, image_size, image_size, 3], tf.uint8)
        )
        graph_def = convert_variables_to_constants_v2(concrete).graph.as_graph_def()
        with tf.Graph().as_default() as graph:
            tf.graph_util.import_graph_def(graph_def, name="")
            options = (
                tf.compat.v1.profiler.ProfileOptionBuilder(
                    tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
                )
                .with_empty_output()
                .build()
            )
            profile = tf.compat.v1.profiler.profile(graph=graph, cmd="op", options=options)
        if profile.total_float_ops > 0:
            return float(profile.total_float_ops), "tf profiler (frozen forward graph)"
    except Exception:  # an unsupported graph on some version: fall back to the paper's count
        pass
    finally:
        keras.backend.clear_session()
    return 2 * RESNET50_FORWARD_MACS_224 * (image_size / 224) ** 2, "ResNet50 4.09 GMACs at 224"


def train_variant(
    name: str, image_size: int, batch_size: int, steps: int, warmup: int
) -> dict[str, Any]:
    """Images/s of `steps` training steps after `warmup` (compilation) on on-device data."""
    import tensorflow as tf
    import tf_keras as keras

    from trainer import model as model_lib

    mixed, xla = VARIANTS[name]
    keras.backend.clear_session()
    keras.mixed_precision.set_global_policy("mixed_float16" if mixed else "float32")
    try:
        keras.utils.set_random_seed(0)
        model, _ = model_lib.build_model(5, image_size=image_size, weights="none")
        model_lib.compile_model(model, 1e-4, jit_compile=xla)
        images = tf.random.uniform(  # pixels, as the pipeline hands them over
            (batch_size, image_size, image_size, 3), maxval=256, dtype=tf.int32
        )
        images = tf.cast(images, tf.uint8)
        labels = tf.random.uniform((batch_size,), maxval=5, dtype=tf.int64)
        data = tf.data.Dataset.from_tensors((images, labels)).repeat()
        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            tf.config.experimental.reset_memory_stats("GPU:0")
        begin = time.perf_counter()
        model.fit(data, steps_per_epoch=warmup, epochs=1, verbose=0)
        warmup_s = time.perf_counter() - begin
        begin = time.perf_counter()
        history = model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0)
        timed_s = time.perf_counter() - begin
        peak_gpu_mb = (
            tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20 if gpus else None
        )
        return {
            "images_per_s": steps * batch_size / timed_s,
            "step_ms": 1000 * timed_s / steps,
            "warmup_s": warmup_s,
            "loss": float(history.history["loss"][-1]),
            "peak_device_memory_mb": peak_gpu_mb,
        }
    finally:
        keras.mixed_precision.set_global_policy("float32")


def pipeline_ceiling(
    tfds_data_dir: str, image_size: int, batch_size: int, batches: int
) -> dict[str, Any]:
    """Images/s the CPUs deliver, no model: codelab pipeline, kit without and with cache."""
    from bench.baseline import CODELAB_IMAGE_SIZE, load_codelab
    from trainer import data

    results: dict[str, Any] = {"codelab_image_size": CODELAB_IMAGE_SIZE}
    codelab = load_codelab(tfds_data_dir)  # its tfds.load() reads TFDS_DATA_DIR
    dataset, _ = codelab.create_dataset(batch_size)
    results["codelab_images_per_s"] = _drain_rate(dataset.repeat(), batches)
    split = data.load_split("tfds:cassava", "train", data_dir=tfds_data_dir, shuffle_files=True)
    for cache in ("off", "memory"):
        kit = data.make_pipeline(
            split, global_batch=batch_size, image_size=image_size, training=True, cache=cache
        )
        results[f"kit_cache_{cache}_images_per_s"] = _drain_rate(
            kit, batches, skip=-(-split.num_examples // batch_size) if cache == "memory" else 2
        )
    results["train_images"] = split.num_examples
    return results


def _drain_rate(dataset: Any, batches: int, skip: int = 2) -> float:
    """Images/s over `batches` batches after skipping `skip` (start-up, or filling a cache)."""
    iterator = iter(dataset)
    for _ in range(skip):
        next(iterator)
    images = 0
    begin = time.perf_counter()
    for _ in range(batches):
        x, _labels = next(iterator)
        images += int(x.shape[0])
    return images / (time.perf_counter() - begin)


def device_info() -> dict[str, Any]:
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    info: dict[str, Any] = {
        "gpus": len(gpus),
        "cpus": os.cpu_count(),
        "tensorflow": tf.__version__,
        "built_with_cuda": tf.test.is_built_with_cuda(),
    }
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        info["device_name"] = details.get("device_name")
        info["compute_capability"] = details.get("compute_capability")
    return info


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.gpu",
        description="One-GPU benchmark: float32 vs mixed precision, with and without XLA, "
        "MFU, and the input pipeline's ceiling on this machine's CPUs.",
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for gpu.json")
    parser.add_argument("--image-size", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=30, help="timed training steps per variant")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps (compilation)")
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"comma-separated, of {list(VARIANTS)}"
    )
    parser.add_argument(
        "--pipeline-batches", type=int, default=40, help="timed batches per pipeline (0: skip)"
    )
    parser.add_argument(
        "--pipeline-scale",
        type=float,
        default=0.1,
        help="JPEG set as a fraction of the real cassava splits (0.1: 566 training images)",
    )
    parser.add_argument(
        "--work-dir", type=Path, help="where to draw the JPEGs (default: a temp dir)"
    )
    parser.add_argument("--budget-s", type=float, default=300, help="skip stages after this")
    return parser


def _check_args(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[str]:
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        parser.error(f"--variants: unknown {unknown or 'empty'}; choose from {list(VARIANTS)}")
    for name in ("image_size", "batch_size", "steps", "warmup"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if not 0 < args.pipeline_scale <= 1:
        parser.error("--pipeline-scale must be in (0, 1]")
    return variants


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    variants = _check_args(args, parser)
    started = time.monotonic()
    out = args.out / "gpu.json"
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "params": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "device": device_info(),
        "variants": {},
    }

    def save() -> None:
        report["wall_s"] = time.monotonic() - started
        out.write_text(json.dumps(report, indent=2) + "\n")

    def over_budget() -> bool:
        return time.monotonic() - started > args.budget_s

    on_gpu = report["device"]["gpus"] > 0
    peaks = peak_tflops(report["device"].get("device_name"))
    report["peak_tflops"] = {"float32_path": peaks[0], "fp16": peaks[1]}
    flops, how = forward_flops_per_image(args.image_size)
    report["flops"] = {"forward_per_image": flops, "train_per_image": 3 * flops, "source": how}
    save()
    for name in variants:
        if over_budget():
            report["variants"][name] = {"status": "skipped: time budget"}
            continue
        try:
            result = train_variant(name, args.image_size, args.batch_size, args.steps, args.warmup)
        except Exception as err:  # e.g. XLA unavailable: record it, go on with the others
            report["variants"][name] = {"status": f"error: {type(err).__name__}: {err}"[:500]}
            save()
            continue
        achieved = 3 * flops * result["images_per_s"] / 1e12
        peak = peaks[1] if VARIANTS[name][0] else peaks[0]
        result["achieved_tflops"] = achieved
        result["mfu"] = achieved / peak if on_gpu and peak else None
        result["mfu_vs_fp16_peak"] = achieved / peaks[1] if on_gpu and peaks[1] else None
        report["variants"][name] = {"status": "ok", **result}
        save()
        print(f"[gpu] {name}: {result['images_per_s']:.1f} images/s", flush=True)
    ok = {n: v for n, v in report["variants"].items() if v.get("status") == "ok"}
    if "fp32" in ok:
        base = ok["fp32"]["images_per_s"]
        report["speedups_vs_fp32"] = {n: v["images_per_s"] / base for n, v in ok.items()}
    if args.pipeline_batches > 0 and not over_budget():
        from labkit.course.sample import ensure_sample

        work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-gpu-"))
        sample = ensure_sample(work / "sample", scale=args.pipeline_scale)
        report["pipeline"] = pipeline_ceiling(
            str(sample.tfds_data_dir), args.image_size, args.batch_size, args.pipeline_batches
        )
        best = max((v["images_per_s"] for v in ok.values()), default=None)
        ceiling = report["pipeline"]["kit_cache_off_images_per_s"]
        report["pipeline"]["best_model_images_per_s"] = best
        report["pipeline"]["input_bound"] = None if best is None else ceiling < best
    elif args.pipeline_batches > 0:
        report["pipeline"] = {"status": "skipped: time budget"}
    save()
    print(json.dumps({k: report[k] for k in report if k != "params"}, indent=2))
    print(f"[gpu] results in {out}" + ("" if on_gpu else " (no GPU seen: ran on the CPU)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
