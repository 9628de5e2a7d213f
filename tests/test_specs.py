"""Worker pool specs: the builder's output, and every rejection issue 4 lists."""

from __future__ import annotations

import copy
import inspect
import json
import subprocess
import sys

import pytest

from labkit.cloud import specs
from labkit.cloud.settings import Settings
from labkit.cloud.specs import (
    Problem,
    build_worker_pool_specs,
    validate_document,
    validate_worker_pool_specs,
)

AR_IMAGE = "us-central1-docker.pkg.dev/cassava-lab-4711/cassava-lab/multiworker:cassava"

# The codelab's SDK spec exactly as printed (section 7): placeholder project, gcr.io image.
CODELAB_SDK_SPEC = [
    {
        "replica_count": 1,
        "machine_spec": {
            "machine_type": "n1-standard-8",
            "accelerator_type": "NVIDIA_TESLA_V100",
            "accelerator_count": 1,
        },
        "container_spec": {"image_uri": "gcr.io/{YOUR-PROJECT-ID}/multiworker:cassava"},
    },
    {
        "replica_count": 1,
        "machine_spec": {
            "machine_type": "n1-standard-8",
            "accelerator_type": "NVIDIA_TESLA_V100",
            "accelerator_count": 1,
        },
        "container_spec": {"image_uri": "gcr.io/{YOUR-PROJECT-ID}/multiworker:cassava"},
    },
]


def cpu_pool(replicas: int = 1, machine: str = "n1-standard-4") -> dict:
    return {
        "replica_count": replicas,
        "machine_spec": {"machine_type": machine},
        "container_spec": {"image_uri": AR_IMAGE},
    }


def gpu_pool(machine: str, accel: str | None, count: int | None, replicas: int = 1) -> dict:
    machine_spec: dict = {"machine_type": machine}
    if accel is not None:
        machine_spec["accelerator_type"] = accel
    if count is not None:
        machine_spec["accelerator_count"] = count
    return {
        "replica_count": replicas,
        "machine_spec": machine_spec,
        "container_spec": {"image_uri": AR_IMAGE},
    }


def fields(problems: list[Problem]) -> list[str]:
    return [p.field for p in problems]


# --------------------------------------------------------------------------- the codelab


def test_codelab_sdk_spec_is_rejected_for_exactly_its_placeholder_project():
    """Issue 19: the placeholder is refused by name; gcr.io itself gets one note, not a refusal."""
    problems = validate_worker_pool_specs(copy.deepcopy(CODELAB_SDK_SPEC))
    assert fields(problems) == [f"worker_pool_specs[{i}].container_spec.image_uri" for i in (0, 1)]
    for placeholder in problems:
        assert "{YOUR-PROJECT-ID}" in placeholder.message and "project id" in placeholder.message
        assert "gcloud config list" in placeholder.fix
    (note,) = specs.image_notes(CODELAB_SDK_SPEC)  # one note for both pools
    assert "Artifact Registry gcr.io repository" in note and "2025-03-18" in note


def test_codelab_configurations_pass_once_project_and_artifact_registry_image_are_filled_in():
    fixed = json.loads(
        json.dumps(CODELAB_SDK_SPEC).replace(
            "gcr.io/{YOUR-PROJECT-ID}/multiworker:cassava", AR_IMAGE
        )
    )
    assert validate_worker_pool_specs(fixed) == []  # n1-standard-8 + one V100 each
    assert (
        validate_worker_pool_specs([cpu_pool(), cpu_pool()]) == []
    )  # the console's two CPU machines


def test_codelab_document_with_placeholder_staging_bucket_names_the_bucket():
    doc = {"worker_pool_specs": [cpu_pool(), cpu_pool()], "staging_bucket": "gs://{YOUR_BUCKET}"}
    (problem,) = validate_document(doc)
    assert problem.field == "staging_bucket" and "bucket" in problem.message


# --------------------------------------------------------------------------- each rejection


def test_pool_zero_must_have_exactly_one_replica():
    (problem,) = validate_worker_pool_specs([cpu_pool(replicas=2), cpu_pool()])
    assert problem.field == "worker_pool_specs[0].replica_count"
    assert "chief" in problem.message and "pool 1" in problem.fix


def test_replica_count_as_rest_string_is_accepted_and_missing_one_is_not():
    pool = cpu_pool()
    pool["replica_count"] = "1"
    assert validate_worker_pool_specs([pool]) == []
    del pool["replica_count"]
    assert fields(validate_worker_pool_specs([pool])) == ["worker_pool_specs[0].replica_count"]


def test_workers_with_a_different_gpu_count_from_the_chief_break_mwms():
    spec = [
        gpu_pool("n1-standard-8", "NVIDIA_TESLA_T4", 1),
        gpu_pool("n1-standard-8", "NVIDIA_TESLA_T4", 2),
    ]
    (problem,) = validate_worker_pool_specs(spec)
    assert problem.field == "worker_pool_specs[1].machine_spec.accelerator_count"
    assert "MultiWorkerMirroredStrategy" in problem.message
    # a CPU chief with GPU workers is the same mistake
    assert fields(
        validate_worker_pool_specs([cpu_pool(), gpu_pool("n1-standard-8", "NVIDIA_TESLA_T4", 1)])
    ) == ["worker_pool_specs[1].machine_spec.accelerator_count"]


@pytest.mark.parametrize(
    "gpu", ["NVIDIA_TESLA_T4", "NVIDIA_TESLA_P4", "NVIDIA_TESLA_P100", "NVIDIA_TESLA_V100"]
)
def test_n1_takes_its_four_gpus(gpu):
    assert validate_worker_pool_specs([gpu_pool("n1-standard-8", gpu, 1)]) == []


@pytest.mark.parametrize(
    "gpu", ["NVIDIA_TESLA_A100", "NVIDIA_A100_80GB", "NVIDIA_H100_80GB", "NVIDIA_L4"]
)
def test_n1_refuses_a100_h100_l4(gpu):
    (problem,) = validate_worker_pool_specs([gpu_pool("n1-standard-8", gpu, 1)])
    assert problem.field == "worker_pool_specs[0].machine_spec.accelerator_type"
    assert "N1" in problem.message


def test_n1_gpu_counts_and_vcpu_limits():
    (bad_count,) = validate_worker_pool_specs([gpu_pool("n1-standard-8", "NVIDIA_TESLA_T4", 3)])
    assert bad_count.field.endswith("accelerator_count") and "[1, 2, 4]" in bad_count.fix
    (too_big,) = validate_worker_pool_specs([gpu_pool("n1-standard-16", "NVIDIA_TESLA_V100", 1)])
    assert too_big.field.endswith("machine_type") and "12" in too_big.message
    assert validate_worker_pool_specs([gpu_pool("n1-standard-16", "NVIDIA_TESLA_V100", 2)]) == []


@pytest.mark.parametrize(
    "machine, gpu, count",
    [
        ("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1),
        ("a2-highgpu-8g", "NVIDIA_TESLA_A100", 8),
        ("a2-megagpu-16g", "NVIDIA_TESLA_A100", 16),
        ("a2-ultragpu-2g", "NVIDIA_A100_80GB", 2),
        ("a3-highgpu-8g", "NVIDIA_H100_80GB", 8),
        ("a3-megagpu-8g", "NVIDIA_H100_MEGA_80GB", 8),
        ("a3-ultragpu-8g", "NVIDIA_H200_141GB", 8),
        ("g2-standard-8", "NVIDIA_L4", 1),
        ("g2-standard-24", "NVIDIA_L4", 2),
        ("g2-standard-96", "NVIDIA_L4", 8),
    ],
)
def test_accelerator_optimized_shapes_with_their_own_gpus_pass(machine, gpu, count):
    problems = validate_worker_pool_specs([gpu_pool(machine, gpu, count)])
    assert [p for p in problems if p.vertex_rejects] == []
    # Vertex takes them; the kit says so when it has no checked price for them.
    assert all("no checked price" in p.message for p in problems)


def test_every_catalog_machine_is_validated_and_priced_or_refused_with_a_message():
    """Issue 15: no spec that validates can make `labkit cost` fail."""
    from labkit.cloud.cost import estimate_cost

    priced = unpriced = 0
    for machine, gpu, count in specs.machine_catalog():
        pool = gpu_pool(machine, gpu, count) if gpu else {**gpu_pool(machine, None, None)}
        problems = validate_worker_pool_specs([pool])
        assert [p for p in problems if p.vertex_rejects] == [], (machine, gpu, count)
        if problems:
            unpriced += 1
            assert all(not p.vertex_rejects and "no checked price" in p.message for p in problems)
            assert all("labkit/cloud/prices.json" in p.fix for p in problems)
            continue
        estimate = estimate_cost([pool], 1.0)
        assert estimate.total > 0, (machine, gpu, count)
        priced += 1
    table = specs.load_price_table()
    assert priced >= len(table.machine_types) + 40  # every CPU machine and the N1 GPU shapes
    # every machine in the table, and every N1 + GPU pairing, is priced
    for machine in table.machine_types:
        assert validate_worker_pool_specs([gpu_pool(machine, None, None)]) == [], machine
    assert unpriced <= len(specs.ATTACHED_GPUS)


def test_problem_paths_are_rest_camel_case_and_spec_error_carries_them():
    problems = validate_worker_pool_specs(
        [gpu_pool("n1-standard-4", None, None), gpu_pool("n1-standard-4", "NVIDIA_H100_80GB", 1)]
    )
    paths = {p.path for p in problems}
    assert "workerPoolSpecs[1].machineSpec.acceleratorType" in paths
    err = specs.SpecError(problems)
    assert err.problems == problems and "N1" in str(err)


def test_rest_custom_job_and_training_pipeline_bodies():
    pool = {
        "replicaCount": "1",
        "machineSpec": {"machineType": "n1-standard-4"},
        "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/i:1"},
    }
    job = {"displayName": "j", "jobSpec": {"workerPoolSpecs": [pool, {}]}}
    assert specs.validate_custom_job(job) == []
    bad = specs.validate_custom_job({"jobSpec": {"scheduling": {"timeout": "soon"}}})
    assert {p.field for p in bad} >= {"display_name", "job_spec.worker_pool_specs"}
    pipeline = {
        "displayName": "p",
        "trainingTaskDefinition": specs.CUSTOM_TASK_SCHEMA,
        "trainingTaskInputs": {  # the SDK writes the Struct in snake_case, numbers as doubles
            "worker_pool_specs": [
                {
                    "replica_count": 1.0,
                    "machine_spec": {
                        "machine_type": "n1-standard-4",
                        "accelerator_type": "ACCELERATOR_TYPE_UNSPECIFIED",
                        "accelerator_count": 0.0,
                    },
                    "container_spec": {"image_uri": "x-docker.pkg.dev/p/r/i"},
                }
            ],
            "base_output_directory": {"output_uri_prefix": "gs://b/out"},
        },
    }
    assert specs.validate_training_pipeline(pipeline) == []
    wrong = specs.validate_training_pipeline({**pipeline, "trainingTaskDefinition": "x"})
    assert [p.field for p in wrong] == ["training_task_definition"]
    assert specs.CUSTOM_TASK_SCHEMA in wrong[0].fix


@pytest.mark.parametrize(
    "machine, gpu, count, field_end, words",
    [
        ("a2-highgpu-1g", "NVIDIA_TESLA_V100", 1, "accelerator_type", "NVIDIA_TESLA_A100"),
        ("a2-ultragpu-1g", "NVIDIA_TESLA_A100", 1, "accelerator_type", "NVIDIA_A100_80GB"),
        ("a2-highgpu-2g", "NVIDIA_TESLA_A100", 1, "accelerator_count", "exactly 2"),
        ("a3-highgpu-8g", "NVIDIA_TESLA_A100", 8, "accelerator_type", "NVIDIA_H100_80GB"),
        ("a3-highgpu-2g", "NVIDIA_H100_80GB", 8, "accelerator_count", "exactly 2"),
        ("g2-standard-8", "NVIDIA_TESLA_T4", 1, "accelerator_type", "NVIDIA_L4"),
        ("g2-standard-24", "NVIDIA_L4", 1, "accelerator_count", "exactly 2"),
        ("a2-highgpu-1g", None, None, "accelerator_type", "NVIDIA_TESLA_A100"),
        ("a2-highgpu-3g", "NVIDIA_TESLA_A100", 3, "machine_type", "a2-highgpu-1g"),
        ("e2-standard-4", "NVIDIA_TESLA_T4", 1, "accelerator_type", "takes no GPUs"),
    ],
)
def test_wrong_family_pairings_are_rejected(machine, gpu, count, field_end, words):
    (problem,) = validate_worker_pool_specs([gpu_pool(machine, gpu, count)])
    assert problem.field == f"worker_pool_specs[0].machine_spec.{field_end}"
    assert words in str(problem)


def test_every_accelerator_the_validator_knows_is_a_real_sdk_enum():
    from google.cloud.aiplatform_v1.types import AcceleratorType

    unknown = specs.KNOWN_ACCELERATORS - set(AcceleratorType.__members__)
    assert not unknown


def test_missing_machine_type_and_count_without_type():
    pool = cpu_pool()
    pool["machine_spec"] = {}
    assert fields(validate_worker_pool_specs([pool])) == [
        "worker_pool_specs[0].machine_spec.machine_type"
    ]
    (problem,) = validate_worker_pool_specs([gpu_pool("n1-standard-8", None, 2)])
    assert problem.field == "worker_pool_specs[0].machine_spec.accelerator_count"
    assert "no accelerator_type" in problem.message
    (problem,) = validate_worker_pool_specs([gpu_pool("n1-standard-8", "NVIDIA_TESLA_T4", 0)])
    assert "accelerator_count" in problem.field


def test_no_pools_and_pools_without_code():
    assert fields(validate_worker_pool_specs([])) == ["worker_pool_specs"]
    assert fields(validate_worker_pool_specs([{}, {}])) == ["worker_pool_specs"]
    pool = cpu_pool()
    del pool["container_spec"]
    (problem,) = validate_worker_pool_specs([pool])
    assert (
        problem.field == "worker_pool_specs[0].container_spec"
        and "python_package_spec" in problem.message
    )
    both = cpu_pool()
    both["python_package_spec"] = {
        "executor_image_uri": AR_IMAGE,
        "package_uris": ["gs://b/p.tar.gz"],
        "python_module": "trainer.task",
    }
    assert fields(validate_worker_pool_specs([both])) == ["worker_pool_specs[0]"]


def test_empty_placeholder_pools_are_accepted_but_not_as_the_chief():
    evaluator = cpu_pool()
    assert validate_worker_pool_specs([cpu_pool(), {}, {}, evaluator]) == []
    assert fields(validate_worker_pool_specs([{}, cpu_pool()])) == ["worker_pool_specs[0]"]
    assert fields(validate_worker_pool_specs([cpu_pool()] * 5)) == ["worker_pool_specs"]


def test_placeholder_project_and_bucket_everywhere_they_hide():
    pool = cpu_pool()
    pool["container_spec"]["args"] = ["--model-dir", "gs://{your-gcs-bucket}/mwms"]
    pool["container_spec"]["env"] = [{"name": "BUCKET", "value": "gs://YOUR_BUCKET"}]
    doc = {
        "worker_pool_specs": [pool],
        "project": "your-cloud-project",
        "base_output_dir": "gs://{YOUR_BUCKET}/out",
    }
    got = {p.field: p for p in validate_document(doc)}
    assert set(got) == {
        "worker_pool_specs[0].container_spec.args[1]",
        "worker_pool_specs[0].container_spec.env[0].value",
        "project",
        "base_output_dir",
    }
    assert "bucket" in got["worker_pool_specs[0].container_spec.args[1]"].message
    assert "project id" in got["project"].message


def test_gcr_artifact_registry_uris_are_accepted_with_a_note_in_every_spelling():
    locations = {"gcr.io": "us", "us.gcr.io": "us", "eu.gcr.io": "europe", "asia.gcr.io": "asia"}
    for host, location in locations.items():
        pool = cpu_pool()
        pool["container_spec"]["image_uri"] = f"{host}/cassava-lab-4711/multiworker:cassava"
        assert validate_worker_pool_specs([pool]) == []
        (note,) = specs.image_notes([pool, pool])
        assert f"repository '{host}' in location '{location}'" in note
    pool["container_spec"]["image_uri"] = "gcr.io/deeplearning-platform-release/tf2-gpu.2-17"
    assert validate_worker_pool_specs([pool]) == [] and specs.image_notes([pool]) == []
    pool["container_spec"]["image_uri"] = AR_IMAGE
    assert specs.image_notes([pool]) == []


@pytest.mark.parametrize(
    "uri, named",
    [
        ("gcr.io/{YOUR-PROJECT-ID}/multiworker:cassava", "'{YOUR-PROJECT-ID}'"),
        ("gcr.io/PROJECT_ID/multiworker:cassava", "'PROJECT_ID'"),
        ("gcr.io/$PROJECT_ID/multiworker:cassava", "'$PROJECT_ID'"),
        ("us-central1-docker.pkg.dev/PROJECT_ID/repo/img:1", "'PROJECT_ID'"),
        ("gcr.io//multiworker:cassava", "empty project"),
        ("us-central1-docker.pkg.dev//repo/img:1", "empty project"),
    ],
)
def test_image_placeholders_and_empty_projects_are_refused_by_name(uri, named):
    pool = cpu_pool()
    pool["container_spec"]["image_uri"] = uri
    (problem,) = validate_worker_pool_specs([pool])
    assert named in problem.message and "project id" in problem.fix


def test_cli_validate_prints_the_gcr_note_once(tmp_path, capsys):
    pool = cpu_pool()
    pool["container_spec"]["image_uri"] = "gcr.io/cassava-lab-4711/multiworker:cassava"
    path = tmp_path / "gcr.json"
    path.write_text(json.dumps([pool, pool]))
    assert specs.main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ok\n") and out.count("note: ") == 1


def test_rest_camel_case_json_is_read_too():
    rest = [
        {
            "replicaCount": "1",
            "machineSpec": {
                "machineType": "n1-standard-8",
                "acceleratorType": "NVIDIA_TESLA_V100",
                "acceleratorCount": 1,
            },
            "containerSpec": {"imageUri": AR_IMAGE},
        },
        {
            "replicaCount": "1",
            "machineSpec": {
                "machineType": "n1-standard-8",
                "acceleratorType": "NVIDIA_TESLA_V100",
                "acceleratorCount": 2,
            },
            "containerSpec": {"imageUri": AR_IMAGE},
        },
    ]
    assert fields(validate_worker_pool_specs(rest)) == [
        "worker_pool_specs[1].machine_spec.accelerator_count"
    ]


def test_labels_are_checked_and_can_be_required():
    doc = {"worker_pool_specs": [cpu_pool()], "labels": {"Lab": "Cassava"}}
    assert fields(validate_document(doc)) == ["labels.Lab"]
    assert fields(
        validate_document({"worker_pool_specs": [cpu_pool()]}, require_kit_labels=True)
    ) == ["labels.lab"]


# --------------------------------------------------------------------------- building


def test_builder_writes_the_codelab_shapes():
    cpu = build_worker_pool_specs(AR_IMAGE, workers=1, machine_type="n1-standard-4")
    assert cpu == [cpu_pool(), cpu_pool()]
    gpu = build_worker_pool_specs(
        AR_IMAGE,
        workers=1,
        machine_type="n1-standard-8",
        accelerator_type="NVIDIA_TESLA_V100",
        accelerator_count=1,
    )
    expected = json.loads(
        json.dumps(CODELAB_SDK_SPEC).replace(
            "gcr.io/{YOUR-PROJECT-ID}/multiworker:cassava", AR_IMAGE
        )
    )
    assert gpu == expected
    assert validate_worker_pool_specs(gpu) == []


def test_builder_chief_only_args_env_and_a_bigger_chief():
    pools = build_worker_pool_specs(
        AR_IMAGE, workers=0, args=["--epochs", 2], env={"LAB_FAIL_AFTER_EPOCH": "1"}
    )
    assert len(pools) == 1
    assert pools[0]["container_spec"]["args"] == ["--epochs", "2"]
    assert pools[0]["container_spec"]["env"] == [{"name": "LAB_FAIL_AFTER_EPOCH", "value": "1"}]
    pools = build_worker_pool_specs(AR_IMAGE, workers=3, chief_machine_type="n1-highmem-8")
    assert (
        pools[0]["machine_spec"]["machine_type"] == "n1-highmem-8"
        and pools[1]["replica_count"] == 3
    )


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"workers": -1}, "workers"),
        ({"accelerator_type": "NVIDIA_TESLA_T4"}, "go together"),
        ({"accelerator_count": 1}, "go together"),
        ({"args": "--epochs 2"}, "list"),
    ],
)
def test_builder_refuses_nonsense_early(kwargs, words):
    with pytest.raises(ValueError, match=words):
        build_worker_pool_specs(AR_IMAGE, **kwargs)


def test_build_job_carries_the_kit_labels_and_matches_the_sdk_signature():
    settings = Settings(
        mode="cloud", project_id="cassava-lab-4711", run_id="20261202-101010-abcdef"
    )
    request = specs.build_job(settings, workers=1, args=["--epochs", "2"])
    assert request.labels == {"lab": "cassava", "lab-run": "20261202-101010-abcdef"}
    assert request.staging_bucket == "gs://cassava-lab-4711-cassava-lab"
    assert request.worker_pool_specs[0]["container_spec"]["image_uri"] == settings.image_uri
    assert request.validate() == []
    from google.cloud import aiplatform

    params = inspect.signature(aiplatform.CustomJob.__init__).parameters
    assert set(request.sdk_kwargs()) <= set(params)


@pytest.mark.slow
def test_the_real_sdk_takes_the_built_specs():
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    settings = Settings(mode="cloud", project_id="cassava-lab-4711", run_id="r1")
    request = specs.build_job(
        settings, workers=1, machine_type="n1-standard-8", accelerator_type="NVIDIA_TESLA_V100", accelerator_count=1,
        args=["--epochs", "2"], env={"A": "1"},
    )  # fmt: skip
    job = aiplatform.CustomJob(
        **request.sdk_kwargs(),
        project=settings.project_id,
        location=settings.region,
        credentials=AnonymousCredentials(),
    )
    pool = job.job_spec.worker_pool_specs[1]
    assert pool.machine_spec.accelerator_type.name == "NVIDIA_TESLA_V100"
    assert pool.container_spec.env[0].name == "A" and list(pool.container_spec.args) == [
        "--epochs",
        "2",
    ]
    assert dict(job._gca_resource.labels) == settings.labels  # not created yet: read the request


# --------------------------------------------------------------------------- CLI


def test_cli_validate_prints_every_problem_and_exits_2(tmp_path, capsys):
    path = tmp_path / "codelab.json"
    path.write_text(json.dumps(CODELAB_SDK_SPEC))
    assert specs.main(["validate", str(path)]) == 2
    out = capsys.readouterr().out
    assert out.count("worker_pool_specs[0].container_spec.image_uri:") == 1
    assert out.count("worker_pool_specs[1].container_spec.image_uri:") == 1
    assert out.count("note: gcr.io/") == 1


def test_cli_validate_ok_and_bad_files(tmp_path, capsys):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"worker_pool_specs": [cpu_pool(), cpu_pool()]}))
    assert specs.main(["validate", str(good)]) == 0
    assert capsys.readouterr().out.strip() == "ok"
    bad = tmp_path / "bad.json"
    bad.write_text("[{'replica_count': 1},]")
    assert specs.main(["validate", str(bad)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert specs.main(["validate", str(tmp_path / "missing.json")]) == 2


@pytest.mark.slow
def test_python_dash_m_labkit_spec_validate(tmp_path):
    path = tmp_path / "codelab.json"
    path.write_text(json.dumps(CODELAB_SDK_SPEC))
    done = subprocess.run(
        [sys.executable, "-m", "labkit", "spec", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "2 problem(s)" in done.stdout


def test_a_machine_of_no_known_family_is_refused_as_vertex_would_not_as_unpriced():
    pools = [
        {
            "machine_spec": {"machine_type": "x9-unknown-4"},
            "replica_count": 1,
            "container_spec": {"image_uri": "us-central1-docker.pkg.dev/p/r/i:1"},
        }
    ]
    (problem,) = specs.validate_worker_pool_specs(pools)
    assert problem.path == "workerPoolSpecs[0].machineSpec.machineType"
    assert problem.vertex_rejects and "not a machine type of a family" in problem.message
    assert "no checked price" not in problem.message and "n1-standard-4" in problem.fix


def test_a_container_spec_list_is_named_as_a_list_not_as_a_missing_image():
    pool = {
        "machine_spec": {"machine_type": "n1-standard-4"},
        "replica_count": 1,
        "container_spec": [{"image_uri": "us-docker.pkg.dev/p/r/i:t"}],
    }
    problems = specs.validate_worker_pool_specs([pool])
    assert [(p.field, p.message) for p in problems] == [
        ("worker_pool_specs[0].container_spec", "is a list, not one object.")
    ]


def test_problems_read_in_the_editions_language_and_the_api_keeps_english():
    """Issue 29, item 1: the validator's problems and fixes, as notebook 04 prints them and the
    pools hint quotes them, in Chinese in the zh-CN edition; `Problem.message`/`.fix` (what
    the local service answers over REST, as Google's API answers) stay English."""
    from labkit import i18n

    pools = [
        {"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 2},
        {"machine_spec": {"machine_type": "n1-standard-4", "accelerator_count": 1}},
    ]
    problems = specs.validate_worker_pool_specs(pools)
    english = specs.format_problems(problems)
    with i18n.using("zh-CN"):
        chinese = specs.format_problems(problems)
    assert english.startswith(f"{len(problems)} problem(s):")
    assert "pool 0 is the chief and must have exactly 1 replica." in english
    assert chinese.startswith(f"{len(problems)} 个问题：")
    assert "池 0 是主工作器，必须正好有 1 个副本" in chinese
    assert "是 1，但没有设置 accelerator_type" in chinese and "修复方法：" in chinese
    assert len(chinese.splitlines()) == len(english.splitlines())
    first = problems[0]
    with i18n.using("zh-CN"):
        assert first.message == "is 2; pool 0 is the chief and must have exactly 1 replica."
        assert first.message_in() != first.message
