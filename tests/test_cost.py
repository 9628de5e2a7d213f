"""Cost estimates: the codelab's two configurations, worked out by hand from the price table."""

from __future__ import annotations

import datetime
import json
import math

import pytest

from labkit.cloud import cost
from labkit.cloud.specs import KNOWN_ACCELERATORS, build_worker_pool_specs

AR_IMAGE = "us-central1-docker.pkg.dev/cassava-lab-4711/cassava-lab/multiworker:cassava"

# The figures of labkit/cloud/prices.json this test's hand computations use. If the table is
# re-read and changes, this test fails until the worked examples below are redone.
N1_STANDARD_4 = 0.21849885
N1_STANDARD_8 = 0.4369977
V100 = 2.852


@pytest.fixture(scope="module")
def table() -> cost.PriceTable:
    return cost.load_price_table()


def test_price_table_is_consistent_with_itself_and_the_core(table):
    """Properties a mistyped or half-updated table breaks: N1 predefined machines are
    priced per vCPU and GB, so each size is twice the one below it; every priced GPU is one
    the job-spec core accepts; the date is a real date; the worked examples' figures below
    are the table's."""

    n1 = sorted(
        (int(name.rsplit("-", 1)[1]), price)
        for name, price in table.machine_types.items()
        if name.startswith("n1-standard-")
    )
    assert len(n1) >= 3
    for (small, p_small), (big, p_big) in zip(n1[:-1], n1[1:], strict=True):
        assert math.isclose(p_big / p_small, big / small, rel_tol=1e-6), (small, big)
    assert all(price > 0 for price in [*table.machine_types.values(), *table.accelerators.values()])
    misspelled = sorted(set(table.accelerators) - KNOWN_ACCELERATORS)
    assert not misspelled, f"priced GPUs the job-spec core does not know: {misspelled}"
    datetime.date.fromisoformat(table.prices_read)
    assert table.region == "us-central1" and table.currency == "USD"
    assert table.machine_types["n1-standard-4"] == N1_STANDARD_4
    assert table.machine_types["n1-standard-8"] == N1_STANDARD_8
    assert table.accelerators["NVIDIA_TESLA_V100"] == V100


def test_codelab_console_config_two_n1_standard_4_cpu_machines(table):
    specs = build_worker_pool_specs(AR_IMAGE, workers=1, machine_type="n1-standard-4")
    estimate = cost.estimate_cost(specs, hours=0.5, table=table)
    # by hand: 2 machines x $0.21849885/h = $0.4369977/h; x 0.5 h = $0.21849885
    assert math.isclose(estimate.per_hour, 0.4369977, abs_tol=1e-9)
    assert math.isclose(estimate.total, 0.21849885, abs_tol=1e-9)
    assert [(line.role, line.item, line.kind, line.quantity) for line in estimate.lines] == [
        ("chief", "n1-standard-4", "machine", 1),
        ("worker", "n1-standard-4", "machine", 1),
    ]


def test_codelab_sdk_config_n1_standard_8_with_one_v100_each(table):
    specs = build_worker_pool_specs(
        AR_IMAGE,
        workers=1,
        machine_type="n1-standard-8",
        accelerator_type="NVIDIA_TESLA_V100",
        accelerator_count=1,
    )
    estimate = cost.estimate_cost(specs, hours=0.5, table=table)
    # by hand: per machine 0.4369977 + 2.852 = 3.2889977 $/h; two machines 6.5779954 $/h;
    # half an hour (the codelab's 30-35 minutes) 3.2889977 $
    assert math.isclose(estimate.per_hour, 6.5779954, abs_tol=1e-9)
    assert math.isclose(estimate.total, 3.2889977, abs_tol=1e-9)
    assert [(line.pool, line.item, line.quantity, line.unit_price) for line in estimate.lines] == [
        (0, "n1-standard-8", 1, N1_STANDARD_8),
        (0, "NVIDIA_TESLA_V100", 1, V100),
        (1, "n1-standard-8", 1, N1_STANDARD_8),
        (1, "NVIDIA_TESLA_V100", 1, V100),
    ]


def test_replicas_and_gpus_per_machine_multiply(table):
    specs = build_worker_pool_specs(
        AR_IMAGE,
        workers=3,
        machine_type="n1-standard-16",
        accelerator_type="NVIDIA_TESLA_V100",
        accelerator_count=2,
    )
    estimate = cost.estimate_cost(specs, hours=2, table=table)
    worker_gpus = [line for line in estimate.lines if line.pool == 1 and line.kind == "accelerator"]
    assert worker_gpus[0].quantity == 6  # 3 workers x 2 GPUs
    # 4 machines x (0.8739954 + 2 x 2.852) x 2 h
    assert math.isclose(estimate.total, 4 * (0.8739954 + 2 * V100) * 2, abs_tol=1e-9)


def test_the_text_says_estimate_region_date_and_what_is_left_out(table):
    specs = build_worker_pool_specs(AR_IMAGE, workers=1)
    text = str(cost.estimate_cost(specs, hours=0.5, table=table))
    assert text.startswith("ESTIMATE")
    assert "us-central1" in text and "2026-12-02" in text
    assert "Estimated total for 0.5 h: 0.22 USD" in text
    assert "Not included: boot disks" in text


def test_every_figure_carries_its_provenance(table):
    """Issue 19: the caveat is printed where each figure is shown, not only in the JSON."""
    text = str(cost.estimate_cost(build_worker_pool_specs(AR_IMAGE, workers=1), 0.5, table=table))
    figures = [line for line in text.splitlines() if any(ch.isdigit() for ch in line)]
    for line in figures:
        if line.startswith(("ESTIMATE", "Whole lab (ESTIMATE)")):
            continue
        assert "not read from the pricing page" in line or "pricing page, read 2026-12-04" in (
            line
        ), line
    assert "Spot VMs (scheduling.strategy = SPOT)" in text and "not covered" in text


def test_whole_lab_adds_the_workbench_instance_and_the_image_storage(table):
    estimate = cost.estimate_cost(build_worker_pool_specs(AR_IMAGE, workers=1), 0.5, table=table)
    lab = estimate.lab(instance_hours=3, image_gb=5.5)
    # by hand: instance 0.189999 x 3; storage (5.5 - 0.5) GB x 0.10 x 1 month; job 0.21849885
    assert math.isclose(lab.instance_total, 0.189999 * 3, abs_tol=1e-9)
    assert math.isclose(lab.storage_total, 0.5, abs_tol=1e-9)
    assert math.isclose(lab.total, 0.189999 * 3 + 0.5 + 2 * N1_STANDARD_4 * 0.5, abs_tol=1e-9)
    text = str(lab)
    assert "Workbench instance n1-standard-4 (idle shutdown after 60 min): 0.1900 USD/h" in text
    assert "Artifact Registry pricing page, read 2026-12-04" in text
    assert (
        cost.estimate_cost(build_worker_pool_specs(AR_IMAGE), 1, table=table)
        .lab(image_gb=0.4)
        .storage_total
        == 0
    )  # under the free 0.5 GB


def test_codelab_section7_spec_is_shown_beside_its_about_5_usd(table, capsys):
    estimate = cost.estimate_cost(cost.codelab_section7_specs(), hours=0.5, table=table)
    assert estimate.codelab_spec
    # by hand: 2 x (0.4369977 + 2.852) x 0.5 h = 3.2889977
    assert math.isclose(estimate.total, 2 * (N1_STANDARD_8 + V100) * 0.5, abs_tol=1e-9)
    lab_total = estimate.total + 0.189999 * 2 + 3.5 * 0.10
    assert (
        f"The codelab says about 5 USD for the whole lab; this estimate of the whole lab: "
        f"{lab_total:.2f} USD [not read from the pricing page, except the image storage's price]."
        in str(estimate)
    )
    assert cost.main(["--codelab"]) == 0
    out = capsys.readouterr().out
    assert "n1-standard-8" in out and "NVIDIA_TESLA_V100" in out and "about 5 USD" in out
    assert not cost.estimate_cost(
        build_worker_pool_specs(AR_IMAGE, workers=1), 0.5, table=table
    ).codelab_spec


def test_spot_strategy_is_named_as_not_covered(table):
    doc = {
        "worker_pool_specs": build_worker_pool_specs(AR_IMAGE),
        "scheduling": {"strategy": "SPOT"},
    }
    text = str(cost.estimate_cost(doc, 1, table=table))
    assert "This spec asks for Spot VMs. Spot VMs (scheduling.strategy = SPOT)" in text


def test_placeholder_pools_cost_nothing_and_camel_case_is_read(table):
    rest = [
        {
            "replicaCount": "1",
            "machineSpec": {"machineType": "n1-standard-4"},
            "containerSpec": {"imageUri": AR_IMAGE},
        },
        {},
    ]
    estimate = cost.estimate_cost({"workerPoolSpecs": rest}, hours=1, table=table)
    assert math.isclose(estimate.total, N1_STANDARD_4, abs_tol=1e-9)


def test_unknown_prices_and_bad_durations_fail_clearly(table):
    with pytest.raises(KeyError, match="a2-highgpu-1g.*labkit/cloud/prices.json"):
        cost.estimate_cost(
            build_worker_pool_specs(
                AR_IMAGE,
                machine_type="a2-highgpu-1g",
                accelerator_type="NVIDIA_TESLA_A100",
                accelerator_count=1,
            ),
            hours=1,
            table=table,
        )
    with pytest.raises(ValueError, match="hours"):
        cost.estimate_cost(build_worker_pool_specs(AR_IMAGE), hours=0, table=table)
    with pytest.raises(ValueError, match="validate"):
        cost.estimate_cost([{"replica_count": 1}], hours=1, table=table)


def test_cli_prints_the_estimate_and_json(tmp_path, capsys):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"worker_pool_specs": build_worker_pool_specs(AR_IMAGE, workers=1)}))
    assert cost.main([str(path), "--hours", "0.5"]) == 0
    assert "Estimated total for 0.5 h: 0.22 USD" in capsys.readouterr().out
    assert cost.main([str(path), "--hours", "0.5", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["estimate"] is True and data["region"] == "us-central1"
    assert math.isclose(data["total"], 0.21849885, abs_tol=1e-9)
    assert cost.main([str(tmp_path / "nope.json"), "--hours", "1"]) == 2
