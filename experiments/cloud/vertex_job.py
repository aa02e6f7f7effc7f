"""A Vertex AI CustomJob for a JobSpec: worker pool 0 = chief, 1 = workers, 2 = parameter
servers (unused pools are `{}` so positions hold; Vertex sets TF_CONFIG only for multi-replica
jobs). No Google library is needed to build it; `build_custom_job` hands the dict to the SDK
(`pip install -e '.[vertex]'`).

TPU (`--strategy=tpu`): one pool of one replica on Vertex's `cloud-tpu` machine with TPU_V3
(or TPU_V2) x 8 cores, the form Vertex's CustomJob takes for TPU v2/v3 (the accelerator names are
aiplatform_v1.AcceleratorType values, checked in the tests). The command carries no --tpu: there
TPUClusterResolver finds the TPU from the environment Vertex sets (TPU_CONFIG; TF 2.21's
tpu client source). A TPU VM machine type (e.g. ct5lp-hightpu-4t, TPU_V5_LITEPOD) takes
`--machine_type=... --accelerator_type=TPU_V5_LITEPOD --accelerator_count=4 -- --tpu=local`.
Not verified on Vertex: this toolkit's machines have no TPU.
"""
from experiments.cloud.jobspec import (DEFAULT_MACHINE, PLANNED_ON_WORKERS, TPU_CORES,
                                       TPU_DEFAULT_ACCELERATOR, TPU_MACHINE, run_command)
import strategies


def _pool(spec, replicas, accelerators=True):
    if spec.strategy != PLANNED_ON_WORKERS and \
            strategies.kind(spec.strategy).accelerator == "tpu":  # TPU cores, not GPUs: no --require_gpus
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
    if spec.strategy == PLANNED_ON_WORKERS:  # the chief may train: it gets the workers' devices
        pools = [_pool(spec, 1), _pool(spec, spec.num_workers) if spec.num_workers else {},
                 _pool(spec, spec.num_ps, accelerators=False) if spec.num_ps else {}]
        return _job(spec, pools)
    strategy_kind = strategies.kind(spec.strategy)
    if strategy_kind.parameter_servers:
        # the chief only coordinates: no accelerator; ps hold variables: no accelerator
        pools = [_pool(spec, 1, accelerators=False), _pool(spec, spec.num_workers),
                 _pool(spec, spec.num_ps, accelerators=False)]
    elif strategy_kind.all_reduce:
        # pool 0 is the chief = MWMS worker 0 (Vertex names it "chief"); pool 1 the others
        pools = [_pool(spec, 1)] + ([_pool(spec, spec.num_workers - 1)]
                                    if spec.num_workers > 1 else [])
    elif spec.strategy in strategies.REGISTRY:
        # one replica, N accelerators: no TF_CONFIG; Mirrored and CentralStorage over GPUs,
        # TPUStrategy over TPU cores; model_parallel's stages over the GPUs
        pools = [_pool(spec, 1)]
    else:
        raise ValueError(f"unknown strategy {spec.strategy!r}; valid: {', '.join(strategies.REGISTRY)}")
    return _job(spec, pools)


def _job(spec, pools):
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
