"""Job specs that run an `experiments.run` command on a platform that sets TF_CONFIG itself.

Vertex AI CustomJob (worker pool 0 = chief, 1 = workers, 2 = parameter servers; unused pools are
`{}` so positions hold; Vertex sets TF_CONFIG only for multi-replica jobs) and a Kubeflow TFJob
(training-operator `kubeflow.org/v1`). No Google or Kubernetes library is needed to build them;
`build_custom_job` hands the Vertex dict to the SDK (`pip install -e '.[vertex]'`), and
`tfjob_yaml` prints the TFJob as plain YAML (no `&id001` anchors or `*id001` aliases, which are
legal but unreadable in a review or a `kubectl diff`); the Kubeflow training SDK
(`pip install -e '.[tfjob]'`, package kubeflow-training) loads it as a KubeflowOrgV1TFJob in the
tests, which is why the manifest always has a runPolicy (the SDK refuses a TFJob without one).

Your own model or data (--model=MODULE:FUNCTION, --dataset=MODULE:FUNCTION, PATH.keras,
PATH.npz after `--`): every container runs the same command, so the module or file must be in
the image (copied next to the toolkit, or on the image's PYTHONPATH), or the file on gs://.

Accelerators: every container of a pool that gets GPUs runs with `--require_gpus=N` (N = GPUs per
replica), so a task that TensorFlow shows fewer GPUs (a CPU-only image, a node without drivers)
stops with exit 2 and one line instead of training on the CPU while the GPUs are paid for.

TPU (`--strategy=tpu`): one pool of one replica on Vertex's `cloud-tpu` machine with TPU_V3
(or TPU_V2) x 8 cores, the form Vertex's CustomJob takes for TPU v2/v3 (the accelerator names are
aiplatform_v1.AcceleratorType values, checked in the tests). The command carries no --tpu: there
TPUClusterResolver finds the TPU from the environment Vertex sets (TPU_CONFIG; TF 2.21's
tpu client source). A TPU VM machine type (e.g. ct5lp-hightpu-4t, TPU_V5_LITEPOD) takes
`--machine_type=... --accelerator_type=TPU_V5_LITEPOD --accelerator_count=4 -- --tpu=local`.
Not verified on Vertex: this toolkit's machines have no TPU.

Outputs: Vertex sets AIP_MODEL_DIR / AIP_CHECKPOINT_DIR / AIP_TENSORBOARD_LOG_DIR under
`base_output_dir`; Kubernetes sets nothing, so a TFJob with `base_output_dir` gets the same three
variables in its containers' env (the same layout), and experiments.run reads them either way.
"""
import dataclasses

import yaml

# The image the flags default to: a job with it cannot start (no such registry project).
PLACEHOLDER_PROJECT = "PROJECT"
PLACEHOLDER_IMAGE = f"us-docker.pkg.dev/{PLACEHOLDER_PROJECT}/tfdist/tfdist-compare:latest"
DEFAULT_MACHINE = "n1-standard-8"
TPU_MACHINE = "cloud-tpu"  # Vertex's machine type for TPU v2/v3 ...
TPU_DEFAULT_ACCELERATOR, TPU_CORES = "TPU_V3", 8  # ... with 8 cores of one of these


@dataclasses.dataclass
class JobSpec:
    strategy: str
    run_args: list  # the experiments.run flags, without --strategy/--num_workers/--num_ps
    image_uri: str
    num_workers: int = 1
    num_ps: int = 0
    num_replicas: int = 1
    machine_type: str = ""  # "": DEFAULT_MACHINE, or TPU_MACHINE for strategy "tpu"
    accelerator_type: str = ""  # e.g. NVIDIA_TESLA_T4 or TPU_V3; empty: CPU only (tpu: TPU_V3)
    accelerator_count: int = 0
    display_name: str = "tfdist-compare"
    base_output_dir: str = ""


def is_placeholder_image(image_uri):
    """True for an image URI that still names the placeholder project (nothing can pull it)."""
    return PLACEHOLDER_PROJECT in image_uri.split("/")


def output_dirs(base_output_dir):
    """The AIP_* directories Vertex derives from a job's base output directory."""
    base = base_output_dir.rstrip("/")
    return {"AIP_MODEL_DIR": f"{base}/model", "AIP_CHECKPOINT_DIR": f"{base}/checkpoints",
            "AIP_TENSORBOARD_LOG_DIR": f"{base}/logs"}


def run_command(spec, gpus=0):
    """The container command: the same entry point and flags as a local run. `gpus` > 0: the
    container's machine has that many GPUs, and the run refuses to start without them."""
    args = [f"--strategy={spec.strategy}"]
    if spec.strategy in ("mirrored", "central_storage"):
        args.append(f"--num_replicas={spec.num_replicas}")
    if gpus:
        args.append(f"--require_gpus={gpus}")
    return ["python", "-m", "experiments.run"], args + list(spec.run_args)


def _pool(spec, replicas, accelerators=True):
    if spec.strategy == "tpu":  # TPU cores, not GPUs: no --require_gpus
        machine = {"machine_type": spec.machine_type or TPU_MACHINE,
                   "accelerator_type": spec.accelerator_type or TPU_DEFAULT_ACCELERATOR,
                   "accelerator_count": spec.accelerator_count or TPU_CORES}
        command, args = run_command(spec)
        return {"machine_spec": machine, "replica_count": replicas,
                "container_spec": {"image_uri": spec.image_uri, "command": command, "args": args}}
    machine = {"machine_type": spec.machine_type or DEFAULT_MACHINE}
    gpus = 0
    if accelerators and spec.accelerator_type and spec.accelerator_count:
        machine.update(accelerator_type=spec.accelerator_type,
                       accelerator_count=spec.accelerator_count)
        gpus = spec.accelerator_count
    command, args = run_command(spec, gpus)
    return {"machine_spec": machine, "replica_count": replicas,
            "container_spec": {"image_uri": spec.image_uri, "command": command, "args": args}}


def vertex_custom_job(spec):
    """A CustomJob dict (the `aiplatform.CustomJob` keyword arguments)."""
    if spec.strategy in ("one_device", "mirrored", "central_storage", "model_parallel", "tpu"):
        # one replica, N accelerators: no TF_CONFIG; Mirrored and CentralStorage over GPUs,
        # TPUStrategy over TPU cores; model_parallel's stages over the GPUs
        pools = [_pool(spec, 1)]
    elif spec.strategy in ("multi_worker_mirrored", "hybrid"):
        # pool 0 is the chief = MWMS worker 0 (Vertex names it "chief"); pool 1 the others
        pools = [_pool(spec, 1)] + ([_pool(spec, spec.num_workers - 1)]
                                    if spec.num_workers > 1 else [])
    elif spec.strategy == "parameter_server":
        # the chief only coordinates: no accelerator; ps hold variables: no accelerator
        pools = [_pool(spec, 1, accelerators=False), _pool(spec, spec.num_workers),
                 _pool(spec, spec.num_ps, accelerators=False)]
    else:
        raise ValueError(f"unknown strategy {spec.strategy!r}")
    job = {"display_name": spec.display_name, "worker_pool_specs": pools}
    if spec.base_output_dir:
        job["base_output_dir"] = spec.base_output_dir
    return job


def build_custom_job(job, staging_bucket, project=None, location=None, credentials=None):
    """The SDK's `aiplatform.CustomJob` for a `vertex_custom_job` dict, not submitted. The SDK
    refuses a CustomJob without a staging bucket (it stages job artifacts there). project,
    location, credentials: None takes them from `aiplatform.init` / the environment."""
    from google.cloud import aiplatform

    return aiplatform.CustomJob(**job, staging_bucket=staging_bucket, project=project,
                                location=location, credentials=credentials)


def tfjob(spec, name="tfdist-compare", namespace="default"):
    """A Kubeflow TFJob manifest (dict) for MWMS or PSS. GPUs (accelerator_count) go to the
    workers only; with base_output_dir every container gets Vertex's AIP_* directories."""
    if spec.strategy in ("multi_worker_mirrored", "hybrid"):
        replicas = {"Worker": spec.num_workers}
    elif spec.strategy == "parameter_server":
        replicas = {"Chief": 1, "Worker": spec.num_workers, "PS": spec.num_ps}
    else:
        raise ValueError(f"a TFJob is for multi_worker_mirrored, hybrid or parameter_server, "
                         f"not {spec.strategy!r}")
    specs = {}
    for role, count in replicas.items():
        gpus = spec.accelerator_count if role == "Worker" else 0
        command, args = run_command(spec, gpus)
        container = {"name": "tensorflow", "image": spec.image_uri, "command": command,
                     "args": args, "ports": [{"name": "tfjob-port", "containerPort": 2222}]}
        if spec.base_output_dir:
            container["env"] = [{"name": k, "value": v}
                                for k, v in output_dirs(spec.base_output_dir).items()]
        if gpus:
            # a Kubernetes quantity is a string (the SDK's model types it so)
            container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
        specs[role] = {"replicas": count, "restartPolicy": "OnFailure",
                       "template": {"spec": {"containers": [container]}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
            "metadata": {"name": name, "namespace": namespace},
            # cleanPodPolicy Running: when the job ends, delete the pods still running. PSS
            # workers and parameter servers serve until stopped; without it they would stay up
            # (and billed) after the chief finished.
            "spec": {"runPolicy": {"cleanPodPolicy": "Running"}, "tfReplicaSpecs": specs}}


class _PlainDumper(yaml.SafeDumper):
    """Writes every repeated object in full: no anchors (&id001) and aliases (*id001)."""

    def ignore_aliases(self, data):
        return True


def tfjob_yaml(manifest):
    """The manifest as plain YAML, keys in the order built (apiVersion, kind, metadata, spec)."""
    return yaml.dump(manifest, Dumper=_PlainDumper, sort_keys=False)
