"""Small helpers the notebooks call, so that the notebooks hold prose and calls, not logic.

Four groups:

- results: each notebook records what it measured (`record`) into ``results.json`` in the
  run folder; the next notebook (02 -> 03 -> 04) and the tests read it back (`load_results`).
  Plain JSON, readable without papermill or scrapbook.
- settings and knobs: the run folder, the mode's size knobs, the trainer's command line.
- display: tables, package source, files, folder trees.
- data and models: label counts, image sizes, examples, and predictions through the
  exported SavedModel's serving signatures (the way a deployed model is called).
"""

from __future__ import annotations

import dataclasses
import functools
import html
import inspect
import json
import os
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from labkit import paths
from labkit.i18n import gettext, text_table
from labkit.settings import Settings

RESULTS_FILE = "results.json"

# Knobs whose trainer option `labkit.specs.TRAINER_OPTIONS` does not map (yet).
EXTRA_TRAINER_OPTIONS: dict[str, str] = {"bn_momentum": "--bn-momentum"}
SHOWN_PACKAGES = (
    "tensorflow",
    "tf-keras",
    "tensorflow-datasets",
    "google-cloud-aiplatform",
    "google-cloud-storage",
)


# --------------------------------------------------------------------------- set-up


def quiet_logs() -> None:
    """Hide TensorFlow's C++ start-up chatter (CUDA probing, CPU flags) in cell outputs.

    Set before TensorFlow is imported; replicas and the local Vertex AI service started
    from this kernel inherit it, so their logs show the trainer's own lines. The lines no
    level hides go to a log file while the kernel imports TensorFlow (`labkit.tflogs`).
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from labkit.tflogs import import_tensorflow_quietly

    import_tensorflow_quietly()


def run_folder(settings: Settings, run_dir: str | Path | None = None) -> Path:
    """Where this lab run keeps its results: ``run_dir``, else ``<repo>/runs/<run id>``.

    `make lab` passes its timestamped folder; in Jupyter every notebook of one run (same
    saved settings, same run id) lands in the same folder.
    """
    folder = Path(run_dir) if run_dir else paths.REPO_ROOT / "runs" / settings.run_id
    folder.mkdir(parents=True, exist_ok=True)
    return folder.resolve()


def trainer_args(knobs: Mapping[str, Any]) -> list[str]:
    """`python -m trainer.task` options for the knobs: the same list for 02 (in-process),
    03 (`labkit cluster`) and 04 (the container's args)."""
    from labkit.specs import TRAINER_OPTIONS, trainer_args_from_knobs

    args = trainer_args_from_knobs(knobs)
    for key, option in EXTRA_TRAINER_OPTIONS.items():
        if key not in TRAINER_OPTIONS and knobs.get(key) is not None:
            args += [option, str(knobs[key])]
    return args


def enable_apis_command(settings: Settings) -> list[str]:
    """The one gcloud command that enables the five services the lab uses
    (`labkit.setup_checks.REQUIRED_APIS`: the codelab's three with Artifact Registry instead
    of Container Registry, plus Workbench and Cloud Build)."""
    from labkit.setup_checks import enable_apis_command as command

    return command(settings.project_id)


# --------------------------------------------------------------------------- results


def _jsonable(value: Any) -> Any:
    """numpy scalars and arrays, paths and tuples -> plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):  # numpy arrays and scalars, tf EagerTensors via numpy()
        return _jsonable(value.tolist())
    if hasattr(value, "numpy"):
        return _jsonable(value.numpy())
    return value


def record(run_dir: str | Path, name: str, value: Any) -> None:
    """Store ``value`` under ``name`` in the run folder's results.json (merged, atomic)."""
    path = Path(run_dir) / RESULTS_FILE
    results = load_results(run_dir)
    results[name] = _jsonable(value)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
    print(gettext("recorded {name!r} in {path}").format(name=name, path=path))


def load_results(run_dir: str | Path) -> dict[str, Any]:
    """Everything recorded so far in this run folder (empty when nothing was)."""
    path = Path(run_dir) / RESULTS_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def require_result(run_dir: str | Path, name: str, notebook: str) -> dict[str, Any]:
    """A result an earlier notebook recorded, or an error saying which notebook to run."""
    results = load_results(run_dir)
    if name not in results:
        raise LookupError(
            f"no {name!r} result in {Path(run_dir) / RESULTS_FILE}: run notebook {notebook} "
            "first, with the same RUN_DIR (or the same saved settings)."
        )
    return results[name]


# --------------------------------------------------------------------------- display


@dataclasses.dataclass
class Table:
    """Rows as an HTML table in Jupyter and as aligned text elsewhere (and in nbval)."""

    rows: list[Any]  # mappings or dataclass instances
    columns: list[str] | None = None

    def __post_init__(self) -> None:
        self.rows = [
            dataclasses.asdict(row) if dataclasses.is_dataclass(row) else dict(row)
            for row in self.rows
        ]

    def _columns(self) -> list[str]:
        if self.columns:
            return self.columns
        seen: dict[str, None] = {}
        for row in self.rows:
            seen.update(dict.fromkeys(row))
        return list(seen)

    @staticmethod
    def _cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.4g}"
        if isinstance(value, bool):
            return gettext("yes") if value else gettext("no")
        # the edition's words for the kit's fixed texts (headings, roles, check names)
        return "" if value is None else gettext(str(value))

    def __repr__(self) -> str:
        keys = self._columns()
        cols = [gettext(c) for c in keys]
        cells = [[self._cell(row.get(c)) for c in keys] for row in self.rows]
        return text_table(cols, cells)  # padded by display width: Chinese cells stay aligned

    def _repr_html_(self) -> str:
        cols = self._columns()
        head = "".join(f"<th>{html.escape(gettext(c))}</th>" for c in cols)
        body = "".join(
            "<tr>"
            + "".join(f"<td>{html.escape(self._cell(row.get(c)))}</td>" for c in cols)
            + "</tr>"
            for row in self.rows
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


@dataclasses.dataclass
class Code:
    """Source text shown with syntax highlighting in Jupyter, plain elsewhere."""

    text: str
    language: str = "python"

    def __repr__(self) -> str:
        return self.text

    def _repr_markdown_(self) -> str:
        return f"```{self.language}\n{self.text}\n```"


def show_source(obj: Any, around: str | None = None, context: int = 4) -> Code:
    """The package's own code for ``obj`` (never a copy), or only the lines ``around`` a
    snippet, with the file and line numbers so a learner can find it."""
    lines, first = inspect.getsourcelines(obj)
    where = f"# {Path(inspect.getsourcefile(obj) or '?').relative_to(paths.REPO_ROOT)}"
    if around is None:
        return Code(where + f", line {first}\n" + "".join(lines).rstrip())
    hits = [i for i, line in enumerate(lines) if around in line]
    if not hits:
        raise ValueError(
            f"{getattr(obj, '__qualname__', obj)} has no line containing {around!r}: the "
            "package changed; update the snippet in the notebook"
        )
    start, end = max(0, hits[0] - context), min(len(lines), hits[0] + context + 1)
    shown = textwrap.dedent("".join(lines[start:end])).rstrip()
    return Code(f"{where}, lines {first + start}-{first + end - 1}\n{shown}")


def show_file(path: str | Path, language: str = "") -> Code:
    """A file of the repository (e.g. the Dockerfile), as it is."""
    full = Path(path) if Path(path).is_absolute() else paths.REPO_ROOT / path
    return Code(full.read_text().rstrip(), language)


def show_settings(settings: Settings, knobs: Mapping[str, Any] | None = None) -> Table:
    """Mode, project, region, bucket, image and the size knobs in one table."""
    rows = [
        {"setting": "mode", "value": settings.mode},
        {"setting": "project", "value": settings.project_id},
        {"setting": "region", "value": settings.region},
        {"setting": "bucket", "value": settings.bucket_uri},
        {"setting": "image", "value": settings.image_uri},
        {"setting": "run id", "value": settings.run_id},
    ]
    rows += [{"setting": k, "value": v} for k, v in (knobs or {}).items()]
    return Table(rows, ["setting", "value"])


def tree(folder: str | Path, depth: int = 3) -> str:
    """The folder's files and sub-folders (to ``depth``), sizes in KB; what a run left."""
    root = Path(folder)
    if not root.exists():
        return f"{root} (does not exist)"
    lines = [str(root)]
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if len(rel.parts) > depth:
            continue
        size = "" if path.is_dir() else f"  {path.stat().st_size / 1024:.0f} KB"
        lines.append("  " * len(rel.parts) + rel.name + ("/" if path.is_dir() else "") + size)
    return "\n".join(lines)


def matching_lines(text: str, pattern: str) -> list[str]:
    """Lines of a log that match a regular expression (e.g. what each worker saved)."""
    return [line for line in text.splitlines() if re.search(pattern, line)]


def find_leftovers(folder: str | Path, marker: str = "workertemp") -> list[str]:
    """Paths under ``folder`` whose name contains ``marker`` (the non-chief copies)."""
    return sorted(str(p) for p in Path(folder).rglob(f"*{marker}*"))


# --------------------------------------------------------------------------- multi-worker


def summarize_run(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The numbers 03 compares and the tests check, from a `RunResult.to_dict()` or the
    ``metrics.json`` the chief writes (the same keys)."""
    final = metrics.get("final_metrics") or {}
    return {
        "replicas": metrics.get("replicas"),
        "images_per_sec": metrics.get("images_per_sec"),
        "accuracy": final.get("accuracy"),
        "val_accuracy": final.get("val_accuracy"),
        "wall_time_s": metrics.get("wall_time_s"),
        "epochs_run": metrics.get("epochs_run"),
        "model_dir": metrics.get("model_dir"),
        "metrics_file": metrics.get("metrics_file"),
    }


CHIEF_CASES: tuple[tuple[str, str | None, int, dict[str, list[str]]], ...] = (
    ("no TF_CONFIG (one machine)", None, 0, {}),
    ("chief 0 (Vertex pool 0)", "chief", 0, {"chief": ["a:2222"], "worker": ["b:2222"]}),
    ("worker 0, cluster with a chief", "worker", 0, {"chief": ["a:2222"], "worker": ["b:2222"]}),
    ("worker 0, cluster without chief", "worker", 0, {"worker": ["a:2222", "b:2222"]}),
    ("worker 1, cluster without chief", "worker", 1, {"worker": ["a:2222", "b:2222"]}),
)


def chief_table(codelab_rule: Callable[[str | None, int], bool]) -> Table:
    """Who is chief in each kind of cluster: the codelab's rule next to the trainer's."""
    from trainer.distribution import is_chief

    return Table(
        [
            {
                "case": case,
                "codelab _is_chief": codelab_rule(task_type, index),
                "trainer is_chief": is_chief(task_type, index, cluster),
            }
            for case, task_type, index, cluster in CHIEF_CASES
        ]
    )


def example_layout(workers: int, first_port: int = 2222) -> Any:
    """A chief + (workers - 1) workers cluster on fixed ports, for showing TF_CONFIG.

    Vertex gives every replica its own host (port 2222 each); local replicas share
    127.0.0.1, so they differ by port instead.
    """
    from labkit import vertex_env

    counts = vertex_env.cluster_counts(workers, chief=True)
    return vertex_env.plan_cluster(counts, ports=list(range(first_port, first_port + workers)))


def show_tf_configs(layout: Any) -> None:
    """Print TF_CONFIG and CLUSTER_SPEC of every replica as Vertex would set them."""
    for replica in layout.replicas:
        print(f"--- {replica.role} ({replica.pool_name}) ---")
        print("TF_CONFIG =", json.dumps(layout.tf_config(replica)))
        print("CLUSTER_SPEC =", json.dumps(layout.cluster_spec(replica)))


def save_plan(layout: Any, model_dir: str) -> Table:
    """Where each replica of ``layout`` saves the model, and whether the copy is kept."""
    from trainer.distribution import parse_tf_config, write_dir

    rows = []
    for replica in layout.replicas:
        info = parse_tf_config({"TF_CONFIG": json.dumps(layout.tf_config(replica))})
        rows.append(
            {
                "replica": replica.role,
                "chief": info.is_chief,
                "saves to": write_dir(model_dir, info),
                "kept": "yes" if info.is_chief else "no: removed after the save",
            }
        )
    return Table(rows)


def replica_lines(cluster: Any, pattern: str = r"\[trainer\]") -> None:
    """Print, per replica of a `run_cluster` result, the log lines matching ``pattern``."""
    for role in cluster.logs:
        print(f"--- {role} (exit code {cluster.exit_codes.get(role)}) ---")
        for line in matching_lines(cluster.log_text(role), pattern):
            print(line)


# --------------------------------------------------------------------------- environment


def pinned_versions(pyproject: Path | None = None) -> dict[str, str]:
    """``name -> version`` of the kit's ``==`` pins (pyproject.toml, else the installed kit)."""
    lines: list[str] = []
    path = pyproject or paths.REPO_ROOT / "pyproject.toml"
    try:
        import tomllib

        lines = tomllib.loads(path.read_text())["project"]["dependencies"]
    except (ImportError, OSError, KeyError):
        from importlib import metadata

        try:
            lines = metadata.requires("cassava-mwms-lab") or []
        except metadata.PackageNotFoundError:
            lines = []
    pins = {}
    for line in lines:
        m = re.match(r"^\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s;]+)", line)
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


def package_versions(packages: Iterable[str] = SHOWN_PACKAGES) -> list[dict[str, Any]]:
    """Installed vs pinned version of each package, and whether they match."""
    import platform
    from importlib import metadata

    pins = pinned_versions()
    rows: list[dict[str, Any]] = [
        {"package": "python", "installed": platform.python_version(), "pinned": ">=3.10,<3.13"}
    ]
    rows[0]["matches"] = (3, 10) <= tuple(map(int, rows[0]["installed"].split(".")[:2])) < (3, 13)
    for name in packages:
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = None
        pinned = pins.get(name.lower())
        rows.append(
            {
                "package": name,
                "installed": installed or "missing",
                "pinned": pinned,
                "matches": installed is not None and installed == pinned,
            }
        )
    return rows


@dataclasses.dataclass
class Check:
    """One thing the later notebooks need, whether it is in place, and what to do if not."""

    check: str
    ok: bool
    detail: str


def _check(name: str, probe: Callable[[], tuple[bool, str]]) -> Check:
    try:
        ok, detail = probe()
    except Exception as err:  # a failing probe is a failed check, with its reason
        ok, detail = False, f"{type(err).__name__}: {str(err)[:200]}"
    return Check(name, ok, detail)


def readiness(settings: Settings, knobs: Mapping[str, Any]) -> list[Check]:
    """Everything notebooks 01-05 rely on, checked now rather than discovered later."""
    from labkit import storage

    checks = [
        _check(
            "settings saved",
            lambda: (paths.settings_file().is_file(), str(paths.settings_file())),
        ),
        _check(
            "packages match the pins",
            lambda: (
                all(r["matches"] for r in package_versions()),
                "see the version table above",
            ),
        ),
        _check(
            "bucket exists",
            lambda: (
                storage.storage_client(settings).lookup_bucket(settings.bucket) is not None,
                settings.bucket_uri,
            ),
        ),
        _check("dataset readable", lambda: _dataset_ready(knobs)),
    ]
    if settings.mode == "local":
        checks.append(_check("local Vertex AI service", _local_service_ready))
    else:
        checks.append(_check("APIs enabled", lambda: _apis_enabled(settings)))
        checks.append(_check("Vertex AI reachable", _vertex_reachable))
    return checks


def _apis_enabled(settings: Settings) -> tuple[bool, str]:
    from labkit.setup_checks import check_apis

    found = check_apis(settings.project_id)
    return found.ok, found.message()


def _dataset_ready(knobs: Mapping[str, Any]) -> tuple[bool, str]:
    """Prepared TFDS data (or a folder) is ready; an unprepared TFDS dataset is fine only
    where TFDS may download it (no data dir given, i.e. cloud mode)."""
    import tensorflow_datasets as tfds

    source = str(knobs["data"])
    if not source.startswith("tfds:"):
        return Path(source).is_dir(), source
    name = source.removeprefix("tfds:")
    builder = tfds.builder(name, data_dir=knobs.get("data_dir"))
    if builder.is_prepared():
        return True, f"tfds {name} in {builder.data_dir}"
    return knobs.get("data_dir") is None, (
        f"tfds {name} is not prepared in {builder.data_dir}: the first tfds.load downloads it"
    )


def _local_service_ready() -> tuple[bool, str]:
    from labkit.emulator import control

    status = control.status()
    return status.running, status.url or status.detail


def _vertex_reachable() -> tuple[bool, str]:
    from labkit.cleanup import list_kit_jobs

    jobs = list_kit_jobs()
    return True, f"{len(jobs)} custom job(s) of the kit in the project"


def assert_ready(checks: Sequence[Check]) -> None:
    """Stop here, naming what is missing, rather than fail in a later notebook."""
    missing = [c for c in checks if not c.ok]
    if missing:
        raise RuntimeError(
            "not ready: "
            + "; ".join(f"{c.check} ({c.detail})" for c in missing)
            + ". Fix these and run this notebook again."
        )


# --------------------------------------------------------------------------- data


def class_counts(knobs: Mapping[str, Any], splits: Sequence[str]) -> dict[str, list[int]]:
    """Images per class in each split, read from labels only (no image is decoded)."""
    from trainer import data

    counts: dict[str, list[int]] = {}
    for split in splits:
        loaded = data.load_split(knobs["data"], split, data_dir=knobs.get("data_dir"))
        per_class = [0] * len(loaded.class_names)
        for label in loaded.encoded.map(lambda _, y: y).as_numpy_iterator():
            per_class[int(label)] += 1
        counts[split] = per_class
    return counts


def encoded_examples(
    knobs: Mapping[str, Any], split: str, count: int, *, per_class: bool = False
) -> tuple[list[bytes], list[int], list[str]]:
    """The first ``count`` encoded images of a split (or ``count`` of each class), their
    labels and the class names; deterministic, so reruns show the same pictures."""
    from trainer import data

    loaded = data.load_split(knobs["data"], split, data_dir=knobs.get("data_dir"))
    wanted = count * len(loaded.class_names) if per_class else count
    taken: dict[int, int] = {}
    encoded: list[bytes] = []
    labels: list[int] = []
    for image, label in loaded.encoded.as_numpy_iterator():
        label = int(label)
        if per_class and taken.get(label, 0) >= count:
            continue
        taken[label] = taken.get(label, 0) + 1
        encoded.append(bytes(image))
        labels.append(label)
        if len(encoded) >= wanted:
            break
    return encoded, labels, loaded.class_names


def decode(encoded: Sequence[bytes]) -> list[Any]:
    """JPEG/PNG bytes -> uint8 arrays at their original sizes."""
    import tensorflow as tf

    return [tf.io.decode_image(b, channels=3, expand_animations=False).numpy() for b in encoded]


def resized(images: Sequence[Any], size: int) -> list[Any]:
    """Images resized to size x size exactly as the trainer does (`trainer.data`)."""
    import tensorflow as tf

    from trainer.data import decode_and_resize

    return [decode_and_resize(tf.io.encode_png(img), size).numpy() for img in images]


def image_sizes(knobs: Mapping[str, Any], split: str, limit: int = 300) -> list[tuple[int, int]]:
    """(height, width) of up to ``limit`` images, read from the JPEG headers."""
    import tensorflow as tf

    from trainer import data

    loaded = data.load_split(knobs["data"], split, data_dir=knobs.get("data_dir"))
    sizes = []
    for image, _ in loaded.encoded.take(limit):
        if tf.io.is_jpeg(image):
            shape = tf.image.extract_jpeg_shape(image)
        else:
            shape = tf.shape(tf.io.decode_image(image, channels=3, expand_animations=False))
        sizes.append((int(shape[0]), int(shape[1])))
    return sizes


# --------------------------------------------------------------------------- models


def savedmodel_path(model_dir: str | Path) -> str:
    """``<model dir>/savedmodel`` as the trainer exports it (local path or gs://)."""
    from trainer.export import SAVEDMODEL_DIR

    return f"{str(model_dir).rstrip('/')}/{SAVEDMODEL_DIR}"


def _load_savedmodel(savedmodel_dir: str) -> Any:
    """A SavedModel, loaded once per version of it: ResNet50 takes seconds to load, and a
    model saved again at the same path (a rerun training cell) must not be served stale."""
    pb = Path(savedmodel_dir) / "saved_model.pb"
    version = pb.stat().st_mtime_ns if pb.is_file() else None  # gs:// paths: by path only
    return _load_savedmodel_version(savedmodel_dir, version)


@functools.lru_cache(maxsize=4)
def _load_savedmodel_version(savedmodel_dir: str, version: int | None) -> Any:
    import tensorflow as tf

    return tf.saved_model.load(savedmodel_dir)  # kept: its signatures need it alive


def predict_encoded(
    savedmodel_dir: str | Path, encoded: Sequence[bytes], batch: int = 64
) -> dict[str, Any]:
    """Class probabilities for raw JPEG/PNG bytes through the ``serve_jpeg`` signature.

    That is how a deployed model is called: pictures in, classes out; the signature
    resizes and scales exactly as training did.
    """
    import numpy as np
    import tensorflow as tf

    serve = _load_savedmodel(str(savedmodel_dir)).signatures["serve_jpeg"]
    probabilities, names = [], []
    for start in range(0, len(encoded), batch):
        chunk = tf.constant(list(encoded[start : start + batch]))
        out = serve(image_bytes=chunk)
        probabilities.append(out["probabilities"].numpy())
        names += [n.decode() for n in out["class_name"].numpy()]
    probs = np.concatenate(probabilities) if probabilities else np.zeros((0, 0))
    return {
        "probabilities": probs,
        "class_id": probs.argmax(axis=-1) if len(probs) else np.zeros(0, int),
        "class_name": names,
    }


def evaluate_split(
    savedmodel_dir: str | Path, knobs: Mapping[str, Any], split: str, limit: int | None = None
) -> tuple[list[int], list[int], list[str]]:
    """(true labels, predicted labels, class names) for a split through the SavedModel."""
    encoded, labels, class_names = encoded_examples(knobs, split, limit or 10**9)
    predicted = predict_encoded(savedmodel_dir, encoded)
    return labels, [int(c) for c in predicted["class_id"]], class_names


def accuracy(y_true: Sequence[int], y_pred: Sequence[int]) -> float:
    return sum(int(a == b) for a, b in zip(y_true, y_pred, strict=True)) / max(len(y_true), 1)


def job_model_dir(job: Any, settings: Settings) -> str:
    """Where a custom job's chief saved the model: ``<base output dir>/model``.

    Cloud: the job's ``gs://`` output folder. Local: the folder that stands for it.
    """
    if settings.mode == "local":
        from labkit.vertex import job_output_dir

        return str(job_output_dir(job, settings=settings) / "model")
    prefix = job.gca_resource.job_spec.base_output_directory.output_uri_prefix
    return prefix.rstrip("/") + "/model"


def describe_pools(worker_pool_specs: Sequence[Mapping[str, Any]]) -> Table:
    """One row per worker pool: its role, replicas, machine, GPUs and image."""
    from labkit.specs import POOL_ROLES, snake_keys

    rows = []
    for i, raw in enumerate(worker_pool_specs):
        pool = snake_keys(dict(raw))
        machine = pool.get("machine_spec") or {}
        rows.append(
            {
                "pool": i,
                "role": POOL_ROLES[i] if i < len(POOL_ROLES) else "?",
                "replicas": pool.get("replica_count", 0),
                "machine": machine.get("machine_type", "-"),
                "gpus": (
                    f"{machine['accelerator_count']} x {machine.get('accelerator_type')}"
                    if machine.get("accelerator_count")
                    else "none"
                ),
                "image": (pool.get("container_spec") or {}).get("image_uri", "-"),
            }
        )
    return Table(rows)
