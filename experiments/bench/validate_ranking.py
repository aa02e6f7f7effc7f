"""Benchmark (not a test): does the planner rank configurations as they measure? Issue 29's
ranking check on this machine, out of sample (docs/benchmarks.md has the protocol and results).

    python -m experiments.bench.validate_ranking --results_dir=/tmp/ranking

Per model: the workload profile is measured first (experiments/adaptive/profile_here.py: one
device, one MWMS and one PSS worker, one thread each; this machine's sharing and one device at
machine_cores threads and the global batch) and then held fixed. Per bandwidth B, the cluster
spec is this machine as 2 one-core devices on one shaped loopback at B (shared medium), all its
tasks on this machine's cores (machine_cores); the planner predicts every configuration that
trains the same updates at one global batch (experiments/adaptive/decide.candidates), and each
runs as the spec describes it (every task of a cluster at 1 thread; one device, one process, at
machine_cores threads: at 1 with --machine_cores=0), shaped at B where it is a cluster. Per memory cap (a
share of the largest configuration's predicted memory per device), the scenario ranks what fits
under it (the cost model's memory per device; the run's own estimate is printed beside).
Scenarios: models x bandwidths x caps.
Printed: each scenario's predicted and measured order, whether the first choice is the measured
fastest or within --within of it, and Spearman's rank correlation.
"""
import dataclasses
import glob
import json
import os
import statistics
import subprocess
import sys

from absl import app, flags

from experiments.adaptive import decide, profile_here
from experiments.config import RunConfig
from experiments.config.cli import parse_flags
from models import default_dataset
from experiments.config import planned_run
from results.model import planner, specs
from strategies import kind, needs_cluster

_DIR = flags.DEFINE_string("results_dir", "/tmp/ranking", "Where the runs' records go.")
_MODELS = flags.DEFINE_list("models", ["cnn", "resnet", "mlp"], "Models.")
_BANDWIDTHS = flags.DEFINE_list("bandwidths", ["10", "0.2"], "Gbit/s of the shaped loopback.")
_CAPS = flags.DEFINE_list("caps", ["0", "0.75"], "Memory caps per device, as a share of the "
                          "largest configuration's predicted memory per device (0: none; 0.75 "
                          "rules the largest out).")
_EXAMPLES = flags.DEFINE_integer("train_examples", 2048, "Examples per epoch of each run.")
_EPOCHS = flags.DEFINE_integer("epochs", 3, "Epochs of each run (the first is not timed).")
_GLOBAL = flags.DEFINE_integer("global_batch", 128, "The global batch every configuration "
                               "trains.")
_WITHIN = flags.DEFINE_float("within", 0.05, "A first choice this close to the fastest counts.")
_CORES = flags.DEFINE_integer("machine_cores", len(os.sched_getaffinity(0)), "The cluster "
                              "spec's machine_cores: the cores the whole local cluster shares "
                              "(0: price each device with cores of its own, as the first "
                              "protocol did).", lower_bound=0)


def _ranks(xs):
    """Ranks from 1, ties sharing their average rank."""
    order = sorted(range(len(xs)), key=xs.__getitem__)
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(a, b):
    """Spearman's rank correlation (Pearson's of the ranks, ties averaged); None when either
    side is constant (no order to compare) or has fewer than 2 values."""
    if len(a) < 2:
        return None
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = statistics.mean(ra), statistics.mean(rb)
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    if not va or not vb:
        return None
    return sum((x - ma) * (y - mb) for x, y in zip(ra, rb)) / (va * vb) ** 0.5


def _measure(model, config, gbps, directory):
    """Steady examples/s and the record's peak memory per device (bytes) of one run."""
    values = planned_run.settings(config)
    # one process has the machine's cores to itself, as --strategy=one_device with its default
    # threads does (the profile's one_process); every task of a cluster has one core
    threads = _CORES.value if kind(config.strategy).single_device and _CORES.value else 1
    name = f"{model}-{config.name}-b{gbps}".replace(" ", "").replace("=", "") + \
        (f"-t{threads}" if threads > 1 else "")
    out = os.path.join(directory, name)
    if not glob.glob(os.path.join(out, "records", "*.json")):
        flags_ = [f"--{k}={v}" for k, v in values.items()]
        shaped = needs_cluster(values["strategy"], values["num_workers"])
        command = [sys.executable, "-m", "experiments.run", f"--model={model}",
                   f"--dataset={default_dataset(model)}", *flags_,
                   f"--global_batch_size={_GLOBAL.value}", f"--epochs={_EPOCHS.value}",
                   f"--train_examples={_EXAMPLES.value}", "--eval_examples=256",
                   "--nocomm_probe", "--nocompute_probe", "--notensorboard", f"--threads={threads}",
                   "--threads_per_worker=1", f"--results_dir={out}"] + \
            ([f"--emulate_bandwidth_gbps={gbps}"] if shaped else [])
        subprocess.run(command, check=True, capture_output=True)
    (path,) = glob.glob(os.path.join(out, "records", "*.json"))
    with open(path) as f:
        record = json.load(f)
    memory = max(d["bytes"] for d in record["memory_per_device"])
    return record["steady_state"]["examples_per_sec"]["median"], memory


def main(argv):
    del argv
    os.makedirs(_DIR.value, exist_ok=True)
    lines, hits, scenarios, correlations = [], 0, 0, []
    for model in _MODELS.value:
        cfg = RunConfig(model=model, dataset=default_dataset(model),
                        batch_size_per_replica=_GLOBAL.value // 2,
                        global_batch_size=_GLOBAL.value, results_dir=_DIR.value)
        local = specs.ClusterSpec(hosts=2, devices_per_host=1, shared_medium=True,
                                  machine_cores=_CORES.value)
        path = profile_here.measure(cfg, ["run", f"--model={model}",
                                          f"--dataset={cfg.dataset}",
                                          f"--batch_size_per_replica={cfg.batch_size_per_replica}"],
                                    cluster=local)
        profile = specs.load_profile(path)
        for gbps in (float(b) for b in _BANDWIDTHS.value):
            cluster = decide.with_network(local, gbps)
            configs = decide.candidates(profile, cluster, _GLOBAL.value)
            measured = {c: _measure(model, c, gbps, _DIR.value) for c in configs}
            largest = max(planner.predict(decide.at_batch(
                profile, _GLOBAL.value // c.replicas), cluster, c)
                .prediction.memory_per_device_bytes for c in configs)
            for cap in (float(c) for c in _CAPS.value):
                capped = dataclasses.replace(cluster, memory_per_device_mb=cap * largest / 1e6)
                predicted = {c: decide.predicted_rate(profile, capped, c, _GLOBAL.value)
                             for c in configs}
                fits = [c for c in configs if predicted[c] is not None]
                if len(fits) < 2:
                    lines.append(f"{model} {gbps:g} Gbit/s cap {cap:g}: {len(fits)} "
                                 f"configuration(s) fit; no ranking")
                    continue
                by_prediction = sorted(fits, key=lambda c: -predicted[c])
                fastest = max(fits, key=lambda c: measured[c][0])
                first = by_prediction[0]
                hit = measured[first][0] >= (1 - _WITHIN.value) * measured[fastest][0]
                rho = spearman([predicted[c] for c in fits], [measured[c][0] for c in fits])
                scenarios += 1
                hits += hit
                if rho is not None:
                    correlations.append(rho)
                tie = " (tied first: the planner's order among equals)" if \
                    predicted[by_prediction[1]] == predicted[first] else ""
                lines.append(f"{model} {gbps:g} Gbit/s cap {cap or 'none'}: first choice "
                             f"{first.name}{tie} ({measured[first][0]:.0f} ex/s measured) vs "
                             f"fastest {fastest.name} ({measured[fastest][0]:.0f}): "
                             f"{'hit' if hit else 'MISS'}; rho "
                             f"{'undefined (constant)' if rho is None else f'{rho:+.2f}'}")
                for c in by_prediction:
                    lines.append(f"    {c.name:14s} predicted {predicted[c]:7.0f}  measured "
                                 f"{measured[c][0]:7.0f}  ratio {measured[c][0] / predicted[c]:.2f}"
                                 f"  memory {measured[c][1] / 1e6:.1f} MB")
    for line in lines:
        print(line)
    print(f"first choice measured fastest or within {_WITHIN.value:.0%}: {hits} of {scenarios} "
          f"scenarios; median rank correlation {statistics.median(correlations):+.2f} over "
          f"{len(correlations)} with one" if correlations else "no scenario ranked")



if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)
