"""The ``pip install`` steps of an image's Dockerfile, as the local service runs them.

`labkit.local.emulator.image_env` builds a job's Python environment from the final stage's
RUN steps. This module reads those steps: each ``pip install`` (``pip``, ``pip3``,
``python -m pip``, alone or between ``&&``) becomes a `PipInstall` whose ``-r`` / ``-c`` files
and wheel paths are the build-context files the COPY steps before it put at those container
paths. Everything else a RUN does (apt-get, curl, a shell script) is not executed: it is
returned as such, for the job's log.

Options that only shape a Docker layer are dropped (``--no-cache-dir``: pip's cache is kept
here; ``--user`` and ``--break-system-packages``: the image environment is a virtualenv).
An install into another place (``--target``, ``--prefix``, ``--root``) or of a source folder
is refused with a message saying what the local service can run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import posixpath
import re
import shlex
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from labkit.local.emulator.dockerfile import (
    ImageError,
    ImagePlan,
    RunStep,
    context_file,
    exec_form,
)

PIP_PROGRAM = re.compile(r"^(?:/[\w./-]*/)?pip(?:3(?:\.\d+)?)?$")
PYTHON_PROGRAM = re.compile(r"^(?:/[\w./-]*/)?python(?:3(?:\.\d+)?)?$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
_SEPARATORS = {"&&", ";", "||"}
# pip options dropped here, and why (said once in the job's log).
DROPPED_FLAGS = {
    "--no-cache-dir": "pip's cache is kept here (the flag only keeps a Docker layer small)",
    "--user": "the image environment is a virtualenv: packages go into it",
    "--break-system-packages": "the image environment is a virtualenv",
    "--no-warn-script-location": "",
}
DROPPED_WITH_VALUE = {"--cache-dir", "--root-user-action"}
FILE_OPTIONS = {"-r", "--requirement", "-c", "--constraint"}
ELSEWHERE_OPTIONS = {"-t", "--target", "--prefix", "--root", "-e", "--editable", "--src"}
VALUE_OPTIONS = {
    "-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--trusted-host",
    "--progress-bar", "--platform", "--python-version", "--implementation", "--abi",
    "--upgrade-strategy", "-C", "--config-settings", "--global-option", "--log", "--proxy",
    "--retries", "--timeout", "--cert", "--client-cert", "--exists-action", "--report",
    "--only-binary", "--no-binary", "--use-feature", "--use-deprecated", "--keyring-provider",
}  # fmt: skip
MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")


@dataclasses.dataclass(frozen=True)
class PipInstall:
    """One ``pip install`` as run here: its arguments (build-context paths for the files it
    reads), the Dockerfile text it came from, and what identifies it for the layer cache
    (file paths replaced by a digest of their content, so an unchanged file reuses the layer)."""

    line: str
    args: tuple[str, ...]
    key: tuple[str, ...]
    files: tuple[Path, ...] = ()


@dataclasses.dataclass(frozen=True)
class RunSteps:
    """The final stage's RUN steps, sorted into what is run and what is not."""

    installs: tuple[PipInstall, ...]
    not_executed: tuple[str, ...]
    dropped: tuple[str, ...]  # "--no-cache-dir: why", once each


def _digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def _commands(text: str) -> list[list[str]]:
    """A RUN value split into simple commands (exec form as one command). A command with a
    pipe or redirection comes back with those tokens in it, so it is never taken as pip's."""
    parsed = exec_form(text)
    if parsed is not None:
        return [parsed]
    lexer = shlex.shlex(text.strip(), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    for token in lexer:
        if token in _SEPARATORS:
            commands.append([])
        else:
            commands[-1].append(token)
    return [c for c in commands if c]


def pip_install_arguments(tokens: Sequence[str]) -> list[str] | None:
    """The arguments of ``pip install`` in one simple command, or None when it is not one."""
    words = list(tokens)
    while words and _ASSIGNMENT.match(words[0]):
        words.pop(0)  # VAR=value before the program
    if words and PIP_PROGRAM.match(words[0]):
        rest = words[1:]
    elif len(words) >= 3 and PYTHON_PROGRAM.match(words[0]) and words[1:3] == ["-m", "pip"]:
        rest = words[3:]
    else:
        return None
    if "install" not in rest or any(not w.startswith("-") for w in rest[: rest.index("install")]):
        return None
    if any(set(w) <= set("|&<>") for w in rest):
        return None  # piped or redirected: not a plain install
    at = rest.index("install")
    return rest[:at] + rest[at + 1 :]


def _context_path(step: RunStep, plan: ImagePlan, value: str, line: str) -> Path:
    """The build-context file a container path in a RUN step stands for."""
    container_path = posixpath.normpath(posixpath.join(step.workdir, value))
    found = context_file(step.copies, plan.context, container_path)
    if found is None or not found.is_file():
        raise ImageError(
            f"`RUN {line}` reads {value} ({container_path} in the image), which no COPY before "
            f"it puts there from the build context {plan.context}: add e.g. "
            f"`COPY {Path(value).name} {container_path}` before this RUN line."
        )
    return found


def _install(step: RunStep, plan: ImagePlan, args: list[str], line: str) -> PipInstall:
    """One install's arguments with container paths mapped into the build context."""
    out: list[str] = []
    key: list[str] = []
    files: list[Path] = []
    words = iter(args)
    for word in words:
        name, eq, inline = word.partition("=")
        if word in DROPPED_FLAGS:
            continue
        if name in DROPPED_WITH_VALUE:
            if not eq:
                next(words, None)
            continue
        if name in ELSEWHERE_OPTIONS:
            raise ImageError(
                f"`RUN {line}`: {name} installs outside the image's Python environment (or from "
                "a source folder), which the local service does not run. Install into the "
                "image's Python: list the packages, or a requirements file (-r FILE), or a wheel."
            )
        value = inline if eq else None
        if name in FILE_OPTIONS or (word.startswith("-r") and len(word) > 2 and not eq):
            option = name if name in FILE_OPTIONS else "-r"
            value = value or (word[2:] if option == "-r" and word != "-r" else next(words, ""))
            path = _context_path(step, plan, value, line)
            out += [option, str(path)]
            key += [option, _digest(path)]
            files.append(path)
        elif name in VALUE_OPTIONS:
            value = value if eq else next(words, "")
            out += [name, value]
            key += [name, value]
        elif word.startswith(("/", "./", "../")) or word == ".":
            path = _context_path(step, plan, word, line)
            out.append(str(path))
            key.append(_digest(path))
            files.append(path)
        else:
            out.append(word)
            key.append(word)
    return PipInstall(line=line, args=tuple(out), key=tuple(key), files=tuple(files))


def read_run_steps(plan: ImagePlan) -> RunSteps:
    """The final stage's RUN steps: the pip installs to run, in order, and the rest."""
    installs: list[PipInstall] = []
    not_executed: list[str] = []
    dropped: dict[str, str] = {}
    for step in plan.runs:
        for tokens in _commands(step.command):
            text = shlex.join(tokens)
            args = pip_install_arguments(tokens)
            if args is None:
                not_executed.append(text)
                continue
            for word in args:
                if DROPPED_FLAGS.get(word):
                    dropped[word] = DROPPED_FLAGS[word]
            installs.append(_install(step, plan, args, text))
    return RunSteps(
        installs=tuple(installs),
        not_executed=tuple(not_executed),
        dropped=tuple(f"{flag}: {why}" for flag, why in dropped.items()),
    )


def _distribution_of(module: str) -> str | None:
    """``name==version`` of the distribution that provides ``module`` in the service's own
    environment (the kit's pins), or None when it has none."""
    top = module.split(".")[0]
    names = metadata.packages_distributions().get(top) or []
    for name in names:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        return f"{re.sub(r'[-_.]+', '-', name).lower()}=={version}"
    return None


def missing_module_fix(log_tail: Sequence[str], plan: ImagePlan) -> str | None:
    """What to add to the image when a replica died of ``ModuleNotFoundError``, or None.

    Names the module, the package (with the version the kit pins, when the kit has it) and
    the line to add: to the requirements file the Dockerfile installs, else a RUN line.
    """
    module = next(
        (m.group(1) for line in reversed(log_tail) if (m := MISSING_MODULE.search(line))), None
    )
    if module is None:
        return None
    package = _distribution_of(module) or f"<the package that provides {module}>"
    try:
        files = [f for i in read_run_steps(plan).installs for f in i.files if f.suffix == ".txt"]
    except ImageError:
        files = []
    dockerfile = plan.context / plan.dockerfile
    if files:
        where = (
            f"add the line `{package}` to {files[-1]} (the requirements file {dockerfile} installs)"
        )
    else:
        where = f"add `RUN python -m pip install --no-cache-dir {package}` to {dockerfile}"
    return (
        f"The image has no module '{module}': its base ({plan.base}) and its RUN pip install "
        f"lines install nothing that provides it. Fix: {where}, then submit the job again."
    )
