"""Smoke tests of `bench/`: each section's code runs at tiny sizes and returns numbers.

They check that the benchmark code works, not the figures (those need a quiet machine and
full sizes: `make bench`). The tiny JPEG set is made once under `.lab/bench/` and reused.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labkit.paths import REPO_ROOT

if str(REPO_ROOT) not in sys.path:  # `bench` is a folder of the repo, not an installed package
    sys.path.insert(0, str(REPO_ROOT))

from bench import __main__ as bench_main  # noqa: E402
from bench import lab, report  # noqa: E402
from bench.measure import BenchContext, child_env  # noqa: E402


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@pytest.fixture(scope="module")
def quick_ctx(tmp_path_factory: pytest.TempPathFactory) -> BenchContext:
    from bench.dataset import ensure_bench_data

    data = ensure_bench_data(quick=True)
    return BenchContext(
        quick=True,
        repeats=1,
        tfds_data_dir=data.tfds_data_dir,
        images_dir=data.images_dir,
        train_images=data.split_sizes["train"],
        scratch=tmp_path_factory.mktemp("bench-scratch"),
    )


def test_parse_sections_keeps_bench_order_and_rejects_unknown_names():
    assert bench_main.parse_sections("lab,pipeline") == ["pipeline", "lab"]
    assert bench_main.parse_sections(None) == ["pipeline", "training", "scaling", "lab"]
    with pytest.raises(ValueError, match="unknown section.*'gpus'.*choose from"):
        bench_main.parse_sections("pipeline,gpus")


def test_table_puts_each_target_beside_its_figure():
    sections = {
        "pipeline": {
            "status": "ok",
            "summary": {"kit.speedup_vs_codelab": 1.46, "kit.peak_rss_mb": 1730.4},
            "checks": [
                {
                    "name": "pipeline.kit.speedup_vs_codelab",
                    "value": 1.46,
                    "target": ">= 1.3x",
                    "met": True,
                }
            ],
        },
        "lab": {"status": "skipped: no notebooks", "summary": {}, "checks": []},
    }
    rows = report.table_rows(sections)
    assert ("pipeline", "kit.speedup_vs_codelab", "1.46", ">= 1.3x", "MET") in rows
    assert ("pipeline", "kit.peak_rss_mb", "1730", "", "") in rows
    assert ("lab", "status", "skipped: no notebooks", "", "") in rows
    assert report.format_table(sections).splitlines()[0].split() == [
        "section",
        "figure",
        "value",
        "target",
        "met",
    ]


def test_no_section_starts_once_the_time_budget_is_spent(quick_ctx):
    spent = dataclasses.replace(quick_ctx, deadline=time.monotonic() - 5)
    result = bench_main.run_section("pipeline", spent)
    assert result["status"].startswith("skipped: time budget spent")
    assert result["runs"] == []


def test_lab_without_notebooks_is_skipped_not_failed(tmp_path, quick_ctx):
    result = lab.run(quick_ctx, notebooks_dir=tmp_path / "none-here")
    assert result["status"] == "skipped: no notebooks"


@pytest.mark.slow
def test_lab_times_notebooks_with_papermill(tmp_path, quick_ctx):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    seen_home = tmp_path / "lab_home_seen.txt"
    cell = {
        "cell_type": "code",
        "id": "tiny-cell",
        "metadata": {},
        "source": "import os, pathlib, time\ntime.sleep(0.2)\n"
        f"pathlib.Path({str(seen_home)!r}).write_text(os.environ['CASSAVA_LAB_HOME'])",
        "outputs": [],
        "execution_count": None,
    }
    notebook = {
        "cells": [cell],
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (notebooks / "00_tiny.ipynb").write_text(json.dumps(notebook))
    result = lab.run(quick_ctx, notebooks_dir=notebooks)
    assert result["status"] == "ok", result
    assert result["params"]["via"] == "papermill"
    assert result["summary"]["notebooks_run"] == 1
    assert result["summary"]["00_tiny.ipynb.s"] >= 0.2
    assert result["checks"][0]["met"] is True
    # the kernel ran with the bench's own LAB_HOME, never the learner's .lab/
    assert seen_home.read_text() == str(lab.bench_lab_home())


@pytest.mark.slow
def test_cli_quick_pipeline_writes_json_with_numbers(tmp_path):
    out = tmp_path / "quick.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "pipeline,lab", "--out", str(out)],
        cwd=REPO_ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    payload = json.loads(out.read_text())
    assert payload["meta"]["quick"] is True
    assert _number(payload["meta"]["wall_s"])
    pipeline = payload["sections"]["pipeline"]
    assert pipeline["status"] == "ok"
    for variant in ("codelab", "kit", "kit_nocache"):
        for figure in ("first_batch_s", "images_per_s", "peak_rss_mb", "rss_growth_mb"):
            assert _number(pipeline["summary"][f"{variant}.{figure}"]), (variant, figure)
    assert _number(pipeline["summary"]["kit.speedup_vs_codelab"])
    assert {c["name"] for c in pipeline["checks"]} >= {
        "pipeline.kit.speedup_vs_codelab",
        "pipeline.kit.memory_ratio_vs_codelab",
    }
    assert all(isinstance(c["met"], bool) for c in pipeline["checks"])
    # every run held real images in memory: its peak is above its pre-pipeline baseline
    assert all(r["peak_rss_mb"] > r["baseline_rss_mb"] for r in pipeline["runs"])
    assert payload["sections"]["lab"]["status"].startswith("skipped")
    assert "kit.speedup_vs_codelab" in done.stdout  # the printed table


@pytest.mark.slow
def test_training_quick_compares_codelab_and_kit(quick_ctx):
    from bench import training

    result = training.run(quick_ctx)
    assert result["status"] == "ok", result
    for side in ("codelab", "kit"):
        for figure in ("images_per_s", "ready_s"):
            assert _number(result["summary"][f"{side}.{figure}"]), (side, figure)
        # both sides took every timed step, in turn, in the same process
        assert len(result["runs"][0][f"{side}.step_s"]) == training.QUICK["steps"]
    assert _number(result["summary"]["kit.speed_ratio_vs_codelab"])
    assert result["summary"]["peak_rss_mb"] > 0


@pytest.mark.slow
def test_scaling_quick_runs_one_and_two_workers(quick_ctx):
    from bench import scaling

    result = scaling.run(quick_ctx)
    assert result["status"] == "ok", result
    assert [r["replicas"] for r in result["runs"]] == [1, 2]
    for figure in ("workers1.images_per_s", "workers2.images_per_s", "speedup_2_workers"):
        assert _number(result["summary"][figure]), figure


@pytest.mark.slow
def test_gpu_script_runs_on_cpu_with_tiny_settings(tmp_path):
    from bench.dataset import ensure_bench_data

    data = ensure_bench_data(quick=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.gpu",
            "--out",
            str(tmp_path),
            "--steps",
            "2",
            "--warmup",
            "1",
            "--image-size",
            "64",
            "--batch-size",
            "4",
            "--variants",
            "fp32",
            "--pipeline-batches",
            "2",
            "--pipeline-scale",
            "0.005",
            "--work-dir",
            str(Path(data.root).parent / "gpu-smoke"),
            "--budget-s",
            "600",
        ],
        cwd=REPO_ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads((tmp_path / "gpu.json").read_text())
    assert result["device"]["gpus"] == 0  # no GPU here: it said so and ran on the CPU
    fp32 = result["variants"]["fp32"]
    assert fp32["status"] == "ok"
    assert _number(fp32["images_per_s"]) and fp32["images_per_s"] > 0
    assert fp32["mfu"] is None  # no known peak without a GPU: no made-up MFU
    # ResNet50 forward at 64x64: ~8.2 GFLOPs at 224 scaled by (64/224)^2 = ~0.67 GFLOPs
    assert 0.4e9 < result["flops"]["forward_per_image"] < 1.0e9
    for key in ("codelab_images_per_s", "kit_cache_off_images_per_s", "kit_cache_on_images_per_s"):
        assert _number(result["pipeline"][key]), key
