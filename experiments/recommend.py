"""Which strategy for a target cluster? From the measured runs and the network experiment's
model, the projected throughput of MWMS and PSS on N workers with a given network.

    python -m experiments.recommend --results_dir=runs/network --workers=8 --network_gbps=10
    python -m experiments.recommend --results_dir=runs/network --workers=8 --network_gbps=1 \
        --accelerator_speedup=20          # each worker computes 20x faster than this CPU

The target's network is a real one: each worker has its own full-duplex link of B Gbit/s (ring
all-reduce 2(N-1)/N·M/B + 2(N-1)·a; K parameter servers 2M/B·max(1, N/K) + 2a:
results/scaling_model.py). Compute t_comp is this machine's (from the N=1 runs) divided by
--accelerator_speedup; t_sync (dispatch, waiting) is this machine's, not scaled. To check a
recommendation here, emulate a network that keeps the target's compute:communication ratio:
the printed `experiments.compare --experiments=network` command does (N=2 only).
"""
from absl import app, flags

from experiments.config.cli import bad_input, parse_flags

_RESULTS_DIR = flags.DEFINE_string("results_dir", "runs/network", "Records of a comparison with "
                                   "N=1 and N=2 runs of MWMS and PSS (the network experiment's).")
_WORKERS = flags.DEFINE_integer("workers", 8, "Workers of the target cluster.", lower_bound=1)
_GBPS = flags.DEFINE_float("network_gbps", 10.0, "Per-link bandwidth of the target (Gbit/s).",
                           lower_bound=1e-3)
_LATENCY = flags.DEFINE_float("network_latency_us", 50.0, "Per-message latency of the target.",
                              lower_bound=0.0)
_SPEEDUP = flags.DEFINE_float("accelerator_speedup", 1.0, "How many times faster a target "
                              "worker computes a step than this machine's worker.",
                              lower_bound=1e-3)
_NUM_PS = flags.DEFINE_integer("num_ps", 1, "Parameter servers of the target (PSS).",
                               lower_bound=1)
_MODEL = flags.DEFINE_string("model", "", "Which measured model (default: the only one).")


def main(argv):
    del argv
    from results import recommendation
    from results.records import load_records

    records, _ = load_records(_RESULTS_DIR.value)
    try:
        text = recommendation.recommend(records, _WORKERS.value, _GBPS.value, _LATENCY.value,
                                        _SPEEDUP.value, _NUM_PS.value, _MODEL.value)
    except ValueError as e:
        bad_input(e)
    print(text)


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)
