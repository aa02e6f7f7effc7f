"""Which strategy for a target cluster? A workload profile (measured by a comparison, or written
by hand) on a cluster (from flags, or a cluster spec written by hand), through the one cost model
(results/model/cost_model.py): the projected throughput of MWMS and PSS, best first.

    python -m experiments.recommend --results_dir=runs/compare --workers=8 --network_gbps=10
    python -m experiments.recommend --results_dir=runs/compare --workers=8 --network_gbps=1 \
        --accelerator_speedup=20          # each worker computes 20x faster than this CPU
    python -m experiments.recommend --profile=docs/examples/profile_resnet50_v100.json \
        --cluster=docs/examples/cluster_8x8_v100_25g.json

From flags the target has --workers hosts of one device each, each with its own full-duplex
link; a cluster spec (JSON, specs.ClusterSpec's fields) also says devices per host, the
bandwidth and latency within a host, memory per device and where the parameter servers sit.
A comparison writes the profile it measured beside its report
(profile-<model>-<examples>-b<batch>-k<K>-<dtype>.json).
To check a recommendation here, emulate a network that keeps the target's compute:communication
ratio: the printed `experiments.compare --experiments=network` command does (N=2 only).
"""
from experiments.engine import tf_settings

tf_settings.apply()  # before TensorFlow loads: quiet start-up, the toolkit's kernels

from absl import app, flags  # noqa: E402

from experiments.config.cli import bad_input, parse_flags  # noqa: E402
from results.model.specs import SYNC_DTYPES  # noqa: E402

_RESULTS_DIR = flags.DEFINE_string("results_dir", "runs/compare", "Records of a comparison with "
                                   "probed N >= 2 runs of MWMS or PSS and the 1-thread baseline "
                                   "(or N=1 runs): the profile is fitted from them.")
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
_PS_CORES = flags.DEFINE_integer("ps_cores", 0, "Cores each parameter server of the target "
                                  "applies updates with (0: as many as the profile's ps had).",
                                  lower_bound=0)
_MODEL = flags.DEFINE_string("model", "", "Which measured model (default: the only one).")
_PROFILE = flags.DEFINE_string("profile", "", "A workload profile (JSON) instead of the "
                               "records: e.g. a comparison's profile-*.json, or your own.")
_CLUSTER = flags.DEFINE_string("cluster", "", "A cluster spec (JSON) instead of --workers, "
                               "--network_gbps, --network_latency_us, --accelerator_speedup, "
                               "--num_ps and --ps_cores.")
_DTYPE = flags.DEFINE_enum("gradient_sync_dtype", None, list(SYNC_DTYPES), "Sync dtype to "
                           "predict (default: a measured profile's own; a --profile's float32).")
_CLUSTER_FLAGS = ("workers", "network_gbps", "network_latency_us", "accelerator_speedup",
                  "num_ps", "ps_cores")


def main(argv):
    del argv
    from results.model import recommendation, specs
    from results.records.store import load_records

    try:
        cluster = specs.target_cluster(
            _CLUSTER.value, [name for name in _CLUSTER_FLAGS if flags.FLAGS[name].present],
            hosts=_WORKERS.value, inter_host_gbps=_GBPS.value,
            inter_host_latency_us=_LATENCY.value, device_speedup=_SPEEDUP.value,
            num_ps=_NUM_PS.value, ps_cores=_PS_CORES.value)
        if _PROFILE.value:
            profile, where = specs.load_profile(_PROFILE.value), f"from {_PROFILE.value}"
            dtype = _DTYPE.value or "float32"
        else:
            records, _ = load_records(_RESULTS_DIR.value)
            profile, dtype, where = recommendation.measured_profile(records, _MODEL.value)
            dtype = _DTYPE.value or dtype
        text = recommendation.recommend(profile, cluster, dtype, where)
    except ValueError as e:  # SpecError too: e.g. a dtype the profile has no bytes for
        bad_input(e)
    print(text)


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)
