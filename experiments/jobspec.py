"""Job specs that run an `experiments.run` command on a platform that sets TF_CONFIG itself.

Vertex AI CustomJob (worker pool 0 = chief, 1 = workers, 2 = parameter servers; unused pools are
`{}` so positions hold; Vertex sets TF_CONFIG only for multi-replica jobs) and a Kubeflow TFJob
(training-operator `kubeflow.org/v1`). No Google or Kubernetes library is needed to build them.
"""
import dataclasses


@dataclasses.dataclass
class JobSpec:
    strategy: str
    run_args: list  # the experiments.run flags, without --strategy/--num_workers/--num_ps
    image_uri: str
    num_workers: int = 1
    num_ps: int = 0
    num_replicas: int = 1
    machine_type: str = "n1-standard-8"
    accelerator_type: str = ""  # e.g. NVIDIA_TESLA_T4; empty: CPU only
    accelerator_count: int = 0
    display_name: str = "tfdist-compare"
    base_output_dir: str = ""


def run_command(spec):
    """The container command: the same entry point and flags as a local run."""
    args = [f"--strategy={spec.strategy}"]
    if spec.strategy == "mirrored":
        args.append(f"--num_replicas={spec.num_replicas}")
    return ["python", "-m", "experiments.run"], args + list(spec.run_args)


def _pool(spec, replicas, accelerators=True):
    command, args = run_command(spec)
    machine = {"machine_type": spec.machine_type}
    if accelerators and spec.accelerator_type and spec.accelerator_count:
        machine.update(accelerator_type=spec.accelerator_type,
                       accelerator_count=spec.accelerator_count)
    return {"machine_spec": machine, "replica_count": replicas,
            "container_spec": {"image_uri": spec.image_uri, "command": command, "args": args}}


def vertex_custom_job(spec):
    """A CustomJob dict (the `aiplatform.CustomJob` keyword arguments)."""
    if spec.strategy in ("one_device", "mirrored"):
        pools = [_pool(spec, 1)]  # one replica, N accelerators: no TF_CONFIG, Mirrored over GPUs
    elif spec.strategy == "multi_worker_mirrored":
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


def tfjob(spec, name="tfdist-compare", namespace="default"):
    """A Kubeflow TFJob manifest (dict) for MWMS or PSS."""
    command, args = run_command(spec)
    if spec.strategy == "multi_worker_mirrored":
        replicas = {"Worker": spec.num_workers}
    elif spec.strategy == "parameter_server":
        replicas = {"Chief": 1, "Worker": spec.num_workers, "PS": spec.num_ps}
    else:
        raise ValueError(f"a TFJob is for multi_worker_mirrored or parameter_server, "
                         f"not {spec.strategy!r}")
    specs = {}
    for role, count in replicas.items():
        container = {"name": "tensorflow", "image": spec.image_uri, "command": command,
                     "args": args, "ports": [{"name": "tfjob-port", "containerPort": 2222}]}
        if spec.accelerator_count and role == "Worker":
            container["resources"] = {"limits": {"nvidia.com/gpu": spec.accelerator_count}}
        specs[role] = {"replicas": count, "restartPolicy": "OnFailure",
                       "template": {"spec": {"containers": [container]}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"tfReplicaSpecs": specs}}
