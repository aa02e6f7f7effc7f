"""Which configuration for this model on that cluster? Every data-parallel configuration the
toolkit runs (one device; MWMS on N devices; PSS on N workers x K ps; gradient accumulation;
16-bit gradient sync), predicted through the one cost model from a workload profile, the ones
that do not fit a device's memory dropped (and said why), ranked; plan.md, plan.csv, plan.png
and the exact command of the best (results/model/planner.py; results/report/plan.py writes it).

    python -m experiments.plan --profile=docs/examples/profile_resnet50_v100.json \
        --cluster=docs/examples/cluster_8x8_v100_25g.json --out_dir=runs/plan
    python -m experiments.plan --results_dir=runs/compare --hosts=4 --devices_per_host=1 \
        --network_gbps=10 --accelerator_speedup=20 --device_memory_mb=16000

The profile is a file (--profile: a comparison's profile-*.json, or written by hand), a
comparison's measured one (--results_dir, as experiments.recommend fits it), or, with neither,
measured here first for --model (three short runs, as --strategy=auto measures it):

    python -m experiments.plan --model=cnn --hosts=8 --network_gbps=25

The cluster is a cluster spec (--cluster, specs.ClusterSpec's fields) or the flags below;
--device_memory_mb overrides a spec's cap.
"""
from experiments.engine import tf_settings

tf_settings.apply()  # before TensorFlow loads: quiet start-up, the toolkit's kernels

import dataclasses  # noqa: E402

from absl import app, flags  # noqa: E402

from experiments.config.cli import bad_input, parse_flags  # noqa: E402

_PROFILE = flags.DEFINE_string("profile", "", "A workload profile (JSON); empty: fitted from "
                               "--results_dir's records.")
_RESULTS_DIR = flags.DEFINE_string("results_dir", "runs/compare", "A comparison's records "
                                   "(without --profile).")
_MODEL = flags.DEFINE_string("model", "", "The model the printed commands train (a built-in, "
                             "MODULE:FUNCTION or PATH.keras); with --results_dir also which "
                             "measured model (default: the only one).")
_DATASET = flags.DEFINE_string("dataset", "", "The dataset the printed commands train on (default: "
                               "the measured setting's; with --profile, the run's default).")
_CLUSTER = flags.DEFINE_string("cluster", "", "A cluster spec (JSON) instead of the flags "
                               "--hosts .. --accelerator_speedup.")
_HOSTS = flags.DEFINE_integer("hosts", 4, "Hosts of the target.", lower_bound=1)
_DEVICES = flags.DEFINE_integer("devices_per_host", 1, "Devices per host.", lower_bound=1)
_GBPS = flags.DEFINE_float("network_gbps", 10.0, "Each host's link (Gbit/s).", lower_bound=1e-3)
_LATENCY = flags.DEFINE_float("network_latency_us", 50.0, "Per-message latency between hosts.",
                              lower_bound=0.0)
_SPEEDUP = flags.DEFINE_float("accelerator_speedup", 1.0, "A target device's speed relative to "
                              "the profile's device.", lower_bound=1e-3)
_MEMORY = flags.DEFINE_float("device_memory_mb", None, "Memory per device (MB); overrides the "
                             "cluster spec's (0: not limited).", lower_bound=0.0)
_OUT_DIR = flags.DEFINE_string("out_dir", "runs/plan", "Where plan.md, plan.csv, plan.png go.")
_CLUSTER_FLAGS = ("hosts", "devices_per_host", "network_gbps", "network_latency_us",
                  "accelerator_speedup")


def _measured_here(model, dataset, cluster):
    """The path of --model's profile measured on this machine (reused when measured before),
    under --out_dir; exits 1 in one line when a profiling run fails."""
    import sys

    from experiments.adaptive import profile_here
    from experiments.config import RunConfig, check_model

    check_model(model)
    cfg = RunConfig(model=model, dataset=dataset, results_dir=_OUT_DIR.value)
    argv = ["experiments.plan", f"--model={model}", *([f"--dataset={dataset}"] if dataset else [])]
    try:
        return profile_here.measure(cfg, argv, out=lambda line: print(
            line.replace("auto: ", "plan: "), flush=True), cluster=cluster)
    except profile_here.ProfilingFailed as e:
        sys.exit(str(e).replace("auto: ", "plan: "))


def main(argv):
    if len(argv) > 1:
        bad_input(f"unexpected arguments {argv[1:]}; all options are --flags")
    from experiments.config import ConfigError, auto, check_dataset, check_model
    from experiments.config import planned_run
    from results.model import planner, recommendation, specs
    from results.records.cells import SETTING_KEYS
    from results.records.store import load_records
    from results.report import plan as plan_report

    try:
        cluster = specs.target_cluster(
            _CLUSTER.value, [name for name in _CLUSTER_FLAGS if flags.FLAGS[name].present],
            hosts=_HOSTS.value, devices_per_host=_DEVICES.value, inter_host_gbps=_GBPS.value,
            inter_host_latency_us=_LATENCY.value, device_speedup=_SPEEDUP.value)
        if _MEMORY.value is not None:
            cluster = dataclasses.replace(cluster, memory_per_device_mb=_MEMORY.value)
        dataset = _DATASET.value
        if _PROFILE.value:
            profile, note = specs.load_profile(_PROFILE.value), f"from {_PROFILE.value}"
        else:
            records, _ = load_records(_RESULTS_DIR.value)
            try:
                fit, note = recommendation.latest_fit(records, _MODEL.value)
                profile = fit.profile
                dataset = dataset or fit.setting[SETTING_KEYS.index("dataset")]
            except ValueError:
                if not _MODEL.value:
                    raise
                # no homework: the model's profile measured here, as --strategy=auto does
                if dataset:
                    check_dataset(dataset)
                path = _measured_here(_MODEL.value, dataset, cluster)
                profile, note = specs.load_profile(path), f"measured here ({path})"
        model = _MODEL.value or profile.model
        try:
            check_model(model)
        except ConfigError:  # a hand-written profile's name, not a model this toolkit builds
            if _MODEL.value:
                raise
            note += (f"; {model!r} is not a model of this toolkit: the commands say "
                     f"MODULE:FUNCTION (your model; or give --model)")
            model = "MODULE:FUNCTION"
        if dataset:
            check_dataset(dataset)
        # a cluster on one machine: its command pinned as a comparison's cluster there is
        cores = cluster.machine_cores
        target = planned_run.CommandTarget(model, profile.batch, dataset, (
            lambda values: auto.placement_of(values, cores, machine_cores=cores).pinned)
            if cores else None)
        planned = planner.plan(profile, cluster)
    except (ValueError, ConfigError) as e:  # SpecError too
        bad_input(e)
    best = planner.best(planned)
    commands = planned_run.commands(best.config, target) if best is not None else None
    paths = plan_report.write(planned, profile, cluster, commands, _OUT_DIR.value, note)
    if best is None:
        print(f"plan: no configuration fits {cluster.memory_per_device_mb:g} MB per device "
              f"(see {paths[0]})")
    else:
        print(f"plan: best of {len(planned)} configurations that train what the profile "
              f"trained: {best.config.name}, {best.prediction.examples_per_sec:.0f} examples/s "
              f"predicted")
        print("  " + commands[0])
        faster = next((p for p in planned if not p.dropped and p.changes), None)
        if faster is not None and faster.prediction.examples_per_sec > \
                best.prediction.examples_per_sec:
            print(f"plan: faster if your training allows it: {faster.config.name}, "
                  f"{faster.prediction.examples_per_sec:.0f} examples/s ({faster.changes}; "
                  f"plan.md ranks it apart)")
    for p in paths:
        print(f"wrote {p}")


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)
