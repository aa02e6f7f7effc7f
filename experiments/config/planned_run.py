"""A configuration the planner chose (results/model/planner.py) as a run: the RunConfig
settings it decides (settings; TOPOLOGY and TRAINING: their values when it does not say), the
experiments.run flags and experiments.vertex command that run it (run_flags, vertex_command,
commands), and what a run chosen by the plan records (summary). experiments.plan prints the
commands, --strategy=auto (auto.py) and --adapt (experiments/adaptive/) apply the settings.
"""
import dataclasses

from results.model.planner import best, tasks
from strategies import kind


@dataclasses.dataclass(frozen=True)
class CommandTarget:
    """What the printed commands train: the model (a toolkit model or MODULE:FUNCTION), its
    dataset ("": the run's default) and the profile's batch per replica per step; `pinned`,
    for a cluster on one machine (the spec's machine_cores): settings -> whether its local
    cluster pins its workers (experiments/config/auto.py placement_of, as a comparison would)."""
    model: str
    batch: int
    dataset: str = ""
    pinned: object = None


# experiments.run's settings a configuration decides, and their values when it does not say
# (RunConfig's defaults): what --strategy=auto replaces, whatever the command line said.
TOPOLOGY = {"strategy": None, "num_replicas": 1, "num_workers": 1, "num_ps": 0}
TRAINING = {"num_stages": 1, "microbatches": 1, "tensor_parallel": 1,
            "pipeline_schedule": "gpipe", "accumulation_steps": 1,
            "gradient_sync_dtype": "float32", "compression": "none", "zero": 0}


def settings(config):
    """{RunConfig field: value} of `config`: every key of TOPOLOGY and TRAINING (see `tasks`)."""
    strategy, workers, replicas, _ = tasks(config)
    k = kind(strategy)
    out = {**TOPOLOGY, **TRAINING, "strategy": strategy}
    if k.local_replicas:
        out["num_replicas"] = replicas
    if k.multi_worker:
        out["num_workers"] = workers
    if k.parameter_servers:
        out["num_ps"] = config.num_ps
    if k.pipelined:
        out.update(num_stages=config.stages, microbatches=config.microbatches,
                   tensor_parallel=config.tensor_parallel, pipeline_schedule=config.schedule)
    out.update(accumulation_steps=config.accumulation, gradient_sync_dtype=config.sync_dtype,
               compression=config.compression, zero=config.zero)
    return out


def _flags(values, keys):
    """--key=value for each key whose value is not the run's default."""
    defaults = {**TOPOLOGY, **TRAINING}
    return [f"--{key}={values[key]}" for key in keys if values[key] != defaults[key]]


def run_flags(config, target):
    """The experiments.run flags of `config`: under the platform's TF_CONFIG on each task of a
    cluster (a local cluster when none is set)."""
    values = settings(config)
    pin = ["--pin_workers"] if target.pinned and target.pinned(values) else []
    return _flags(values, TOPOLOGY) + pin + _target_flags(target) + _flags(values, TRAINING)


def _target_flags(target):
    flags = [f"--model={target.model}"]
    if target.dataset:
        flags.append(f"--dataset={target.dataset}")
    return flags + [f"--batch_size_per_replica={target.batch}"]


def vertex_command(config, target):
    """The experiments.vertex command of `config` (see `tasks` for what a task holds)."""
    values = settings(config)
    return ("python -m experiments.vertex " + " ".join(_flags(values, TOPOLOGY)) +
            f" --accelerator_type=YOUR_GPU --accelerator_count={tasks(config)[3]} "
            "--image_uri=IMAGE --base_output_dir=gs://BUCKET/plan -- " +
            " ".join(_target_flags(target) + _flags(values, TRAINING)))


def summary(planned, runners_up=3):
    """What a run chosen by the plan records (experiments.run --strategy=auto): the choice, the
    next configurations and their predictions."""
    def one(p):
        return {"configuration": p.config.name, "config": dataclasses.asdict(p.config),
                "settings": settings(p.config),
                "devices_per_task": tasks(p.config)[3],
                "predicted_examples_per_sec": p.prediction.examples_per_sec,
                "predicted_step_s": p.prediction.step_s,
                "predicted_communication_share": p.prediction.communication_share,
                "predicted_memory_per_device_bytes": p.prediction.memory_per_device_bytes,
                "changes": p.changes}
    chosen = best(planned)
    others = [p for p in planned if not p.dropped and not p.changes and p is not chosen]
    return {"chosen": one(chosen), "runners_up": [one(p) for p in others[:runners_up]],
            "configurations": len(planned),
            "dropped": sum(1 for p in planned if p.dropped)}


def commands(config, target):
    """(the experiments.run command, the experiments.vertex command) of `config`."""
    return ("python -m experiments.run " + " ".join(run_flags(config, target)),
            vertex_command(config, target))
