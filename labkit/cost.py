"""What a worker pool spec costs for an expected duration: an itemised ESTIMATE.

The codelab says "about 5 USD" once and never shows how a configuration adds up. Here every
machine and every GPU is a line (replicas x unit price), priced from the table in
``labkit/prices.json``, which names its region and the date the prices were read. The output
always says it is an estimate and what it leaves out. The table and the machine catalog live
in `labkit.specs` (the job-spec core), so a spec that validates is a spec this can price.

CLI::

    python -m labkit cost FILE.json --hours 0.5
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from labkit.i18n import gettext
from labkit.specs import (
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

__all__ = [
    "PRICE_FILE",
    "CostEstimate",
    "CostLine",
    "PriceTable",
    "estimate_cost",
    "load_price_table",
]


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
class CostEstimate:
    lines: tuple[CostLine, ...]
    hours: float
    table: PriceTable

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
            "ESTIMATE, not a bill: Vertex AI custom training list prices for {region}, "
            "read {read} ({source})."
        ).format(region=t.region, read=t.prices_read, source=t.source)
        rows = [
            f"{'pool':<4} {'role':<8} {'item':<20} {'qty':>4} {'unit/h':>10} {'per hour':>10} {'total':>10}"
        ]
        for line in self.lines:
            rows.append(
                f"{line.pool:<4} {line.role[:8]:<8} {line.item:<20} {line.quantity:>4} "
                f"{line.unit_price:>10.4f} {line.per_hour:>10.4f} {line.total:>10.2f}"
            )
        rows.append(
            f"{'':<4} {'':<8} {'sum':<20} {'':>4} {'':>10} {self.per_hour:>10.4f} "
            f"{self.total:>10.2f}"
        )
        tail = [
            gettext(
                "Estimated total for {hours:g} h: {total:.2f} {cur} ({per_hour:.4f} {cur} per hour)."
            ).format(hours=self.hours, total=self.total, cur=cur, per_hour=self.per_hour),
            gettext("Not included: {excludes}.").format(excludes=t.excludes),
        ]
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
    return CostEstimate(tuple(lines), float(hours), table)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labkit cost", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("file", help="JSON: a list of pools, or {'worker_pool_specs': [...], ...}")
    parser.add_argument("--hours", type=float, required=True, help="expected job duration in hours")
    parser.add_argument(
        "--prices", help="another price table (JSON, same layout as labkit/prices.json)"
    )
    parser.add_argument("--json", action="store_true", help="print the estimate as JSON")
    ns = parser.parse_args(argv)
    try:
        table = load_price_table(ns.prices)
        estimate = estimate_cost(load_document(ns.file), ns.hours, table)
    except (SpecFileError, ValueError, KeyError) as err:
        message = err.args[0] if isinstance(err, KeyError) else str(err)
        print(f"error: {message}", file=sys.stderr)
        return 2
    print(json.dumps(estimate.to_dict(), indent=2) if ns.json else estimate)
    return 0
