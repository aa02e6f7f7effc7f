"""Vertex CustomJob and TFJob specs, checked against a documented structure and the official
client library's own objects (`.[vertex]`, part of `.[test]`): the SDK builds the CustomJob from
the documented command's arguments, offline (explicit project and anonymous credentials; the RPC
that would create it is replaced, nothing is submitted)."""
import json
import subprocess
import sys

import pytest
import yaml

from experiments.cloud.jobspec import JobSpec
from experiments.cloud.tfjob import tfjob, tfjob_yaml
from experiments.cloud.vertex_job import build_custom_job, vertex_custom_job
from tests.helpers import ROOT, run_module

IMAGE = "us-docker.pkg.dev/my-project/tfdist/tfdist-compare:latest"
# The README's submission example, as flags of experiments.vertex.
SUBMIT = ["--strategy=multi_worker_mirrored", "--num_workers=2", f"--image_uri={IMAGE}",
          "--base_output_dir=gs://BUCKET/run1", "--project=P", "--region=us-central1"]


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
    ("central_storage", dict(num_replicas=2, accelerator_type="NVIDIA_TESLA_T4",
                             accelerator_count=2), [1]),
    # a pipeline's stages on one machine's GPUs; hybrid: MWMS's pools, a pipeline on each
    ("model_parallel", dict(accelerator_type="NVIDIA_TESLA_T4", accelerator_count=2), [1]),
    ("hybrid", dict(num_workers=3, accelerator_type="NVIDIA_TESLA_T4", accelerator_count=2),
     [1, 2]),
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
    if strategy in ("mirrored", "central_storage"):  # one machine with N GPUs
        assert pools[0]["machine_spec"]["accelerator_count"] == 2
        assert "--num_replicas=2" in pools[0]["container_spec"]["args"]
    if strategy == "parameter_server":  # chief and ps need no accelerator
        assert "accelerator_type" not in pools[2]["machine_spec"]
    _check_against_sdk(job)


def test_tpu_job_asks_for_a_tpu_machine_in_the_sdks_terms():
    """cloud-tpu with 8 cores of TPU_V3 (default) or TPU_V2: the accelerator is an
    aiplatform_v1.AcceleratorType value, not a string the SDK would pass through unchecked."""
    aiplatform_v1 = pytest.importorskip("google.cloud.aiplatform_v1")
    for kw, accelerator in ((dict(), "TPU_V3"),
                            (dict(accelerator_type="TPU_V2", accelerator_count=8), "TPU_V2")):
        (pool,) = vertex_custom_job(_spec("tpu", **kw))["worker_pool_specs"]
        assert pool["replica_count"] == 1
        assert pool["machine_spec"] == {"machine_type": "cloud-tpu",
                                        "accelerator_type": accelerator, "accelerator_count": 8}
        args = pool["container_spec"]["args"]
        assert args[0] == "--strategy=tpu" and not any("--require_gpus" in a for a in args)
        proto = aiplatform_v1.WorkerPoolSpec(**pool)
        assert proto.machine_spec.accelerator_type == getattr(aiplatform_v1.AcceleratorType,
                                                              accelerator)
    with pytest.raises(ValueError):  # a TFJob has no TPU form here
        tfjob(_spec("tpu"))
    with pytest.raises(KeyError):  # and the SDK refuses an accelerator it does not know
        aiplatform_v1.WorkerPoolSpec(machine_spec={"machine_type": "cloud-tpu",
                                                   "accelerator_type": "TPU_V9"})


def _check_tfjob_against_sdk(text):
    """The Kubeflow training SDK (`.[tfjob]`, part of `.[test]`) loads the printed YAML as its
    KubeflowOrgV1TFJob: unknown or mistyped fields, or a missing runPolicy, raise. Deserializing
    a manifest is what its TrainingClient does with one read from the cluster."""
    training = pytest.importorskip("kubeflow.training")
    data = yaml.safe_load(text)
    job = training.ApiClient()._ApiClient__deserialize(data, "KubeflowOrgV1TFJob")
    assert isinstance(job, training.KubeflowOrgV1TFJob)
    assert job.spec.run_policy.clean_pod_policy == "Running"
    assert training.ApiClient().sanitize_for_serialization(job) == data  # nothing dropped
    return job


@pytest.mark.parametrize("strategy, kw, roles", [
    ("multi_worker_mirrored", dict(num_workers=2), {"Worker": 2}),
    ("parameter_server", dict(num_workers=2, num_ps=1), {"Chief": 1, "Worker": 2, "PS": 1}),
    ("multi_worker_mirrored", dict(num_workers=2, accelerator_type="NVIDIA_TESLA_T4",
                                   accelerator_count=1, base_output_dir="gs://b/r"), {"Worker": 2}),
    ("hybrid", dict(num_workers=2), {"Worker": 2}),
])
def test_tfjob_manifest(strategy, kw, roles):
    text = tfjob_yaml(tfjob(_spec(strategy, **kw)))
    _check_tfjob_against_sdk(text)
    manifest = yaml.safe_load(text)
    assert manifest["spec"]["runPolicy"] == {"cleanPodPolicy": "Running"}
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
    (["--strategy=central_storage", "--num_replicas=2"], [1]),
    (["--strategy=tpu"], [1]),
])
def test_vertex_dry_run_cli(args, replicas):
    proc = run_module("experiments.vertex", *args, "--dry_run", "--", "--epochs=3", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    job = json.loads(proc.stdout)
    assert [p["replica_count"] for p in job["worker_pool_specs"]] == replicas
    assert "--epochs=3" in job["worker_pool_specs"][0]["container_spec"]["args"]


def test_tfjob_yaml_is_plain_even_when_objects_repeat():
    """PyYAML writes an object met twice as &id001 ... *id001; the manifest repeats lists (the
    same command in every role) and must read plainly in a review or kubectl diff."""
    manifest = tfjob(_spec("parameter_server", num_workers=2, num_ps=1, base_output_dir="gs://b"))
    shared = ["python", "-m", "experiments.run"]
    for role in manifest["spec"]["tfReplicaSpecs"].values():
        role["template"]["spec"]["containers"][0]["command"] = shared
    assert "&id001" in yaml.safe_dump(manifest)  # what the default dumper does with it
    text = tfjob_yaml(manifest)
    assert "&id" not in text and "*id" not in text
    assert yaml.safe_load(text) == manifest
    assert text.startswith("apiVersion: kubeflow.org/v1\nkind: TFJob\n")


def test_vertex_cli_tfjob_and_bad_input():
    proc = run_module("experiments.vertex", "--format=tfjob", "--num_workers=3",
                      f"--image_uri={IMAGE}", "--base_output_dir=gs://BUCKET/run1", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load(proc.stdout)["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 3
    assert "&id" not in proc.stdout and "*id" not in proc.stdout
    _check_tfjob_against_sdk(proc.stdout)
    bad = run_module("experiments.vertex", "--dry_run", "--", "--num_workers=4", timeout=120)
    assert bad.returncode == 2 and "--num_workers=4" in bad.stderr


def _one_error_line(proc):
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert proc.stdout == ""
    return lines[0]


@pytest.mark.parametrize("args, fragment", [
    # the TFJob is printed to be applied: the placeholder image cannot be pulled
    (["--format=tfjob", "--base_output_dir=gs://B/r"], "is the placeholder"),
    (["--nodry_run", "--base_output_dir=gs://B/r"], "is the placeholder"),
    # Kubernetes sets no AIP_MODEL_DIR: records written inside a pod vanish with it
    (["--format=tfjob", f"--image_uri={IMAGE}"], "a TFJob's pods keep no files"),
    # the SDK refuses a CustomJob without a staging bucket
    (["--nodry_run", f"--image_uri={IMAGE}", "--project=P"], "submitting needs --staging_bucket"),
    (["--base_output_dir=/tmp/out"], "must be a gs:// path"),
    (["--staging_bucket=bucket"], "must be a gs:// path"),
    (["--accelerator_type=NVIDIA_TESLA_T4"], "go together"),
    (["--strategy=mirrored", "--num_replicas=4", "--accelerator_type=NVIDIA_TESLA_T4",
      "--accelerator_count=2"], "exceeds --accelerator_count=2"),
    (["--strategy=tpu", "--accelerator_type=NVIDIA_TESLA_T4", "--accelerator_count=1"],
     "is not a TPU"),
    (["--strategy=mirrored", "--accelerator_type=TPU_V3", "--accelerator_count=8"],
     "is a TPU: use --strategy=tpu"),
])
def test_vertex_cli_refuses_jobs_that_cannot_work(args, fragment):
    assert fragment in _one_error_line(run_module("experiments.vertex", *args, timeout=120))


def test_tfjob_results_outlive_the_pods():
    """--base_output_dir gives every container Vertex's AIP_* dirs; -- --results_dir=gs://...
    reaches every container's experiments.run unchanged; the placeholder prints when asked."""
    proc = run_module("experiments.vertex", "--strategy=parameter_server", "--num_workers=2",
                      "--num_ps=1", "--format=tfjob", f"--image_uri={IMAGE}",
                      "--base_output_dir=gs://BUCKET/run1", timeout=120)
    assert proc.returncode == 0, proc.stderr
    specs = yaml.safe_load(proc.stdout)["spec"]["tfReplicaSpecs"]
    for role in ("Chief", "Worker", "PS"):
        (container,) = specs[role]["template"]["spec"]["containers"]
        assert container["image"] == IMAGE
        assert {e["name"]: e["value"] for e in container["env"]} == {
            "AIP_MODEL_DIR": "gs://BUCKET/run1/model",
            "AIP_CHECKPOINT_DIR": "gs://BUCKET/run1/checkpoints",
            "AIP_TENSORBOARD_LOG_DIR": "gs://BUCKET/run1/logs"}
    proc = run_module("experiments.vertex", "--format=tfjob", "--allow_placeholder_image", "--",
                      "--results_dir=gs://BUCKET/run2", "--epochs=2", timeout=120)
    assert proc.returncode == 0, proc.stderr
    (container,) = yaml.safe_load(proc.stdout)["spec"]["tfReplicaSpecs"]["Worker"]["template"][
        "spec"]["containers"]
    assert "PROJECT" in container["image"] and "env" not in container
    assert container["args"][-2:] == ["--results_dir=gs://BUCKET/run2", "--epochs=2"]


@pytest.mark.parametrize("strategy, kw, gpu_pools", [
    ("mirrored", dict(num_replicas=2), [True]),
    ("multi_worker_mirrored", dict(num_workers=3), [True, True]),
    ("parameter_server", dict(num_workers=2, num_ps=1), [False, True, False]),  # chief, ps: CPU
])
def test_gpu_pools_refuse_to_run_without_gpus(strategy, kw, gpu_pools):
    spec = _spec(strategy, accelerator_type="NVIDIA_TESLA_T4", accelerator_count=2, **kw)
    pools = vertex_custom_job(spec)["worker_pool_specs"]
    for pool, gpus in zip(pools, gpu_pools, strict=True):
        args = pool["container_spec"]["args"]
        assert ("--require_gpus=2" in args) == gpus
        assert ("accelerator_count" in pool["machine_spec"]) == gpus
    assert not any("--require_gpus" in a for p in vertex_custom_job(_spec(strategy, **kw))[
        "worker_pool_specs"] for a in p["container_spec"]["args"])  # CPU job: no check
    if strategy != "mirrored":
        specs = tfjob(spec)["spec"]["tfReplicaSpecs"]
        for role, s in specs.items():
            (container,) = s["template"]["spec"]["containers"]
            assert ("--require_gpus=2" in container["args"]) == (role == "Worker")
            assert ("resources" in container) == (role == "Worker")


def _offline_sdk_objects():
    aiplatform = pytest.importorskip("google.cloud.aiplatform")
    from google.auth.credentials import AnonymousCredentials

    return aiplatform, AnonymousCredentials()


def test_sdk_builds_the_custom_job_from_the_documented_command():
    """The dry run of the README's submission command, handed to the SDK's own CustomJob (no
    credentials lookup, no network: project, location and anonymous credentials given)."""
    aiplatform, anonymous = _offline_sdk_objects()
    proc = run_module("experiments.vertex", *SUBMIT, "--dry_run", "--", "--model=cnn",
                      timeout=120)
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout)
    with pytest.raises(RuntimeError, match="staging_bucket"):  # the bug: no staging bucket
        aiplatform.CustomJob(**job, project="P", location="us-central1", credentials=anonymous)
    custom_job = build_custom_job(job, "gs://BUCKET/run1", project="P", location="us-central1",
                                  credentials=anonymous)
    assert isinstance(custom_job, aiplatform.CustomJob)
    proto = custom_job._gca_resource  # the aiplatform_v1 CustomJob message submit() would send
    assert proto.display_name == "tfdist-compare"
    assert proto.job_spec.base_output_directory.output_uri_prefix == "gs://BUCKET/run1"
    pools = proto.job_spec.worker_pool_specs
    assert [p.replica_count for p in pools] == [1, 1]
    for p in pools:
        assert p.container_spec.image_uri == IMAGE
        assert list(p.container_spec.command) == ["python", "-m", "experiments.run"]
        assert list(p.container_spec.args) == ["--strategy=multi_worker_mirrored", "--model=cnn"]
        assert p.machine_spec.machine_type == "n1-standard-8"
    assert custom_job.project == "P" and custom_job.location == "us-central1"


# Runs experiments.vertex as `python -m` would, with the SDK's own code path up to the RPC:
# google.auth.default answers anonymous credentials (no metadata-server probe), the gRPC method
# that would create the job prints the request instead, and Python sockets refuse to connect.
_SUBMIT_OFFLINE = """
import json, runpy, socket, sys
def _no_network(*args, **kwargs):
    raise OSError("this test has no network")
socket.socket.connect = socket.create_connection = _no_network
import google.auth
from google.auth.credentials import AnonymousCredentials
google.auth.default = lambda *args, **kwargs: (AnonymousCredentials(), None)
from google.cloud.aiplatform_v1.services.job_service.client import JobServiceClient
def create_custom_job(self, parent=None, custom_job=None, **kwargs):
    print("REQUEST " + json.dumps({"parent": parent,
                                   "custom_job": type(custom_job).to_dict(custom_job)}))
    custom_job.name = parent + "/customJobs/123"
    return custom_job
JobServiceClient.create_custom_job = create_custom_job
sys.argv = ["experiments.vertex", *sys.argv[1:]]
runpy.run_module("experiments.vertex", run_name="__main__", alter_sys=True)
"""


def test_documented_submission_reaches_the_sdk_request_offline():
    """`--nodry_run` with the README's flags: the staging bucket defaults to --base_output_dir,
    aiplatform.init + CustomJob + submit() run, and the create request is what Vertex gets."""
    _offline_sdk_objects()
    proc = subprocess.run([sys.executable, "-c", _SUBMIT_OFFLINE, *SUBMIT, "--nodry_run", "--",
                           "--epochs=5"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    (line,) = [l for l in proc.stdout.splitlines() if l.startswith("REQUEST ")]
    request = json.loads(line[len("REQUEST "):])
    assert request["parent"] == "projects/P/locations/us-central1"
    spec = request["custom_job"]["job_spec"]
    assert spec["base_output_directory"]["output_uri_prefix"] == "gs://BUCKET/run1"
    pools = spec["worker_pool_specs"]
    assert [int(p["replica_count"]) for p in pools] == [1, 1]  # int64: a string in JSON
    for p in pools:
        assert p["container_spec"]["image_uri"] == IMAGE
        assert p["container_spec"]["args"] == ["--strategy=multi_worker_mirrored", "--epochs=5"]
    assert "submitted projects/P/locations/us-central1/customJobs/123" in proc.stdout
