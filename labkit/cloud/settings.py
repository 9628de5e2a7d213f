"""The lab's settings: mode, project, region, bucket, image, run id.

Notebook 00 resolves them once and saves them to ``LAB_HOME/settings.json``; the later
notebooks load that file, and papermill parameters (non-None values) override it.
``MODE = "auto"`` picks `cloud` only when a real project id and Google credentials are
present without asking the network, otherwise `local`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from labkit import KIT_LABEL_KEY, KIT_LABEL_VALUE, RUN_LABEL_KEY
from labkit.cloud import paths
from labkit.cloud.tflogs import import_tensorflow_quietly
from trainer.config import codelab_knobs, find_placeholder

MODES = ("local", "cloud")
LOCAL_PROJECT = "local-project"
DEFAULT_REGION = "us-central1"
_PROJECT_ID_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")


# Size knobs per mode: the codelab's values in the cloud, small ones on a laptop or CI.
MODE_DEFAULTS: dict[str, dict[str, Any]] = {
    # The codelab's own values, from the trainer's one list of options (TrainConfig).
    "cloud": {
        **codelab_knobs(),
        "workers": 2,
        "machine_type": "n1-standard-4",
        "accelerator_type": None,
        "accelerator_count": 0,
    },
    "local": {
        "image_size": 32,
        "batch_size": 16,
        "epochs": 2,  # 02 and 03 train the same 2 epochs of 32 steps: a like-for-like comparison
        "steps_per_epoch": None,
        "weights": "none",
        "learning_rate": 1e-3,  # from scratch, so a one-minute run gets somewhere
        "bn_momentum": 0.9,  # see trainer.model.set_batchnorm_momentum
        "workers": 2,
        "machine_type": "n1-standard-4",
        "accelerator_type": None,
        "accelerator_count": 0,
        "data": "tfds:cassava",
        "data_dir": None,  # filled with the sample's TFDS dir
    },
}

# Knobs that differ by what a notebook runs, over MODE_DEFAULTS.
#
# In the cloud, 02 and 03 (and 01's preview) run on the Workbench VM itself, and only 04's
# Vertex AI jobs ("job") train at the codelab's size. The codelab's size on the VM would be
# 2 epochs of 89 steps of 64 images at 300x300 (5,656 training images): about 11 times the
# compute of a step of 32 at 128x128, which took 2.3 s on this kit's 2-core machine (the
# difference between a 12-step and a 40-step run, measured 2026-12-06), so over an hour of
# CPU on the default n1-standard-4 (4 vCPUs, 2 physical cores), twice over in 03. The
# Workbench size trains a slice of the training split, 2 epochs of 20 steps of 32 at
# 128x128, validated on 10 steps: 02's run with 2 validation steps took 103 s here
# (bench/measurements.json, workbench_size.single_run; weights "none" cost the same
# compute as ImageNet's). 03's two replicas take 16 each, so the
# cluster keeps the baseline's global batch and steps. Parameters still win: IMAGE_SIZE=300,
# BATCH_SIZE=64 and STEPS_PER_EPOCH=89 (one pass) give the codelab's size on the VM.
#
# Locally (2 cores, ResNet50 from random weights):
# - "cluster" (03, `make train`): 8 per replica, so the default 2 workers keep the
#   baseline's global batch of 16 and its 32 steps per epoch. With 16 per replica (global
#   32, 16 steps per epoch) three epochs ended at 0.14, 0.38 and 0.44 validation accuracy
#   in three measured runs; with 8, two epochs reached 0.54-0.88 in eight. The baseline
#   (02) reached 0.78 after the same 2 epochs (0.91 after a third, which cost 35 s more).
# - "job" (04): 8 steps of 16 per replica (half the training split). 03 has already trained
#   on these cores; the job is there to show its states, logs and output, and the whole lab
#   must fit 10 minutes. A full epoch (16 steps) took the job cell 110-130 s and still ended
#   near chance (0.25 validation accuracy), so the steps bought time, not a better model.
PROFILES = ("single", "cluster", "job")
WORKBENCH_SIZE: dict[str, Any] = {
    "image_size": 128,
    "batch_size": 32,
    "steps_per_epoch": 20,
    "validation_steps": 10,
}
PROFILE_DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    "cloud": {
        "single": WORKBENCH_SIZE,
        "cluster": {**WORKBENCH_SIZE, "batch_size": WORKBENCH_SIZE["batch_size"] // 2},
    },
    "local": {
        "cluster": {"batch_size": 8},
        "job": {"epochs": 1, "steps_per_epoch": 8},
    },
}


@dataclasses.dataclass
class Settings:
    """Everything that differs between a laptop run and a run against a real project."""

    mode: str
    project_id: str
    region: str = DEFAULT_REGION
    bucket: str = ""
    artifact_repo: str = "cassava-lab"
    image_name: str = "multiworker"
    image_tag: str = "cassava"
    run_id: str = ""
    emulator_port: int = 8765

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"MODE must be one of {MODES} or 'auto', got {self.mode!r}")
        if not self.bucket:
            self.bucket = f"{self.project_id}-cassava-lab"
        self.bucket = self.bucket.removeprefix("gs://").rstrip("/")
        if not self.run_id:
            self.run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]

    @property
    def bucket_uri(self) -> str:
        return f"gs://{self.bucket}"

    @property
    def image_uri(self) -> str:
        """The trainer image in Artifact Registry (Container Registry takes no pushes since 2025-03-18)."""
        return (
            f"{self.region}-docker.pkg.dev/{self.project_id}/{self.artifact_repo}/"
            f"{self.image_name}:{self.image_tag}"
        )

    @property
    def api_endpoint(self) -> str | None:
        """The local Vertex AI service in local mode; None means Google's own endpoint."""
        return f"http://127.0.0.1:{self.emulator_port}" if self.mode == "local" else None

    @property
    def labels(self) -> dict[str, str]:
        """The labels every resource the kit creates carries; cleanup deletes by them."""
        return {KIT_LABEL_KEY: KIT_LABEL_VALUE, RUN_LABEL_KEY: self.run_id}

    def knobs(self, *, profile: str = "single", **overrides: Any) -> dict[str, Any]:
        """The mode's size knobs for ``profile`` (`PROFILES`), then the non-None overrides."""
        if profile not in PROFILES:
            raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
        values = dict(MODE_DEFAULTS[self.mode])
        values.update(PROFILE_DEFAULTS[self.mode].get(profile, {}))
        if self.mode == "local" and values.get("data_dir") is None:
            values["data_dir"] = str(paths.sample_tfds_dir())
        values.update({k: v for k, v in overrides.items() if v is not None})
        return values

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def save(self, path: Path | None = None) -> Path:
        path = Path(path or paths.settings_file())
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        return path

    def check_cloud_ready(self) -> None:
        """Raise early, naming the field and the fix, before anything is sent to Google Cloud."""
        if self.mode != "cloud":
            return
        for field, value in (("PROJECT_ID", self.project_id), ("BUCKET", self.bucket)):
            ph = find_placeholder(value or "")
            if ph or not value:
                raise ValueError(
                    f"{field} is {value!r}, a placeholder: set it to your real value in the "
                    "parameters cell (find the project with `gcloud config list --format "
                    "'value(core.project)'`)."
                )
        if not _PROJECT_ID_RE.match(self.project_id):
            raise ValueError(
                f"PROJECT_ID {self.project_id!r} is not a Google Cloud project id (6-30 "
                "lowercase letters, digits or hyphens, starting with a letter)."
            )


def has_google_credentials() -> bool:
    """Whether Application Default Credentials exist, without touching the network."""
    explicit = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if explicit:
        return Path(explicit).is_file()
    gcloud_dir = Path(os.environ.get("CLOUDSDK_CONFIG", Path.home() / ".config" / "gcloud"))
    return (gcloud_dir / "application_default_credentials.json").is_file() or on_workbench()


def on_workbench() -> bool:
    """Vertex AI Workbench instances are Deep Learning VM images with this metadata folder."""
    return Path("/opt/deeplearning/metadata").is_dir() or "DL_ANACONDA_HOME" in os.environ


def detect_project() -> str | None:
    """A project id from the environment or gcloud's config file (no network)."""
    for var in ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT", "GCLOUD_PROJECT"):
        if os.environ.get(var):
            return os.environ[var]
    gcloud_dir = Path(os.environ.get("CLOUDSDK_CONFIG", Path.home() / ".config" / "gcloud"))
    active = gcloud_dir / "active_config"
    name = active.read_text().strip() if active.is_file() else "default"
    cfg = gcloud_dir / "configurations" / f"config_{name}"
    if cfg.is_file():
        m = re.search(r"^\s*project\s*=\s*(\S+)", cfg.read_text(), re.M)
        if m:
            return m.group(1)
    return None


def choose_mode(mode: str, project_id: str | None) -> str:
    """`auto` -> cloud only with a real project id and credentials, else local; CI is local."""
    if mode in MODES:
        return mode
    if mode != "auto":
        raise ValueError(f"MODE must be 'auto', 'local' or 'cloud', got {mode!r}")
    if os.environ.get("CI"):
        return "local"
    project = project_id or detect_project()
    if project and not find_placeholder(project) and has_google_credentials():
        return "cloud"
    return "local"


def load_settings(
    mode: str | None = "auto",
    project_id: str | None = None,
    region: str | None = None,
    bucket: str | None = None,
    *,
    path: Path | None = None,
    save: bool = False,
    **extra: Any,
) -> Settings:
    """Settings saved by notebook 00 (if any), overridden by the non-None arguments.

    With no saved file, `mode="auto"` chooses the mode (see `choose_mode`). In local mode
    the Google libraries are told not to probe a metadata server. In a notebook kernel the
    first load also quiets TensorFlow's start-up logs (`quiet_tensorflow_logs`), so no
    notebook needs a cell for it.
    """
    quiet_tensorflow_logs()
    path = Path(path or paths.settings_file())
    saved: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    values = dict(saved)
    for key, value in {
        "project_id": project_id,
        "region": region,
        "bucket": bucket,
        **extra,
    }.items():
        if value is not None:
            values[key] = value
    if mode not in (None, "auto") or "mode" not in values:
        values["mode"] = choose_mode(mode or "auto", values.get("project_id"))
    if values["mode"] == "cloud":
        values.setdefault("project_id", detect_project() or "")
    else:
        values.setdefault("project_id", LOCAL_PROJECT)
        os.environ.setdefault("NO_GCE_CHECK", "True")
    if (
        project_id is not None
        and saved.get("project_id") not in (None, project_id)
        and bucket is None
    ):
        values.pop("bucket", None)  # a new project gets its own default bucket name
    settings = Settings(**{k: v for k, v in values.items() if k in Settings.__dataclass_fields__})
    if save:
        settings.save(path)
    return settings


def quiet_tensorflow_logs() -> None:
    """In a Jupyter kernel, hide TensorFlow's C++ start-up chatter (CUDA probing, CPU flags).

    ``TF_CPP_MIN_LOG_LEVEL=2`` is set for this process and what it starts (replicas, the
    local Vertex AI service), and TensorFlow is imported now with the lines no level hides
    sent to the kernel's log file (`labkit.cloud.tflogs`). Notebooks load their settings before
    they import TensorFlow, which makes this the one place. Outside a kernel (the CLI, the
    service, tests) nothing is imported: they must not pay for TensorFlow.
    """
    if "ipykernel" not in sys.modules:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import_tensorflow_quietly()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit settings", description=__doc__)
    parser.add_argument("--mode", default="auto", choices=("auto", *MODES))
    parser.add_argument("--project-id")
    parser.add_argument("--region")
    parser.add_argument("--bucket")
    parser.add_argument("--save", action="store_true", help="write them to LAB_HOME/settings.json")
    args = parser.parse_args(argv)
    s = load_settings(args.mode, args.project_id, args.region, args.bucket, save=args.save)
    print(
        json.dumps(
            {**s.to_dict(), "image_uri": s.image_uri, "lab_home": str(paths.lab_home())}, indent=2
        )
    )
    return 0
