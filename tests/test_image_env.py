"""Every job runs in its image's own environment (`labkit.local.emulator.image_env`): the
Dockerfile's base mapped to Python packages, its RUN pip installs executed, nothing of the kit.

Fast tests read Dockerfiles; the ones with the local service run real jobs through the SDK
(the kit's image among them: its TensorFlow base layer is built once per machine, then cached).
"""

from __future__ import annotations

import html
import json
import os
import re
import sys
import threading
import urllib.request
from pathlib import Path

import pytest
from google.cloud import aiplatform

from labkit.cloud.paths import REPO_ROOT
from labkit.course.pins import image_requirements, pinned_versions
from labkit.local.emulator import image_env, pip_steps
from labkit.local.emulator.dockerfile import ImageError, read_dockerfile
from labkit.local.vertex import job_logs, job_output_dir, register_image

TF = pinned_versions()["tensorflow"]
PY = image_env.PYTHON_VERSION
MACHINE = {"machine_type": "n1-standard-4"}


def context(folder: Path, dockerfile: str, files: dict[str, str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Dockerfile").write_text(dockerfile)
    for name, text in (files or {}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize(
    ("image", "packages"),
    [
        (f"tensorflow/tensorflow:{TF}", (f"tensorflow=={TF}",)),
        (f"tensorflow/tensorflow:{TF}-gpu", (f"tensorflow=={TF}",)),
        (f"docker.io/tensorflow/tensorflow:{TF}-gpu", (f"tensorflow=={TF}",)),
        ("us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-17.py310:latest", ("tensorflow==2.17.*",)),
        ("gcr.io/deeplearning-platform-release/tf2-gpu.2-7", ("tensorflow==2.7.*",)),
        (
            "us-docker.pkg.dev/deeplearning-platform-release/gcr.io/tf2-cpu.2-17.py310",
            ("tensorflow==2.17.*",),
        ),
        (f"python:{PY}-slim", ()),
        (f"python:{PY}", ()),
        ("scratch", ()),
    ],
)
def test_bases_map_to_the_packages_that_stand_for_them(image, packages):
    base = image_env.base_image(image)
    assert base.packages == packages
    assert base.has_python == (image != "scratch")


@pytest.mark.parametrize(
    "image",
    ["ubuntu:22.04", "tensorflow/tensorflow:2.15.0", "python:3.8-slim", "nvidia/cuda:12.4-base"],
)
def test_any_other_base_is_refused_naming_it_and_the_bases_the_kit_runs(image):
    with pytest.raises(ImageError) as caught:
        image_env.base_image(image)
    message = str(caught.value)
    assert f"the base image {image} has no stand-in" in message
    assert f"tensorflow/tensorflow:{TF}" in message and f"python:{PY}" in message
    assert "Change the Dockerfile's FROM line" in message


def test_the_kits_dockerfile_installs_trainer_requirements_from_the_build_context():
    steps = pip_steps.read_run_steps(read_dockerfile("kit", REPO_ROOT))
    (install,) = steps.installs
    assert install.args == ("-r", str(REPO_ROOT / "trainer" / "requirements.txt"))
    assert install.key[1].startswith("sha256:"), "the layer is keyed by the file's content"
    assert steps.not_executed == ()
    assert any(note.startswith("--no-cache-dir") for note in steps.dropped)


def test_run_lines_split_into_pip_installs_and_commands_not_executed(tmp_path):
    folder = context(
        tmp_path / "ctx",
        f"FROM python:{PY}-slim\nWORKDIR /srv\nCOPY reqs.txt ./\n"
        "RUN apt-get update && apt-get install -y git && pip3 install --user -q -r reqs.txt\n"
        'RUN ["python3", "-m", "pip", "install", "--no-cache-dir", "wcwidth==0.9.4"]\n'
        "RUN pip install six | tee /tmp/log\n"
        'ENTRYPOINT ["python"]\n',
        {"reqs.txt": "wcwidth==0.9.4\n"},
    )
    steps = pip_steps.read_run_steps(read_dockerfile("img", folder))
    assert [i.args for i in steps.installs] == [
        ("-q", "-r", str((folder / "reqs.txt").resolve())),
        ("wcwidth==0.9.4",),
    ]
    assert steps.not_executed == (
        "apt-get update",
        "apt-get install -y git",
        "pip install six '|' tee /tmp/log",
    )


@pytest.mark.parametrize(
    ("run", "message"),
    [
        ("pip install -r /app/requirements.txt", "which no COPY before it puts there"),
        ("pip install --target /opt/x six", "--target installs outside the image's Python"),
        ("pip install -e .", "-e installs outside the image's Python"),
    ],
)
def test_run_lines_the_service_cannot_run_are_refused_before_the_job(tmp_path, run, message):
    folder = context(tmp_path / "ctx", f'FROM python:{PY}\nRUN {run}\nENTRYPOINT ["python"]\n')
    with pytest.raises(ImageError, match=re.escape(message)):
        pip_steps.read_run_steps(read_dockerfile("img", folder))


def test_a_missing_module_names_the_package_and_the_line_to_add(tmp_path):
    tail = [
        "Traceback (most recent call last):",
        "ModuleNotFoundError: No module named 'tensorflow_datasets'",
    ]
    kit = read_dockerfile("kit", REPO_ROOT)
    fix = pip_steps.missing_module_fix(tail, kit)
    version = image_requirements()["tensorflow-datasets"]
    assert "no module 'tensorflow_datasets'" in fix
    assert (
        f"`tensorflow-datasets=={version}` to {REPO_ROOT / 'trainer' / 'requirements.txt'}" in fix
    )
    inline = context(tmp_path / "ctx", f'FROM tensorflow/tensorflow:{TF}\nENTRYPOINT ["python"]\n')
    fix = pip_steps.missing_module_fix(tail, read_dockerfile("img", inline))
    assert f"`RUN python -m pip install --no-cache-dir tensorflow-datasets=={version}`" in fix
    assert pip_steps.missing_module_fix(["ValueError: x"], kit) is None


def test_environments_are_built_once_reused_and_rebuilt_when_a_file_changes(tmp_path, monkeypatch):
    """A real build (an empty virtualenv + pip) in a cache of this test's own."""
    monkeypatch.setenv(image_env.CACHE_VARIABLE, str(tmp_path / "cache"))
    folder = context(
        tmp_path / "ctx",
        f"FROM python:{PY}-slim\nCOPY reqs.txt /reqs.txt\nRUN pip install -r /reqs.txt\n"
        'ENTRYPOINT ["python"]\n',
        {"reqs.txt": "wcwidth==0.9.4\n"},
    )
    lines: list[str] = []
    first = image_env.ensure_environment(read_dockerfile("img", folder), lines.append)
    assert any(line.startswith("image environment: built") for line in lines)
    import subprocess

    probe = "import wcwidth, importlib.util as u; print(wcwidth.__file__, u.find_spec('labkit'))"
    done = subprocess.run(
        [str(first.python), "-c", probe], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(str(first.prefix)) and done.stdout.strip().endswith("None")

    lines.clear()
    again = image_env.ensure_environment(read_dockerfile("img", folder), lines.append)
    assert again.prefix == first.prefix and any("reusing" in line for line in lines)
    (folder / "reqs.txt").write_text("wcwidth==0.9.4\nsix==1.16.0\n")
    changed = image_env.ensure_environment(read_dockerfile("img", folder))
    assert changed.prefix != first.prefix


def test_a_cancelled_build_stops_pip_and_leaves_no_half_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(image_env.CACHE_VARIABLE, str(tmp_path / "cache"))
    folder = context(
        tmp_path / "ctx",
        f'FROM python:{PY}\nRUN pip install wcwidth==0.9.4\nENTRYPOINT ["python"]\n',
    )
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(image_env.BuildCancelled):
        image_env.ensure_environment(read_dockerfile("img", folder), cancel=cancel)
    assert not [p for p in (tmp_path / "cache").iterdir() if p.is_dir()]


def test_the_codelabs_base_fails_before_the_job_when_its_tensorflow_has_no_wheel_here(
    tmp_path, monkeypatch
):
    """The codelab's `tf2-gpu.2-7` stands for TensorFlow 2.7, which pip has no build of for
    this Python: the job fails at set-up, with pip's verdict and the bases that run."""
    monkeypatch.setenv(image_env.CACHE_VARIABLE, str(tmp_path / "cache"))
    folder = context(
        tmp_path / "ctx",
        'FROM gcr.io/deeplearning-platform-release/tf2-gpu.2-7\nENTRYPOINT ["python"]\n',
    )
    with pytest.raises(ImageError) as caught:
        image_env.ensure_environment(read_dockerfile("img", folder))
    message = str(caught.value)
    assert "stands for tensorflow==2.7.* on this machine's Python" in message
    assert "No matching distribution found for tensorflow==2.7.*" in message
    assert f"tensorflow/tensorflow:{TF}" in message
    assert not [p for p in (tmp_path / "cache").iterdir() if p.is_dir()]


# ---- real jobs through the SDK and the local service ----

ISOLATION_APP = """\
import importlib.util, json, os, sys

def found(name):
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False

import wcwidth
print("probe=" + json.dumps({
    "kit_modules": {n: found(n) for n in ("labkit", "starlette", "google.cloud.aiplatform", "pytest")},
    "prefix": sys.prefix, "path": sys.path, "PATH": os.environ["PATH"],
    "wcwidth": wcwidth.__file__,
}))
"""


def submit(image: str, *, args=None, command=None, base_output_dir=None, replicas: int = 1):
    spec = {"image_uri": image, "args": list(args or [])}
    if command:
        spec["command"] = command
    job = aiplatform.CustomJob(
        display_name="image-env-test",
        worker_pool_specs=[
            {"replica_count": replicas, "machine_spec": dict(MACHINE), "container_spec": spec}
        ],
        base_output_dir=base_output_dir,
        labels={"lab": "cassava", "lab-run": "image-env-test"},
    )
    return job


@pytest.mark.slow
def test_replicas_see_only_the_image_environment_and_its_copied_files(local_vertex, tmp_path):
    folder = context(
        tmp_path / "isolated",
        f"FROM python:{PY}-slim\nWORKDIR /app\nCOPY requirements.txt /app/\n"
        "RUN apt-get update && python -m pip install --no-cache-dir -r requirements.txt\n"
        'COPY app.py /app/app.py\nENTRYPOINT ["python", "app.py"]\n',
        {"requirements.txt": "wcwidth==0.9.4\n", "app.py": ISOLATION_APP},
    )
    uri = "us-central1-docker.pkg.dev/local-project/test/isolated:1"
    register_image(uri, folder, local_vertex.settings)
    job = submit(uri)
    job.run()
    logs = job_logs(job)
    probe = json.loads(re.search(r"probe=(.*)$", logs["chief-0"], re.M).group(1))
    assert probe["kit_modules"] == dict.fromkeys(probe["kit_modules"], False)
    kit_venv, prefix = Path(sys.prefix), Path(probe["prefix"])
    assert not prefix.is_relative_to(kit_venv) and prefix.is_relative_to(image_env.cache_root())
    # folders, not string prefixes: a cache in /tmp/x-envs is not inside a checkout in /tmp/x
    kit_folders = (kit_venv, REPO_ROOT)
    assert not [p for p in probe["path"] if any(Path(p).is_relative_to(k) for k in kit_folders)]
    assert not [p for p in probe["PATH"].split(os.pathsep) if Path(p).is_relative_to(kit_venv)]
    assert Path(probe["wcwidth"]).is_relative_to(prefix)
    assert (
        "RUN not executed (Python packages only, no system packages): apt-get update" in logs["job"]
    )


def console_error(local_vertex, job) -> str:
    """The error box of the job's page in the local console, as the browser gets it."""
    job_id = job.resource_name.rsplit("/", 1)[-1]
    request = urllib.request.Request(
        f"http://127.0.0.1:{local_vertex.port}/console/training/customJobs/{job_id}",
        headers=local_vertex.auth(),
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        page = answer.read().decode()
    return html.unescape(re.search(r'<pre[^>]*id="job-error">(.*?)</pre>', page, re.S).group(1))


@pytest.mark.slow
def test_a_job_whose_image_lacks_tfds_fails_naming_the_module_and_the_line(local_vertex, tmp_path):
    wanted = image_requirements()
    installs = " ".join(f'"{n}=={v}"' for n, v in wanted.items() if n != "tensorflow-datasets")
    folder = context(
        tmp_path / "no-tfds",
        f"FROM tensorflow/tensorflow:{TF}-gpu\nENV TF_USE_LEGACY_KERAS=1\n"
        f"RUN python -m pip install --no-cache-dir {installs}\nWORKDIR /app\n"
        'COPY trainer /app/trainer\nENTRYPOINT ["python", "-m", "trainer.task"]\n',
    )
    (folder / "trainer").symlink_to(REPO_ROOT / "trainer", target_is_directory=True)
    uri = "us-central1-docker.pkg.dev/local-project/test/no-tfds:1"
    register_image(uri, folder, local_vertex.settings)
    job = submit(uri, args=["--data", "tfds:cassava", "--model-dir", str(tmp_path / "m")])
    with pytest.raises(RuntimeError) as caught:
        job.run()
    fix = (
        "The image has no module 'tensorflow_datasets'"
        f"|add `RUN python -m pip install --no-cache-dir tensorflow-datasets=={wanted['tensorflow-datasets']}` "
        f"to {folder.resolve() / 'Dockerfile'}"
    )
    assert "No module named" in str(caught.value)  # the SDK's exception, protobuf text
    for part in fix.split("|"):
        assert part in job.error.message  # the same error, as the SDK reads the job
        assert part in console_error(local_vertex, job)


@pytest.mark.slow
def test_the_kits_image_reaches_cassavas_metadata_and_trains_in_its_own_environment(
    local_vertex, sample_for_jobs, tmp_path
):
    """Issue 27's done-when: the image's environment alone (the base's TensorFlow, the
    Dockerfile's own installs, trainer/ only) finds cassava's download, trains and saves."""
    from trainer_runs import small_args

    probe = (
        "import sys, tensorflow_datasets as tfds; "
        f"infos = tfds.builder('cassava', data_dir='{tmp_path / 'empty'}').url_infos; "
        "url, info = next(iter(infos.items())); print('cassava', url, info.size, sys.prefix)"
    )
    script = f'python -c "{probe}" && exec python -m trainer.task "$@"'
    args = small_args(
        sample_for_jobs.tfds_data_dir,
        tmp_path,
        **{"--model-dir": None, "--checkpoint-dir": None, "--tensorboard-dir": None},
        **{"--epochs": 1, "--steps-per-epoch": 2, "--validation-steps": 1},
    )
    job = submit(
        local_vertex.settings.image_uri,
        command=["/bin/sh", "-c", script, "sh"],
        args=args,
        base_output_dir="gs://emu-test-bucket/image-env-run",
    )
    job.run()
    line = re.search(r"^.*cassava (\S+) (.+) (\S+)$", job_logs(job)["chief-0"], re.M)
    assert line.group(1).endswith("cassavaleafdata.zip") and line.group(2) == "1.26 GiB"
    assert line.group(3).startswith(str(image_env.cache_root()))
    import tensorflow as tf

    model = tf.saved_model.load(str(job_output_dir(job) / "model" / "savedmodel"))
    scores = model.signatures["serving_default"](images=tf.zeros([1, 40, 50, 3], tf.uint8))
    probabilities = scores["probabilities"].numpy()
    assert probabilities.shape == (1, 5) and abs(float(probabilities.sum()) - 1.0) < 1e-3
