"""What a worker pool spec costs for an expected duration: an itemised ESTIMATE.

The codelab says "about 5 USD" once and never shows how a configuration adds up. Here every
machine and every GPU is a line (replicas x unit price), priced from the table in
``labkit/cloud/prices.json``, which names its region and the date the prices were read. The output
always says it is an estimate and what it leaves out. The table and the machine catalog live
in `labkit.cloud.specs` (the job-spec core), so a spec that validates is a spec this can price.

Beside the job, the learner pays for the Workbench instance while reading (its machine type
per hour, with the codelab's idle shutdown) and for the image kept in Artifact Registry; the
estimate adds both into a whole-lab figure (`LabEstimate`). Next to every figure the text says
where its price comes from: the page and the date it was read, or "not read from the pricing
page" (issue 19). Spot VMs (``scheduling.strategy``) are not in the table: named as not covered.

CLI::

    python -m labkit cost FILE.json --hours 0.5 [--instance-hours 2 --image-gb 4]
    python -m labkit cost --codelab          # the codelab's section-7 spec beside its "about 5 USD"
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from labkit.cloud.specs import (
    NO_ACCELERATOR,
    POOL_ROLES,
    PRICE_FILE,
    PriceTable,
    SpecFileError,
    as_int,
    load_document,
    load_price_table,
    pools_of,
    snake_keys,
)
from labkit.i18n import gettext, text_table

__all__ = [
    "PRICE_FILE",
    "CostEstimate",
    "CostLine",
    "LabEstimate",
    "PriceTable",
    "codelab_section7_specs",
    "estimate_cost",
    "load_price_table",
]

DEFAULT_INSTANCE_HOURS = 2.0  # assumed: reading and running the notebooks, plus idle shutdown
DEFAULT_IMAGE_GB = 4.0  # assumed: the kit's image on tensorflow/tensorflow:*-gpu, compressed
DEFAULT_STORAGE_MONTHS = 1.0


@dataclasses.dataclass(frozen=True)
class CostLine:
    """One priced item: a pool's machines, or a pool's GPUs."""

    pool: int
    role: str
    item: str
    kind: str  # "machine" or "accelerator"
    quantity: int  # machines, or GPUs across the pool's machines
    unit_price: float  # per hour, per machine or per GPU
    hours: float

    @property
    def per_hour(self) -> float:
        return self.quantity * self.unit_price

    @property
    def total(self) -> float:
        return self.per_hour * self.hours


@dataclasses.dataclass(frozen=True)
class LabEstimate:
    """The whole lab: the Workbench instance's hours + the job + the image's storage."""

    job_total: float
    instance_hours: float
    image_gb: float
    storage_months: float
    table: PriceTable

    @property
    def instance_per_hour(self) -> float:
        return float(self.table.workbench["per_hour"])

    @property
    def instance_total(self) -> float:
        return self.instance_per_hour * self.instance_hours

    @property
    def storage_total(self) -> float:
        ar = self.table.artifact_registry
        billable = max(self.image_gb - float(ar["free_gb"]), 0.0)
        return billable * float(ar["per_gb_month"]) * self.storage_months

    @property
    def total(self) -> float:
        return self.job_total + self.instance_total + self.storage_total

    @property
    def mixed_provenance(self) -> str:
        """The whole-lab sum's caveat: its parts' provenances differ."""
        return gettext("{read}, except the image storage's price").format(
            read=gettext(self.table.training_read)
        )

    def to_dict(self) -> dict[str, Any]:
        wb, ar = self.table.workbench, self.table.artifact_registry
        return {
            "instance": {
                "machine_type": wb["machine_type"],
                "idle_shutdown_minutes": wb["idle_shutdown_minutes"],
                "per_hour": self.instance_per_hour,
                "hours": self.instance_hours,
                "total": self.instance_total,
                "source": wb["source"],
                "read": wb["read"],
            },
            "image_storage": {
                "gb": self.image_gb,
                "months": self.storage_months,
                "total": self.storage_total,
                "source": ar["source"],
                "read": ar["read"],
            },
            "job_total": self.job_total,
            "total": self.total,
        }

    def __str__(self) -> str:
        t, cur = self.table, self.table.currency
        wb, ar = t.workbench, t.artifact_registry
        return "\n".join(
            [
                gettext("Whole lab (ESTIMATE):"),
                gettext(
                    "  Workbench instance {machine} (idle shutdown after {idle} min): "
                    "{rate:.4f} {cur}/h x {hours:g} h = {total:.2f} {cur} [{read}]"
                ).format(
                    machine=wb["machine_type"],
                    idle=wb["idle_shutdown_minutes"],
                    rate=self.instance_per_hour,
                    cur=cur,
                    hours=self.instance_hours,
                    total=self.instance_total,
                    read=gettext(wb["read"]),
                ),
                gettext("  Training job (above): {total:.2f} {cur} [{read}]").format(
                    total=self.job_total, cur=cur, read=gettext(t.training_read)
                ),
                gettext(
                    "  Artifact Registry storage of the image: {gb:g} GB, first {free:g} GB free, "
                    "{rate:.2f} {cur}/GB-month x {months:g} month = {total:.2f} {cur} [{read}]"
                ).format(
                    gb=self.image_gb,
                    free=float(ar["free_gb"]),
                    rate=float(ar["per_gb_month"]),
                    cur=cur,
                    months=self.storage_months,
                    total=self.storage_total,
                    read=gettext(ar["read"]),
                ),
                gettext(
                    "  Whole lab: {total:.2f} {cur} (instance hours and image size are "
                    "assumptions: pass your own) [{mixed}]"
                ).format(total=self.total, cur=cur, mixed=self.mixed_provenance),
            ]
        )


@dataclasses.dataclass(frozen=True)
class CostEstimate:
    lines: tuple[CostLine, ...]
    hours: float
    table: PriceTable
    spot: bool = False  # the spec asked for Spot VMs (scheduling.strategy SPOT)
    codelab_spec: bool = False  # the codelab's section-7 spec (2 pools of n1-standard-8 + V100)

    def lab(
        self,
        instance_hours: float = DEFAULT_INSTANCE_HOURS,
        image_gb: float = DEFAULT_IMAGE_GB,
        storage_months: float = DEFAULT_STORAGE_MONTHS,
    ) -> LabEstimate:
        """This job inside the whole lab (instance hours + image storage)."""
        return LabEstimate(self.total, instance_hours, image_gb, storage_months, self.table)

    @property
    def per_hour(self) -> float:
        return sum(line.per_hour for line in self.lines)

    @property
    def total(self) -> float:
        return sum(line.total for line in self.lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimate": True,
            "region": self.table.region,
            "currency": self.table.currency,
            "prices_read": self.table.prices_read,
            "prices_provenance": self.table.training_read,
            "spot": self.table.spot,
            "lab": self.lab().to_dict(),
            "hours": self.hours,
            "per_hour": self.per_hour,
            "total": self.total,
            "lines": [
                {**dataclasses.asdict(line), "per_hour": line.per_hour, "total": line.total}
                for line in self.lines
            ],
        }

    def __str__(self) -> str:
        t = self.table
        cur = t.currency
        head = gettext(
            "ESTIMATE, not a bill: Vertex AI custom training list prices for {region} from the "
            "kit's table of {read} (labkit/cloud/prices.json), meant to match the {source}: "
            "{provenance}."
        ).format(
            region=t.region,
            read=t.prices_read,
            source=gettext(t.source),
            provenance=gettext(t.training_read),
        )
        tag = gettext("[{provenance}]").format(provenance=gettext(t.training_read))
        cells = [
            [line.pool, gettext(line.role)[:8], line.item, line.quantity]
            + [f"{line.unit_price:.4f}", f"{line.per_hour:.4f}", f"{line.total:.2f}", tag]
            for line in self.lines
        ]
        cells.append(["", "", gettext("sum"), "", "", f"{self.per_hour:.4f}"])
        cells[-1] += [f"{self.total:.2f}", tag]
        rows = text_table(
            [gettext("pool"), gettext("role"), gettext("item"), gettext("qty")]
            + [gettext("unit/h"), gettext("per hour"), gettext("total"), ""],
            cells,
            align="<<<>>>><",
            sep=" ",
            min_widths=(4, 8, 20, 4, 10, 10, 10, 0),  # the layout notebook 04's reference pins
        ).splitlines()
        tail = [
            gettext(
                "Estimated total for {hours:g} h: {total:.2f} {cur} ({per_hour:.4f} {cur} per "
                "hour). {tag}"
            ).format(hours=self.hours, total=self.total, cur=cur, per_hour=self.per_hour, tag=tag),
            gettext("Not included: {excludes}.").format(excludes=gettext(t.excludes)),
            (gettext("This spec asks for Spot VMs. ") if self.spot else "") + gettext(t.spot),
        ]
        lab = self.lab()
        tail.append(str(lab))
        if self.codelab_spec and t.codelab:
            tail.append(
                gettext(
                    "The codelab says about {says} {cur} for the whole lab; this estimate of "
                    "the whole lab: {total:.2f} {cur} [{mixed}]."
                ).format(
                    says=t.codelab["says_total_usd"],
                    cur=cur,
                    total=lab.total,
                    mixed=lab.mixed_provenance,
                )
            )
        return "\n".join([head, *rows, *tail])


def estimate_cost(doc: Any, hours: float, table: PriceTable | None = None) -> CostEstimate:
    """Itemised estimate for a spec document (pool list or dict) running ``hours`` hours.

    Every replica of every pool is billed for the whole duration, as on Vertex, where the
    cluster is held until the job ends.
    """
    if not isinstance(hours, (int, float)) or hours <= 0:
        raise ValueError(f"hours is {hours!r}: give the expected duration in hours, e.g. 0.5.")
    table = table or load_price_table()
    lines: list[CostLine] = []
    for i, raw in enumerate(pools_of(doc)):
        pool = snake_keys(raw) if isinstance(raw, dict) else {}
        if not pool:
            continue
        role = POOL_ROLES[i] if i < len(POOL_ROLES) else f"pool {i}"
        replicas = as_int(pool.get("replica_count"))
        machine = (pool.get("machine_spec") or {}).get("machine_type")
        if not replicas or replicas < 1 or not machine:
            raise ValueError(
                f"worker_pool_specs[{i}] has no replica_count or machine_type to price. Fix: run "
                "`python -m labkit spec validate` first."
            )
        lines.append(
            CostLine(i, role, machine, "machine", replicas, table.machine_price(machine), hours)
        )
        accel = pool["machine_spec"].get("accelerator_type")
        count = as_int(pool["machine_spec"].get("accelerator_count", 0)) or 0
        if accel and accel != NO_ACCELERATOR and count:
            lines.append(
                CostLine(
                    i,
                    role,
                    accel,
                    "accelerator",
                    replicas * count,
                    table.accelerator_price(accel),
                    hours,
                )
            )
    if not lines:
        raise ValueError("the spec has no pools to price. Fix: add pool 0, the chief.")
    return CostEstimate(
        tuple(lines), float(hours), table, _asks_for_spot(doc), _is_codelab_spec(doc, table)
    )


def _asks_for_spot(doc: Any) -> bool:
    if not isinstance(doc, dict):
        return False
    scheduling = snake_keys(doc).get("scheduling") or {}
    return str(scheduling.get("strategy", "")).upper() == "SPOT"


def _is_codelab_spec(doc: Any, table: PriceTable) -> bool:
    """Two pools of one replica each, each the codelab's section-7 machine and GPU."""
    if not table.codelab:
        return False
    want = table.codelab["section7_pool"]
    pools = [snake_keys(p) for p in pools_of(doc) if isinstance(p, dict) and p]
    return len(pools) == table.codelab["section7_pools"] and all(
        as_int(p.get("replica_count")) == 1
        and {k: (p.get("machine_spec") or {}).get(k) for k in want}
        == {k: v for k, v in want.items()}
        for p in pools
    )


def codelab_section7_specs(image_uri: str = "gcr.io/PROJECT/multiworker:cassava") -> list[dict]:
    """The codelab's section-7 worker pool specs: chief + 1 worker, n1-standard-8 + 1 V100."""
    want = load_price_table().codelab["section7_pool"]
    pool = {
        "replica_count": 1,
        "machine_spec": dict(want),
        "container_spec": {"image_uri": image_uri},
    }
    return [pool, json.loads(json.dumps(pool))]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labkit cost", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "file", nargs="?", help="JSON: a list of pools, or {'worker_pool_specs': [...], ...}"
    )
    parser.add_argument(
        "--codelab",
        action="store_true",
        help="price the codelab's section-7 spec (2 pools of n1-standard-8 + 1 V100) instead",
    )
    parser.add_argument("--hours", type=float, default=None, help="expected job duration in hours")
    parser.add_argument(
        "--instance-hours",
        type=float,
        default=DEFAULT_INSTANCE_HOURS,
        help=f"hours the Workbench instance runs (default {DEFAULT_INSTANCE_HOURS:g})",
    )
    parser.add_argument(
        "--image-gb",
        type=float,
        default=DEFAULT_IMAGE_GB,
        help=f"size of the image in Artifact Registry (default {DEFAULT_IMAGE_GB:g} GB)",
    )
    parser.add_argument(
        "--prices", help="another price table (JSON, same layout as labkit/cloud/prices.json)"
    )
    parser.add_argument("--json", action="store_true", help="print the estimate as JSON")
    ns = parser.parse_args(argv)
    if bool(ns.file) == ns.codelab:
        parser.error("give a spec FILE or --codelab (one of them)")
    hours = ns.hours if ns.hours is not None else (0.5 if ns.codelab else None)
    if hours is None:
        parser.error("--hours is required with a spec FILE (the expected job duration)")
    try:
        table = load_price_table(ns.prices)
        doc = codelab_section7_specs() if ns.codelab else load_document(ns.file)
        estimate = estimate_cost(doc, hours, table)
    except (SpecFileError, ValueError, KeyError) as err:
        message = err.args[0] if isinstance(err, KeyError) else str(err)
        print(f"error: {message}", file=sys.stderr)
        return 2
    lab = estimate.lab(ns.instance_hours, ns.image_gb)
    if ns.json:
        print(json.dumps({**estimate.to_dict(), "lab": lab.to_dict()}, indent=2))
        return 0
    text = str(estimate)
    print(text.replace(str(estimate.lab()), str(lab)))
    return 0
