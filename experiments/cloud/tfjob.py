"""A Kubeflow TFJob (training-operator `kubeflow.org/v1`) for a JobSpec, and its YAML.

`tfjob_yaml` prints the TFJob as plain YAML (no `&id001` anchors or `*id001` aliases, which are
legal but unreadable in a review or a `kubectl diff`); the Kubeflow training SDK
(`pip install -e '.[tfjob]'`, package kubeflow-training) loads it as a KubeflowOrgV1TFJob in the
tests, which is why the manifest always has a runPolicy (the SDK refuses a TFJob without one).
"""
import yaml

from experiments.cloud.jobspec import PLANNED_ON_WORKERS, output_dirs, run_command
from strategies import MULTI_WORKER, kind


def tfjob(spec, name="tfdist-compare", namespace="default"):
    """A Kubeflow TFJob manifest (dict) for MWMS, PSS, or --strategy=auto planned on the job's
    tasks (a chief, workers and ps). GPUs (accelerator_count) go to the workers only (and to
    auto's chief, which may train); with base_output_dir every container gets Vertex's AIP_*
    directories."""
    # auto planned on the tasks: PSS's pools, the plan choosing which replicas train
    if spec.strategy == PLANNED_ON_WORKERS or kind(spec.strategy).parameter_servers:
        replicas = {"Chief": 1, "Worker": spec.num_workers, "PS": spec.num_ps}
    elif kind(spec.strategy).all_reduce:
        replicas = {"Worker": spec.num_workers}
    else:
        raise ValueError(f"a TFJob is for {', '.join(MULTI_WORKER)}, not {spec.strategy!r}")
    specs = {}
    for role, count in replicas.items():
        trains = ("Worker", "Chief") if spec.strategy == PLANNED_ON_WORKERS else ("Worker",)
        gpus = spec.accelerator_count if role in trains else 0
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
