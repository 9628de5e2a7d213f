"""Delete what the kit created, and nothing else.

``python -m labkit cleanup [--mode local|cloud] [--yes] [--run-id RUN]`` (notebook 05 calls
`cleanup` / `plan_cleanup` / `execute`):

- Without ``--yes`` it lists what it would delete and deletes nothing.
- It only touches resources that carry the kit's label (``lab=cassava``, and ``lab-run=RUN``
  with ``--run-id``): training pipelines (the console's and ``CustomContainerTrainingJob``'s),
  custom jobs, buckets, Artifact Registry repositories. Inside a bucket
  the kit did not create it removes only what the kit wrote there: the output folders of the
  kit's own jobs and objects uploaded with the kit's labels. A bucket is deleted whole only
  when it carries the label, i.e. when the kit created it.
- Order: cancel the kit's running pipelines and jobs (so nothing writes any more), delete the kit's objects
  in other buckets, delete the kit's buckets, delete the pipelines and the jobs, then the Artifact Registry
  images and repository; in local mode finally stop the local Vertex AI service and remove
  its state, the local bucket folders and the sample data. The service and its state stay
  when they hold a job or pipeline without the kit's label (the plan says which, and why),
  and ``labkit cluster`` replicas whose launcher was killed (their recorded pids) are ended.
- A second run finds nothing and says so.
- It always ends with the reminder to stop or delete the Workbench instance.

Jobs go through the real Vertex AI SDK (the local service in local mode), buckets through
google-cloud-storage (gcp-storage-emulator in local mode), Artifact Registry through
google-cloud-artifact-registry (`labkit.cloud.registry`; the local platform's in local mode).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import shutil
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from labkit import KIT_LABEL_KEY, KIT_LABEL_VALUE, RUN_LABEL_KEY
from labkit.cloud import images, paths, registry, storage
from labkit.cloud.settings import Settings, load_settings, on_workbench
from labkit.i18n import gettext
from labkit.i18n.tables import pad

JOB_FILTER = f'labels.{KIT_LABEL_KEY}="{KIT_LABEL_VALUE}"'
ACTIVE_JOB_STATES = {
    "JOB_STATE_QUEUED",
    "JOB_STATE_PENDING",
    "JOB_STATE_RUNNING",
    "JOB_STATE_CANCELLING",
}
ACTIVE_PIPELINE_STATES = {
    "PIPELINE_STATE_QUEUED",
    "PIPELINE_STATE_PENDING",
    "PIPELINE_STATE_RUNNING",
    "PIPELINE_STATE_CANCELLING",
}
ACTIVE_STATES = ACTIVE_JOB_STATES | ACTIVE_PIPELINE_STATES
CANCEL_TIMEOUT_S = 180.0


@dataclasses.dataclass
class Item:
    """One thing the cleanup deletes (or stops), why it is the kit's, and how to remove it."""

    kind: str
    name: str
    detail: str
    action: str
    run: Callable[[], Any] = dataclasses.field(repr=False, compare=False)

    def line(self) -> str:
        """``kind  name  [detail] -> action``, the kind padded by display width (a zh-CN kind
        such as 本地文件夹 is two columns a character) and kind and action in the edition."""
        kind = pad(gettext(self.kind), 16)
        return f"{kind} {self.name}  [{self.detail}] -> {gettext(self.action)}"


@dataclasses.dataclass
class CleanupPlan:
    mode: str
    items: list[Item] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)
    _after: list[Callable[[], Any]] = dataclasses.field(default_factory=list, repr=False)

    def names(self) -> list[tuple[str, str]]:
        return [(item.kind, item.name) for item in self.items]

    def __str__(self) -> str:
        if not self.items:
            lines = [
                gettext("Nothing to delete ({mode} mode): the kit left nothing behind.").format(
                    mode=gettext(self.mode)
                )
            ]
        else:
            lines = [
                gettext("The kit created {n} resource(s) ({mode} mode), in deletion order:").format(
                    n=len(self.items), mode=gettext(self.mode)
                )
            ]
            lines += [f"  {i:>2}. {item.line()}" for i, item in enumerate(self.items, 1)]
        lines += [gettext("  note: {note}").format(note=note) for note in self.notes]
        return "\n".join(lines)

    def release(self) -> None:
        """Undo what planning itself started (a local service started only to list jobs)."""
        while self._after:
            self._after.pop()()


# --------------------------------------------------------------------------- jobs


def _state_name(job: Any) -> str:
    state = job.state
    return getattr(state, "name", str(state))


def _job_run_id(job: Any) -> str | None:
    return dict(job.labels or {}).get(RUN_LABEL_KEY)


def list_kit_jobs(run_id: str | None = None) -> list[Any]:
    """The kit's custom jobs through the SDK (``aiplatform.init`` must be done)."""
    from google.cloud import aiplatform

    jobs = aiplatform.CustomJob.list(filter=JOB_FILTER)
    return [j for j in jobs if run_id is None or _job_run_id(j) == run_id]


def list_kit_pipelines(run_id: str | None = None) -> list[Any]:
    """The kit's custom-training pipelines (what the console's "custom training" and
    ``CustomContainerTrainingJob`` make) through the SDK."""
    from google.cloud import aiplatform

    pipelines = aiplatform.CustomContainerTrainingJob.list(filter=JOB_FILTER)
    return [p for p in pipelines if run_id is None or _job_run_id(p) == run_id]


def job_output_uri(job: Any) -> str | None:
    """A custom job's or a training pipeline's base output directory, with a final slash."""
    resource = job.gca_resource
    if hasattr(resource, "training_task_inputs"):
        inputs = dict(resource.training_task_inputs or {})  # a Struct: keys as the client wrote
        base = dict(inputs.get("base_output_directory") or inputs.get("baseOutputDirectory") or {})
        prefix = base.get("output_uri_prefix") or base.get("outputUriPrefix")
    else:
        prefix = resource.job_spec.base_output_directory.output_uri_prefix
    return prefix.rstrip("/") + "/" if prefix else None


def cancel_and_wait(job: Any, timeout: float = CANCEL_TIMEOUT_S) -> str:
    """Cancel a running job or pipeline and wait until it has stopped; returns its final
    state name. Its state is read again first: a pipeline's cancel may have ended its job."""
    current = type(job).get(job.resource_name)
    if _state_name(current) in ACTIVE_STATES:
        current.cancel()
    deadline = time.monotonic() + timeout
    while True:
        current = type(job).get(job.resource_name)
        state = _state_name(current)
        if state not in ACTIVE_STATES:
            return state
        if time.monotonic() > deadline:
            raise TimeoutError(f"{job.resource_name} is still {state} {timeout:g} s after cancel")
        time.sleep(1.0)


def delete_job(job: Any) -> None:
    from google.api_core import exceptions as gexc

    with contextlib.suppress(gexc.NotFound):  # already gone: cleanup is idempotent
        job.delete()


def _connect_vertex(settings: Settings, plan: CleanupPlan) -> bool:
    """Point the SDK at the settings' service; in local mode start the local service only
    when it has state to list (and stop it again after a dry run). False: no jobs to look at."""
    from labkit.local import vertex

    if settings.mode == "cloud":
        vertex.init_vertex(settings)
        return True
    from labkit.local.emulator import control

    status = control.status()
    if not status.running:
        if not (paths.emulator_state_dir() / "jobs").is_dir():
            return False
        vertex.ensure_local_service(settings)
        plan._after.append(control.stop)
    vertex.init_vertex(settings, ensure_service=False)
    return True


def _plan_jobs(
    settings: Settings, plan: CleanupPlan, run_id: str | None
) -> tuple[list[Item], list[Item], list[str]]:
    """(cancel items, delete items, output URIs of the kit's jobs)."""
    try:
        if not _connect_vertex(settings, plan):
            return [], [], []
        found = [("training pipeline", p) for p in list_kit_pipelines(run_id)]
        found += [("custom job", j) for j in list_kit_jobs(run_id)]
    except Exception as err:  # a service we cannot reach must not hide the rest of the plan
        plan.notes.append(
            f"could not list training pipelines and custom jobs ({type(err).__name__}: {err}); "
            "nothing done to them"
        )
        return [], [], []
    cancels, deletes, outputs = [], [], []
    for kind, job in found:
        state = _state_name(job)
        label = f"{KIT_LABEL_KEY}={KIT_LABEL_VALUE}, {RUN_LABEL_KEY}={_job_run_id(job)}"
        name = f"{job.resource_name} ({job.display_name})"
        if state in ACTIVE_STATES:
            cancels.append(
                Item(
                    kind,
                    name,
                    f"{state}; {label}",
                    "cancel, wait until it stops",
                    lambda j=job: cancel_and_wait(j),
                )
            )
        deletes.append(Item(kind, name, f"{state}; {label}", "delete", lambda j=job: delete_job(j)))
        uri = job_output_uri(job)
        if uri and uri not in outputs:  # a pipeline and its own job share one directory
            outputs.append(uri)
    return cancels, deletes, outputs


# --------------------------------------------------------------------------- buckets


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _prune_empty_dirs(folder: Path, stop_at: Path) -> None:
    """Local mode: drop folders left empty by deleted objects (up to the bucket folder)."""
    if not folder.is_dir():
        return
    for sub in sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(sub.iterdir()):
            sub.rmdir()
    while folder != stop_at and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def _plan_buckets(
    settings: Settings, plan: CleanupPlan, run_id: str | None, job_outputs: list[str]
) -> tuple[list[Item], list[Item], list[str]]:
    """(items for the kit's objects in other buckets, items for the kit's buckets, foreign
    bucket names)."""
    if settings.mode == "local" and not paths.local_gcs_root().is_dir():
        return [], [], []
    try:
        client = storage.storage_client(settings)
        all_buckets = {b.name: b for b in client.list_buckets()}
    except Exception as err:
        plan.notes.append(
            f"could not list buckets ({type(err).__name__}: {err}); nothing done to buckets"
        )
        return [], [], []
    kit = {n for n, b in all_buckets.items() if storage.is_kit_bucket(b, run_id)}
    foreign = sorted(
        n for n in all_buckets if n not in kit and not storage.is_kit_bucket(all_buckets[n])
    )

    # The kit's objects in buckets it did not create: its jobs' output folders, and objects
    # it uploaded with its labels (every local bucket; in the cloud the settings' bucket).
    prefixes: dict[tuple[str, str], None] = {}
    for uri in job_outputs:
        bucket, prefix = storage.split_gs_uri(uri)
        if bucket in all_buckets and bucket not in kit:
            prefixes[(bucket, prefix)] = None
    scan = foreign if settings.mode == "local" else [b for b in foreign if b == settings.bucket]
    labelled: dict[str, list[Any]] = {}
    for bucket in scan:
        found = [b for b in storage.iter_blobs(client, bucket) if storage.is_kit_object(b, run_id)]
        if found:
            labelled[bucket] = found

    object_items = []
    for bucket, prefix in prefixes:
        blobs = list(storage.iter_blobs(client, bucket, prefix))
        if not blobs:
            continue
        size = sum(b.size or 0 for b in blobs)

        def remove(bucket: str = bucket, prefix: str = prefix) -> int:
            n = storage.delete_objects(client, bucket, prefix)
            if settings.mode == "local":
                _prune_empty_dirs(
                    paths.local_gcs_root() / bucket / prefix, paths.local_gcs_root() / bucket
                )
            return n

        object_items.append(
            Item(
                "objects",
                f"gs://{bucket}/{prefix}",
                gettext(
                    "{n} objects, {size}; output of a kit job, in a bucket the kit did not create"
                ).format(n=len(blobs), size=_human(size)),
                "delete these objects only",
                remove,
            )
        )
    for bucket, blobs in labelled.items():
        for blob in blobs:
            object_items.append(
                Item(
                    "object",
                    f"gs://{bucket}/{blob.name}",
                    f"metadata {KIT_LABEL_KEY}={KIT_LABEL_VALUE}",
                    "delete",
                    lambda b=blob: b.delete(),
                )
            )

    bucket_items = []
    for name in sorted(kit):
        blobs = list(storage.iter_blobs(client, name))
        labels = all_buckets[name].labels or {}
        bucket_items.append(
            Item(
                "bucket",
                f"gs://{name}",
                gettext("label {labels}; {n} objects, {size}").format(
                    labels=f"{KIT_LABEL_KEY}={KIT_LABEL_VALUE}, "
                    f"{RUN_LABEL_KEY}={labels.get(RUN_LABEL_KEY)}",
                    n=len(blobs),
                    size=_human(sum(b.size or 0 for b in blobs)),
                ),
                "delete its objects, then the bucket",
                lambda n=name: storage.delete_bucket(client, n),
            )
        )
    if foreign:
        plan.notes.append(
            gettext("left alone, not created by the kit: {buckets}").format(
                buckets=", ".join(f"gs://{n}" for n in foreign)
            )
        )
    return object_items, bucket_items, foreign


# --------------------------------------------------------------------------- Artifact Registry


def _registry_client(settings: Settings) -> Any | None:
    """Google's Artifact Registry client for the settings; None in local mode while the
    local service is not running (then it has no repositories to list)."""
    from labkit.local import vertex
    from labkit.local.emulator import control

    if settings.mode != "cloud" and not control.status().running:
        return None
    return vertex.artifact_registry_client(settings)


def _plan_artifact_registry(
    settings: Settings, plan: CleanupPlan, run_id: str | None, client: Any
) -> list[Item]:
    """The kit's repositories whole (with a run id, that run's); in the settings' repository,
    when the kit did not create it (no ``lab=cassava`` label), only the kit's image, every
    version and tag."""
    from google.api_core import exceptions

    items: list[Item] = []
    try:
        kits = registry.kit_repositories(settings, client)
        if registry.repository_name(settings) not in {r.name for r in kits}:
            items += _foreign_repository_image(settings, client)
        for repo in (r for r in kits if run_id is None or r.run_id == run_id):
            items.append(
                Item(
                    "repository",
                    f"{settings.region}/{repo.repository_id}",
                    gettext("label {label}; {count} image version(s), deleted with it").format(
                        label=f"{KIT_LABEL_KEY}={KIT_LABEL_VALUE}", count=repo.image_versions
                    ),
                    "delete the repository and its images",
                    lambda n=repo.name: registry.delete_repository(client, n),
                )
            )
    except exceptions.GoogleAPICallError as err:
        plan.notes.append(
            f"could not list Artifact Registry ({err.message}); check by hand: "
            + images.format_commands([images.list_kit_repositories_command(settings)])
        )
    return items


def _foreign_repository_image(settings: Settings, client: Any) -> list[Item]:
    """The kit's image in a repository the kit did not create, if it is there."""
    from google.api_core import exceptions

    try:
        versions = registry.image_versions(
            client, registry.repository_name(settings), settings.image_name
        )
    except exceptions.NotFound:
        return []  # no such repository: nothing of the kit's there
    if not versions:
        return []
    package = registry.package_name(settings)
    return [
        Item(
            "image",
            images.image_path(settings),
            gettext(
                "the kit's trainer image (Dockerfile LABEL lab=cassava) in a repository the kit "
                "did not create; {count} version(s)"
            ).format(count=len(versions)),
            "delete with its tags",
            lambda: registry.delete_image(client, package),
        )
    ]


# --------------------------------------------------------------------------- local mode


def foreign_local_records(state: Path) -> list[str]:
    """Jobs and pipelines in the local service's state folder that do not carry the kit's
    label (someone else's, or made by hand): "NAME (STATE)" for each."""
    found = []
    for folder in ("jobs", "pipelines"):
        for path in sorted((state / folder).glob("*/job.json")):
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if (record.get("labels") or {}).get(KIT_LABEL_KEY) != KIT_LABEL_VALUE:
                found.append(f"{record.get('name', path.parent.name)} ({record.get('state')})")
    return found


def _cluster_leftovers_items() -> list[Item]:
    """Replicas of `labkit cluster` runs whose launcher was killed: pids still alive in a
    ``LAB_HOME/cluster/<run>/processes.json`` (the runner removes its record when it ends)."""
    import psutil

    from labkit.local import supervisor

    items = []
    for record in sorted((paths.lab_home() / "cluster").glob(f"*/{supervisor.PROCESS_RECORD}")):
        try:
            pids = [int(r["pid"]) for r in json.loads(record.read_text()).values()]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        alive = [str(pid) for pid in pids if psutil.pid_exists(pid)]
        if not alive:
            record.unlink(missing_ok=True)
            continue
        items.append(
            Item(
                "local processes",
                f"labkit cluster replicas (pid {', '.join(alive)})",
                gettext("recorded in {record}; their launcher is gone").format(record=record),
                "kill them",
                lambda folder=record.parent: supervisor.kill_recorded(folder),
            )
        )
    return items


def _plan_local(settings: Settings, plan: CleanupPlan, foreign_buckets: list[str]) -> list[Item]:
    from labkit.local.emulator import control

    items: list[Item] = []
    items += _cluster_leftovers_items()
    state = paths.emulator_state_dir()
    foreign = foreign_local_records(state) if state.exists() else []
    if foreign:
        plan.notes.append(
            f"kept the local Vertex AI service and its state {state}: it holds "
            f"{len(foreign)} job(s) or pipeline(s) without the label "
            f"{KIT_LABEL_KEY}={KIT_LABEL_VALUE}, which the kit did not create: "
            f"{', '.join(foreign[:5])}{' ...' if len(foreign) > 5 else ''}. Stop it yourself "
            "when they are done: python -m labkit emulator stop"
        )
        return items + _plan_local_folders(plan, foreign_buckets)
    status = control.status()
    if status.running:
        started = gettext(" (started by this cleanup to list its jobs)") if plan._after else ""
        items.append(
            Item(
                "local service",
                "local Vertex AI service",
                f"pid {status.pid}, port {status.port}{started}",
                "stop it and every job process",
                control.stop,
            )
        )
    if state.exists():
        items.append(
            _folder_item("local state", state, "the local Vertex AI service's jobs and logs")
        )
    return items + _plan_local_folders(plan, foreign_buckets)


def _plan_local_folders(plan: CleanupPlan, foreign_buckets: list[str]) -> list[Item]:
    """The local bucket root (unless it holds buckets the kit did not create) and the sample."""
    items: list[Item] = []
    root = paths.local_gcs_root()
    if root.exists():
        if foreign_buckets:
            plan.notes.append(
                gettext("kept {root}: it holds buckets the kit did not create ({buckets})").format(
                    root=root, buckets=", ".join(foreign_buckets)
                )
            )
        else:
            items.append(
                _folder_item(
                    "local folder",
                    root,
                    "the local Cloud Storage (bucket folders)",
                    before=lambda: storage.stop_local_storage(root),
                )
            )
    sample = paths.sample_root()
    if sample.exists():
        items.append(_folder_item("local folder", sample, "the synthetic cassava sample data"))
    return items


def _folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _folder_item(
    kind: str, folder: Path, what: str, before: Callable[[], Any] | None = None
) -> Item:
    def remove() -> None:
        if before:
            before()
        shutil.rmtree(folder, ignore_errors=True)

    detail = f"{gettext(what)}, {_human(_folder_size(folder))}"
    return Item(kind, str(folder), detail, "remove", remove)


# --------------------------------------------------------------------------- the whole plan


def plan_cleanup(
    settings: Settings, *, run_id: str | None = None, registry_client: Any | None = None
) -> CleanupPlan:
    """Everything the kit created, in deletion order; nothing is deleted. Call
    `execute(plan)` to delete, or `plan.release()` after a dry run."""
    if settings.mode == "cloud":
        settings.check_cloud_ready()
    plan = CleanupPlan(settings.mode)
    cancels, job_deletes, outputs = _plan_jobs(settings, plan, run_id)
    object_items, bucket_items, foreign = _plan_buckets(settings, plan, run_id, outputs)
    plan.items += cancels + object_items + bucket_items + job_deletes
    registry_client = registry_client or _registry_client(settings)
    if registry_client is not None:
        plan.items += _plan_artifact_registry(settings, plan, run_id, registry_client)
    if settings.mode == "local" and run_id is None:
        plan.items += _plan_local(settings, plan, foreign)
    elif settings.mode == "local":
        plan.notes.append(
            "with a run id the local service, its state and the sample data are kept (they "
            "serve every run)"
        )
    return plan


def execute(plan: CleanupPlan, *, out: Callable[[str], Any] = print) -> list[str]:
    """Delete the plan's items in order, going on past failures; returns the failures (also
    kept in ``plan.errors``), empty when everything went."""
    for i, item in enumerate(plan.items, 1):
        try:
            item.run()
            done = gettext("done: {action}: {kind} {name}").format(
                action=gettext(item.action), kind=gettext(item.kind), name=item.name
            )
            out(f"  {i:>2}. {done}")
        except Exception as err:
            plan.errors.append(f"{item.kind} {item.name}: {type(err).__name__}: {err}")
            failed = gettext("FAILED: {kind} {name}: {error}").format(
                kind=gettext(item.kind), name=item.name, error=err
            )
            out(f"  {i:>2}. {failed}")
    plan.release()  # a service started only for listing is stopped either way
    return plan.errors


def workbench_reminder(settings: Settings) -> str:
    """Workbench instances bill while they run; the kit cannot know which one is yours."""
    instance = socket.gethostname() if on_workbench() else "INSTANCE_NAME"
    project = settings.project_id if settings.mode == "cloud" else "PROJECT_ID"
    where = f"--location=ZONE --project={project}"
    return "\n".join(
        [
            gettext(
                "Reminder: a Vertex AI Workbench instance bills while it runs; idle shutdown "
                "only stops it after the idle time."
            ),
            gettext("  Stop it (keeps its disk):  ")
            + f"gcloud workbench instances stop {instance} {where}",
            gettext("  Or delete it:              ")
            + f"gcloud workbench instances delete {instance} {where}",
            gettext("  Find its name and ZONE:    ")
            + f"gcloud workbench instances list --project={project}",
        ]
    )


def cleanup(
    settings: Settings,
    *,
    yes: bool = False,
    run_id: str | None = None,
    out: Callable[[str], Any] = print,
) -> CleanupPlan:
    """List (and with ``yes``, delete) what the kit created; always print the reminder."""
    plan = plan_cleanup(settings, run_id=run_id)
    out(str(plan))
    if yes and plan.items:
        out(gettext("Deleting:"))
        if execute(plan, out=out):
            out(
                gettext(
                    "{n} item(s) could not be deleted; run the cleanup again or delete them by hand."
                ).format(n=len(plan.errors))
            )
        else:
            out(gettext("Done: everything the kit created is gone."))
    else:
        plan.release()
        if plan.items:
            out(
                gettext(
                    "Dry run: nothing was deleted. "
                    "Run again with --yes (yes=True) to delete the items above."
                )
            )
    out(workbench_reminder(settings))
    return plan


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labkit cleanup", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--mode", choices=("local", "cloud"), help="default: the saved settings' mode"
    )
    parser.add_argument("--yes", action="store_true", help="delete; without it, only list")
    parser.add_argument("--run-id", help=f"only resources labelled {RUN_LABEL_KEY}=RUN_ID")
    parser.add_argument("--project-id")
    parser.add_argument("--region")
    ns = parser.parse_args(argv)
    settings = load_settings(ns.mode or "auto", ns.project_id, ns.region)
    try:
        plan = cleanup(settings, yes=ns.yes, run_id=ns.run_id)
    except ValueError as err:
        print(f"error: {err}")
        return 2
    return 1 if plan.errors else 0
