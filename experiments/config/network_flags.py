"""The scaling model's projected network as flags, shared by `experiments.compare` and
`experiments.report` (both build the report)."""
from absl import flags

from results.model.scaling_model import Network

_NET_GBPS = flags.DEFINE_float("network_gbps", 10.0, "Scaling model: link bandwidth (Gbit/s) of "
                               "the projected cluster.", lower_bound=1e-3)
_NET_LATENCY = flags.DEFINE_float("network_latency_us", 50.0, "Scaling model: per-message "
                                  "latency (microseconds) of the projected cluster.",
                                  lower_bound=0.0)


def network():
    return Network(_NET_GBPS.value, _NET_LATENCY.value)
