"""Read a container image from its registered build context, without Docker.

No Docker engine runs on the kit's machines, so an image URI stands for a build context: a
folder with a Dockerfile. The final stage's base (FROM), WORKDIR, ENV, ENTRYPOINT, CMD and RUN
steps are read with a real Dockerfile parser (`dockerfile-parse`); the files its COPY/ADD steps
put into the image are linked into a per-job folder standing for the container's file system
("rootfs"), where the entrypoint runs.

What the image's Python holds is `labkit.local.emulator.image_env`'s work: the base mapped to a
Python environment the kit can build here, plus the final stage's ``RUN pip install`` lines,
executed into a cached virtualenv. That environment is Python packages only: no system
packages (a RUN of apt-get is listed in the job's log as not executed) and no CUDA.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import shlex
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from labkit.cloud.paths import write_json_atomic

# dockerfile_parse is imported where a job's image is resolved, not when the service starts
# (bench/service.py measures start-to-first-response).

# Variables whose container values make no sense on the host: the host's own are kept.
HOST_ONLY_ENV = frozenset({"PATH", "LD_LIBRARY_PATH", "HOME", "PYTHONHOME", "HOSTNAME"})


class ImageError(Exception):
    """An image that cannot be run locally; the message says how to fix it."""


@dataclasses.dataclass(frozen=True)
class RunStep:
    """One RUN instruction of the final stage, with what the image held when it ran: its
    WORKDIR and the COPY steps before it (a ``pip install -r FILE`` reads FILE from them)."""

    command: str
    workdir: str
    copies: tuple[tuple[tuple[str, ...], str], ...]


@dataclasses.dataclass
class _Stage:
    name: str | None
    workdir: str = "/"
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    copies: list[tuple[list[str], str]] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    base: str = "scratch"
    runs: list[RunStep] = dataclasses.field(default_factory=list)

    def inherit(self, name: str | None) -> _Stage:
        return dataclasses.replace(
            self,
            name=name,
            env=dict(self.env),
            copies=list(self.copies),
            notes=list(self.notes),
            runs=list(self.runs),
        )


@dataclasses.dataclass(frozen=True)
class ImagePlan:
    """What the image would run: read from its Dockerfile's final stage."""

    image_uri: str
    context: Path
    workdir: str
    env: dict[str, str]
    entrypoint: list[str] | None
    cmd: list[str] | None
    copies: list[tuple[list[str], str]]  # (sources relative to the context, container dest)
    notes: list[str]
    base: str = "scratch"  # the final stage's root base image (FROM), stages followed
    runs: tuple[RunStep, ...] = ()
    dockerfile: str = "Dockerfile"


def exec_form(value: str) -> list[str] | None:
    """An instruction's exec form (a JSON array of strings), or None for the shell form."""
    text = value.strip()
    if not text.startswith("["):
        return None
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return None
    if isinstance(parsed, list) and all(isinstance(p, str) for p in parsed):
        return parsed
    return None


def _exec_or_shell(value: str) -> list[str]:
    """Exec form (JSON array) as is; shell form runs under /bin/sh -c, as Docker does."""
    return exec_form(value) or ["/bin/sh", "-c", value.strip()]


def _join_container_path(base: str, path: str) -> str:
    return os.path.normpath(path if path.startswith("/") else f"{base.rstrip('/')}/{path}")


def _substitute(text: str, env: dict[str, str]) -> str:
    for key, value in env.items():
        text = text.replace(f"${{{key}}}", value).replace(f"${key}", value)
    return text


def _copy_sources_and_dest(value: str) -> tuple[list[str], str, str | None]:
    """``COPY [--flags] src... dest`` (or its JSON form) -> (sources, dest, --from stage)."""
    text = value.strip()
    from_stage = None
    while text.startswith("--"):
        flag, _, text = text.partition(" ")
        text = text.lstrip()
        if flag.startswith("--from="):
            from_stage = flag.split("=", 1)[1]
    parts = json.loads(text) if text.startswith("[") else shlex.split(text)
    if len(parts) < 2:
        raise ImageError(f"COPY/ADD needs a source and a destination: {value!r}")
    return list(parts[:-1]), parts[-1], from_stage


def _apply(stage: _Stage, kind: str, value: str, ctx: Any) -> None:
    """One instruction after FROM, applied to ``stage`` (``ctx``: dockerfile-parse's context
    of the line: its ENV and ARG values)."""
    if kind == "WORKDIR":
        stage.workdir = _join_container_path(stage.workdir, _substitute(value, stage.env))
    elif kind == "ENV":
        stage.env.update(ctx.line_envs)
    elif kind == "ENTRYPOINT":
        stage.entrypoint = _exec_or_shell(value)
    elif kind == "CMD":
        stage.cmd = _exec_or_shell(value)
    elif kind in ("COPY", "ADD"):
        sources, dest, from_stage = _copy_sources_and_dest(value)
        if from_stage is not None:
            stage.notes.append(f"{kind} --from={from_stage} skipped (build stage output)")
            return
        if kind == "ADD" and any("://" in s for s in sources):
            stage.notes.append(f"ADD of a URL skipped: {value}")
            return
        dest_path = _join_container_path(stage.workdir, _substitute(dest, stage.env))
        if dest.endswith("/") or len(sources) > 1:
            dest_path += "/"
        stage.copies.append((sources, dest_path))
    elif kind == "RUN":
        stage.runs.append(
            RunStep(
                command=_substitute(value, stage.env),
                workdir=stage.workdir,
                copies=tuple((tuple(srcs), dest) for srcs, dest in stage.copies),
            )
        )


def read_dockerfile(image_uri: str, context: Path, dockerfile: str = "Dockerfile") -> ImagePlan:
    """Parse ``context/dockerfile`` into the final stage's run settings."""
    context = Path(context).resolve()
    path = context / dockerfile
    if not path.is_file():
        raise ImageError(
            f"image {image_uri} is registered to the build context {context}, which has no "
            f"{dockerfile}; register the folder that holds the image's Dockerfile."
        )
    from dockerfile_parse import DockerfileParser

    parser = DockerfileParser(path=str(path))
    stages: dict[str, _Stage] = {}
    stage: _Stage | None = None
    global_args: dict[str, str] = {}
    for instruction, ctx in zip(parser.structure, parser.context_structure, strict=True):
        kind, value = instruction["instruction"], instruction["value"]
        if kind == "FROM":
            parts = value.split()
            base = _substitute(parts[0], global_args)
            name = parts[2].lower() if len(parts) >= 3 and parts[1].lower() == "as" else None
            parent = stages.get(base.lower())
            stage = parent.inherit(name) if parent else _Stage(name=name, base=base)
            if not parent:
                stage.notes.append(
                    f"base image {base}: its own ENTRYPOINT/CMD/ENV are not known locally"
                )
            if name:
                stages[name] = stage
            continue
        if stage is None:
            if kind == "ARG":  # ARG before FROM: usable in FROM lines
                global_args.update(ctx.line_args)
            continue
        _apply(stage, kind, value, ctx)
    if stage is None:
        raise ImageError(f"{path} has no FROM instruction: it is not a Dockerfile")
    if not stage.entrypoint and not stage.cmd:
        raise ImageError(
            f"{path} sets neither ENTRYPOINT nor CMD in its final stage; the local service "
            'cannot know what the image runs. Add e.g. ENTRYPOINT ["python", "-m", "trainer.task"].'
        )
    return ImagePlan(
        image_uri=image_uri,
        context=context,
        workdir=stage.workdir,
        env=dict(stage.env),
        entrypoint=stage.entrypoint,
        cmd=stage.cmd,
        copies=list(stage.copies),
        notes=list(dict.fromkeys(stage.notes)),
        base=stage.base,
        runs=tuple(stage.runs),
        dockerfile=dockerfile,
    )


def container_argv(plan: ImagePlan, command: list[str] | None, args: list[str] | None) -> list[str]:
    """Docker's rules: ``command`` replaces ENTRYPOINT (and drops CMD); ``args`` replace CMD."""
    if command:
        return list(command) + list(args or [])
    if plan.entrypoint:
        shell_form = plan.entrypoint[:2] == ["/bin/sh", "-c"]
        extra = [] if shell_form else list(args if args else (plan.cmd or []))
        return list(plan.entrypoint) + extra
    return list(args) if args else list(plan.cmd or [])


# ---- the container's file system, as links into the build context ----


def _expand_link(path: Path) -> None:
    """Turn a link to a directory into a real directory of links to its children.

    Needed before anything is written below a linked directory, so that nothing is ever
    written into the build context through a link.
    """
    target = path.resolve()
    path.unlink()
    path.mkdir()
    for child in target.iterdir():
        (path / child.name).symlink_to(child, target_is_directory=child.is_dir())


def _ensure_real_dir(path: Path, root: Path) -> None:
    """``path`` (under ``root``) as a real directory, expanding linked ancestors."""
    current = root
    for part in path.relative_to(root).parts:
        current = current / part
        if current.is_symlink():
            if not current.resolve().is_dir():
                current.unlink()
                current.mkdir()
            else:
                _expand_link(current)
        elif not current.exists():
            current.mkdir()


def _place(src: Path, dest: Path, root: Path) -> None:
    """Make ``src`` appear at ``dest``: a file as a link; a directory merged into ``dest``."""
    _ensure_real_dir(dest.parent, root)
    if src.is_dir():
        if not dest.exists() and not dest.is_symlink():
            dest.symlink_to(src, target_is_directory=True)
            return
        if dest.is_symlink() and dest.is_dir():  # an earlier COPY linked a whole folder here
            _expand_link(dest)
        elif dest.is_symlink() or dest.is_file():  # a file (or dangling link) is replaced
            dest.unlink()
            dest.mkdir()
        for child in src.iterdir():
            _place(child, dest / child.name, root)
        return
    if dest.is_dir() and not dest.is_symlink():
        dest = dest / src.name  # a file copied onto an existing folder lands inside it
    if dest.is_symlink() or dest.is_file():
        dest.unlink()
    dest.symlink_to(src)


def _container_to_host(path: str, root: Path) -> Path:
    return root / path.lstrip("/")


def build_rootfs(plan: ImagePlan, root: Path) -> Path:
    """Lay out what COPY/ADD put into the image under ``root``; return the host WORKDIR."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for sources, dest in plan.copies:
        matched: list[Path] = []
        for source in sources:
            found = sorted(glob.glob(str(plan.context / source)))
            if not found:
                raise ImageError(
                    f"COPY source {source!r} does not exist in the build context {plan.context}"
                )
            matched += [Path(f).resolve() for f in found]
        dest_dir = dest.endswith("/")
        for src in matched:
            if src.is_dir():
                _place(src, _container_to_host(dest, root), root)
            elif dest_dir:
                _place(src, _container_to_host(dest, root) / src.name, root)
            else:
                _place(src, _container_to_host(dest, root), root)
    workdir = _container_to_host(plan.workdir, root)
    if not workdir.exists():
        _ensure_real_dir(workdir, root)
    return workdir


def container_env(plan: ImagePlan, root: Path) -> dict[str, str]:
    """The image's ENV for a local run: container paths into ``root``, host-only ones dropped."""

    def to_host(value: str) -> str:
        if value.startswith("/"):
            first = value.lstrip("/").split("/", 1)[0]
            if first and (root / first).exists():
                return str(_container_to_host(value, root))
        return value

    env = {}
    for key, value in plan.env.items():
        if key in HOST_ONLY_ENV:
            continue
        if key == "PYTHONPATH":
            value = os.pathsep.join(to_host(p) for p in value.split(os.pathsep) if p)
        else:
            value = to_host(value)
        env[key] = value
    return env


def context_file(
    copies: Sequence[tuple[Sequence[str], str]], context: Path, container_path: str
) -> Path | None:
    """The build-context file or folder that the COPY steps ``copies`` put at
    ``container_path`` (an absolute container path), or None when none did: the last
    COPY that wrote the path wins, as in the image."""
    for sources, dest in reversed(copies):
        for source in sources:
            for found in sorted(glob.glob(str(context / source))):
                src = Path(found).resolve()
                if src.is_dir():  # a folder's contents land in dest
                    target = dest.rstrip("/") or "/"
                    if container_path == target:
                        return src
                    if container_path.startswith(target.rstrip("/") + "/"):
                        inside = src / container_path[len(target.rstrip("/")) + 1 :]
                        if inside.exists():
                            return inside
                    continue
                target = dest + src.name if dest.endswith("/") else dest
                if container_path == target:
                    return src
    return None


# ---- the registry of image URIs -> build contexts ----


def normalize_image_uri(uri: str) -> str:
    """``repo/image`` and ``repo/image:latest`` are the same image."""
    uri = uri.strip()
    last = uri.rsplit("/", 1)[-1]
    if "@" not in uri and ":" not in last:
        uri += ":latest"
    return uri


class ImageRegistry:
    """Image URI -> build context, kept in ``images.json`` so registrations survive restarts."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._images: dict[str, str] = {}
        if path.is_file():
            self._images = json.loads(path.read_text())

    def register(self, image_uri: str, context: str | Path) -> None:
        if not image_uri.strip():
            raise ImageError("image URI is empty")
        folder = Path(context).expanduser().resolve()
        if not folder.is_dir():
            raise ImageError(f"build context {folder} for {image_uri} is not a folder")
        with self._lock:
            self._images[normalize_image_uri(image_uri)] = str(folder)
            write_json_atomic(self.path, self._images, sort_keys=True)

    def images(self) -> dict[str, str]:
        with self._lock:
            return dict(self._images)

    def unregister_under(self, prefix: str) -> list[str]:
        """Drop every image whose URI starts with ``prefix`` (a deleted repository's or
        image's); returns the URIs dropped."""
        with self._lock:
            gone = [uri for uri in self._images if uri.startswith(prefix)]
            for uri in gone:
                del self._images[uri]
            if gone:
                write_json_atomic(self.path, self._images, sort_keys=True)
        return gone

    def resolve(self, image_uri: str) -> ImagePlan:
        context = self.images().get(normalize_image_uri(image_uri))
        if context is None:
            known = ", ".join(sorted(self.images())) or "none"
            raise ImageError(
                f"image {image_uri} is not registered with the local Vertex AI service, which "
                "runs images from their build context (no Docker here). Register it: "
                f"`python -m labkit emulator register {image_uri}=PATH/TO/BUILD_CONTEXT`, "
                "or `--image URI=CONTEXT` when starting the service, or "
                "labkit.local.vertex.register_image(uri, context). Registered images: " + known
            )
        return read_dockerfile(image_uri, Path(context))


def parse_image_option(text: str) -> tuple[str, str]:
    """``URI=BUILD_CONTEXT`` from the command line."""
    uri, sep, context = text.partition("=")
    if not sep or not uri.strip() or not context.strip():
        raise ValueError(
            f"--image expects URI=BUILD_CONTEXT (e.g. us-docker.pkg.dev/p/r/img:tag=./), got {text!r}"
        )
    return uri.strip(), context.strip()
