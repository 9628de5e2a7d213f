"""Bad input to the trainer (issue 21 item 5): one clear message in seconds, naming the problem
and the fix, no traceback, and nothing created on disk.

The corrupt record is a real one: a tiny TFDS `cassava` prepared through the real builder by
`labkit.course.sample`, with one JPEG replaced by bytes that do not decode.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainer import data
from trainer.config import ConfigError

ROOT = Path(__file__).resolve().parents[2]
BROKEN = "train-cmd-0.jpg"


@pytest.fixture(scope="module")
def corrupt_tfds(tmp_path_factory) -> Path:
    """A TFDS data dir with 2 images per class and split, one of them not a JPEG."""
    from labkit.course import sample

    root = tmp_path_factory.mktemp("corrupt")
    counts = {split: {cls: 2 for cls in sample.CLASSES} for split in sample.SPLITS}
    images = sample.generate_images(root / "raw", counts=counts)
    (images / "train" / "cmd" / BROKEN).write_bytes(b"\xff\xd8\xff\xe0" + b"not a jpeg" * 20)
    return sample.prepare_tfds(root / "raw", root / "tfds")


def test_a_corrupt_record_fails_naming_it_and_the_flag(corrupt_tfds):
    with pytest.raises(ConfigError) as err:
        data.load_split("tfds:cassava", "train", data_dir=str(corrupt_tfds), bad_images="fail")
    assert BROKEN in str(err.value) and "--bad-images skip" in str(err.value)


def test_skip_leaves_the_corrupt_record_out_and_counts_it(corrupt_tfds):
    split = data.load_split("tfds:cassava", "train", data_dir=str(corrupt_tfds), bad_images="skip")
    assert split.skipped == [BROKEN] and split.num_examples == 9
    assert sum(1 for _ in split.encoded) == 9
    good = data.load_split(
        "tfds:cassava", "validation", data_dir=str(corrupt_tfds), bad_images="skip"
    )
    assert good.skipped == [] and good.num_examples == 10


def test_an_unprepared_data_dir_fails_in_seconds_and_is_not_created(tmp_path, monkeypatch):
    # An address that refuses at once stands for an offline machine (the real download
    # host answers on machines with internet, and TFDS would then download 1.26 GiB).
    monkeypatch.setattr(data, "cassava_download_url", lambda: "https://127.0.0.1:9/cassava.zip")
    where = tmp_path / "no-such-tfds-dir"
    started = time.monotonic()
    with pytest.raises(ConfigError, match="not prepared in .*no-such-tfds-dir.*labkit sample"):
        data.load_split("tfds:cassava", "train", data_dir=str(where))
    assert time.monotonic() - started < 20
    assert not where.exists()


def test_the_global_batch_must_fit_the_split():
    from trainer.train import check_batch_fits

    check_batch_fits(16, 8, 500)
    with pytest.raises(ConfigError, match=r"8 per replica x 2 replica\(s\) = 16.*--batch-size 4"):
        check_batch_fits(16, 8, 9)


def _trainer(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIP_", "TF_CONFIG"))}
    return subprocess.run(
        [sys.executable, "-m", "trainer.task", *args],
        cwd=cwd,
        env=env | {"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"},
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize(
    "extra, message",
    [
        ([], f"do not decode: {BROKEN}"),
        (["--bad-images", "skip"], "larger than the training split (9 images)"),
    ],
)
def test_the_trainer_stops_before_training_with_one_line(corrupt_tfds, tmp_path, extra, message):
    out = tmp_path / "job"
    args = ["--data-dir", str(corrupt_tfds), "--image-size", "32", "--weights", "none"]
    args += ["--batch-size", "16", "--model-dir", str(out / "model")]
    args += ["--checkpoint-dir", str(out / "checkpoints"), "--tensorboard-dir", str(out / "logs")]
    started = time.monotonic()
    proc = _trainer(args + extra, tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert "Epoch 1/" not in proc.stdout
    assert not out.exists(), list(out.rglob("*"))
    assert time.monotonic() - started < 60  # mostly TensorFlow's import


def test_workers_checking_one_missing_folder_at_once_all_pass_and_create_nothing(tmp_path):
    """Every worker checks the shared checkpoint folder as it starts. When the check made the
    missing folder and removed it again, one worker's removal failed another's probe (the
    2-worker bench run hit it); now the check creates nothing but its own probe file."""
    from concurrent.futures import ThreadPoolExecutor

    from trainer.train import check_writable

    shared = tmp_path / "run" / "checkpoints"

    def check(_: int) -> None:
        check_writable(str(shared), "checkpoint directory", "--checkpoint-dir")

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(check, range(400)))  # raises the first ConfigError, if any
    assert list(tmp_path.iterdir()) == []  # no folder made, no probe left


def test_a_folder_below_a_file_or_an_unwritable_one_fails_naming_the_flag(tmp_path):
    from trainer.train import check_writable

    (tmp_path / "a-file").write_text("x")
    for bad in (tmp_path / "a-file" / "model", Path("/proc/cannot-write-here/model")):
        with pytest.raises(ConfigError, match="cannot be written.*pass --model-dir"):
            check_writable(str(bad), "model directory", "--model-dir")
    check_writable(str(tmp_path), "model directory", "--model-dir")  # an existing folder passes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
