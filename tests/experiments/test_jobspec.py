"""Vertex CustomJob and TFJob specs, checked against a documented structure (and the official
client library's own types when `.[vertex]` is installed)."""
import json

import pytest
import yaml

from experiments.jobspec import JobSpec, tfjob, vertex_custom_job
from tests.helpers import run_module


def _spec(strategy, **kw):
    return JobSpec(strategy=strategy, run_args=["--model=cnn"], image_uri="img", **kw)


def _check_against_sdk(job):
    aiplatform_v1 = pytest.importorskip("google.cloud.aiplatform_v1")
    for pool in job["worker_pool_specs"]:
        aiplatform_v1.WorkerPoolSpec(**pool)  # raises on unknown or mistyped fields


@pytest.mark.parametrize("strategy, kw, replicas", [
    ("multi_worker_mirrored", dict(num_workers=3), [1, 2]),
    ("parameter_server", dict(num_workers=2, num_ps=1), [1, 2, 1]),
    ("mirrored", dict(num_replicas=2, accelerator_type="NVIDIA_TESLA_T4", accelerator_count=2), [1]),
])
def test_vertex_pools(strategy, kw, replicas):
    job = vertex_custom_job(_spec(strategy, **kw))
    pools = job["worker_pool_specs"]
    assert [p["replica_count"] for p in pools] == replicas
    for p in pools:
        assert p["container_spec"]["command"] == ["python", "-m", "experiments.run"]
        assert f"--strategy={strategy}" in p["container_spec"]["args"]
        assert "--model=cnn" in p["container_spec"]["args"]
        assert p["machine_spec"]["machine_type"]
    if strategy == "mirrored":
        assert pools[0]["machine_spec"]["accelerator_count"] == 2
        assert "--num_replicas=2" in pools[0]["container_spec"]["args"]
    if strategy == "parameter_server":  # chief and ps need no accelerator
        assert "accelerator_type" not in pools[2]["machine_spec"]
    _check_against_sdk(job)


@pytest.mark.parametrize("strategy, kw, roles", [
    ("multi_worker_mirrored", dict(num_workers=2), {"Worker": 2}),
    ("parameter_server", dict(num_workers=2, num_ps=1), {"Chief": 1, "Worker": 2, "PS": 1}),
])
def test_tfjob_manifest(strategy, kw, roles):
    manifest = yaml.safe_load(yaml.safe_dump(tfjob(_spec(strategy, **kw))))
    assert manifest["apiVersion"] == "kubeflow.org/v1" and manifest["kind"] == "TFJob"
    specs = manifest["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == roles
    container = specs["Worker"]["template"]["spec"]["containers"][0]
    assert container["name"] == "tensorflow" and container["image"] == "img"
    with pytest.raises(ValueError, match="not 'mirrored'"):
        tfjob(_spec("mirrored"))


@pytest.mark.parametrize("args, replicas", [
    (["--strategy=multi_worker_mirrored", "--num_workers=2"], [1, 1]),
    (["--strategy=parameter_server", "--num_workers=2", "--num_ps=1"], [1, 2, 1]),
    (["--strategy=mirrored", "--num_replicas=2"], [1]),
])
def test_vertex_dry_run_cli(args, replicas):
    proc = run_module("experiments.vertex", *args, "--dry_run", "--", "--epochs=3", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    job = json.loads(proc.stdout)
    assert [p["replica_count"] for p in job["worker_pool_specs"]] == replicas
    assert "--epochs=3" in job["worker_pool_specs"][0]["container_spec"]["args"]


def test_vertex_cli_tfjob_and_bad_input():
    proc = run_module("experiments.vertex", "--format=tfjob", "--num_workers=3", timeout=120)
    assert proc.returncode == 0
    assert yaml.safe_load(proc.stdout)["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 3
    bad = run_module("experiments.vertex", "--dry_run", "--", "--num_workers=4", timeout=120)
    assert bad.returncode == 2 and "--num_workers=4" in bad.stderr
