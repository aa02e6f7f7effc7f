"""An emulated network (tf_config/netshape.py): a tc tbf shaper on a local cluster's private
loopback. Applied inside the namespace, gone with it, holding the traffic to its rate, bad values
refused."""
import subprocess

import pytest

from tests.helpers import NO_PROBES, TINY, can_shape, processes_mentioning, records_in, run_module
from tf_config import netns, netshape

pytestmark = pytest.mark.integration

_MWMS = ["--strategy=multi_worker_mirrored", "--num_workers=2", "--model=mlp", *TINY,
         "--notensorboard"]


def _host_qdisc():
    return subprocess.run(["tc", "qdisc", "show", "dev", "lo"], capture_output=True,
                          text=True).stdout


@pytest.mark.skipif(not can_shape(), reason="no private namespace or tc tbf here")
def test_a_shaped_cluster_is_slower_and_leaves_the_host_untouched(tmp_path):
    """Slowed to its rate, asserted against the floor the bytes and the rate set, not against
    what an unshaped run happened to take: a busy machine can only add to the times."""
    before = _host_qdisc()
    real = run_module("experiments.run", *_MWMS, *NO_PROBES,
                      f"--results_dir={tmp_path / 'real'}")
    assert real.returncode == 0, real.stdout[-2000:] + real.stderr[-2000:]
    # 100 Mbit/s for every link together: the MLP's ~0.4 MB all-reduce takes tens of ms.
    slow = run_module("experiments.run", *_MWMS, "--emulate_bandwidth_gbps=0.1",
                      f"--results_dir={tmp_path / 'slow'}")
    assert slow.returncode == 0, slow.stdout[-2000:] + slow.stderr[-2000:]
    (fast_record,) = records_in(tmp_path / "real")
    (slow_record,) = records_in(tmp_path / "slow")
    assert fast_record["network"] is None
    network = slow_record["network"]
    assert network["emulated_gbps"] == 0.1 and network["method"] == netshape.METHOD_TBF
    assert "tbf" in network["qdisc"] and "rate 100Mbit" in network["qdisc"]
    # Every worker sends ~(N-1)/N x 2 x gradient bytes per ring all-reduce, both at once through
    # the one shaped loopback: the floor of an all-reduce is 2 x bytes x 8 / rate (unshaped, a
    # loopback all-reduce of these bytes takes a fraction of it), for the probe's and for each
    # training step's. Over an epoch the token bucket passes at most its burst (~1/10 of a
    # step's bytes here) beyond the rate.
    floor_s = 2 * slow_record["communication"]["gradient_bytes"] * 8 / 0.1e9
    assert slow_record["communication"]["probe_s"]["median"] >= 0.8 * floor_s
    for epoch in slow_record["epochs"]:
        assert epoch["time_s"] >= 0.8 * floor_s * slow_record["steps_per_epoch"], epoch
    assert _host_qdisc() == before  # the shaper lived and died with the namespace
    assert not processes_mentioning(str(tmp_path))


@pytest.mark.parametrize("args, fragment", [
    (["--emulate_bandwidth_gbps=-1"], "--emulate_bandwidth_gbps=-1 must be in (0, 1000]"),
    (["--emulate_bandwidth_gbps=5000"], "--emulate_bandwidth_gbps=5000 must be in (0, 1000]"),
    (["--emulate_latency_ms=-3"], "--emulate_latency_ms=-3 must be in"),
    (["--emulate_bandwidth_gbps=1", "--emulate_network=maybe"],
     "--emulate_network='maybe' is not valid; choose one of: strict, best_effort"),
    (["--emulate_bandwidth_gbps=1", "--num_workers=1"], "shape a local cluster's private"),
    (["--emulate_bandwidth_gbps=1", "--noisolate_network"], "--emulate_network=best_effort"),
    (["--emulate_bandwidth_schedule=1:1"], "the first at epoch 0"),
    (["--emulate_bandwidth_schedule=0:1,2:fast"], "--emulate_bandwidth_schedule=0:1,2:fast"),
    (["--emulate_bandwidth_schedule=0:1", "--emulate_bandwidth_gbps=1"],
     "drop --emulate_bandwidth_gbps=1"),
])
def test_bad_emulation_values_exit_2_and_write_nothing(tmp_path, args, fragment):
    proc = run_module("experiments.run", *_MWMS, *args, f"--results_dir={tmp_path / 'o'}",
                      timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert fragment in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(not netns.isolation_available(), reason="no private network namespace here")
def test_latency_without_netem_is_refused_in_one_line(tmp_path):
    try:
        netns.check_shaping(0, 5)
        pytest.skip("this kernel has netem")
    except netshape.ShapingUnavailable:
        pass
    proc = run_module("experiments.run", *_MWMS, "--emulate_latency_ms=5",
                      f"--results_dir={tmp_path / 'o'}", timeout=120)
    assert proc.returncode == 2
    assert "netem" in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "o").exists()
