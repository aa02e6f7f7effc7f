"""The recommendation for a target cluster (results/model/recommendation.py, experiments.recommend):
the measured or hand-written profile on a cluster spec, through the one cost model."""
import json

import pytest

from results.model import cost_model, recommendation, specs
from results.records import store as records
from tests.helpers import ROOT, run_module
from tests.results.model.test_scaling_model import _record

M = 1_000_000


def _records(tmp_path):
    # compute 0.1 (the 1-thread baseline); MWMS N=2: 0.13 s/step with a 0.02 s probe (0.01 of
    # this machine's sharing and waiting); PSS N=1 0.11 s/step with a 0.01 s probe.
    for r in [_record("b", "one_device", 1, 2.0, 20, run_name="baseline/cnn/1280/r0"),
              _record("m1", "multi_worker_mirrored", 1, 2.0, 20, probe=0.0),
              _record("m2", "multi_worker_mirrored", 2, 1.3, 10, probe=0.02),
              _record("p1", "parameter_server", 1, 2.2, 20, probe=0.01),
              _record("p2", "parameter_server", 2, 1.1, 20, probe=0.01)]:
        records.write_record(str(tmp_path), r)
    return records.load_records(str(tmp_path))[0]


def test_the_target_sees_compute_scaled_and_none_of_this_machines_sharing(tmp_path):
    """Defect 4: the N=2 run's 0.01 s of this machine's waiting is not projected; compute scales
    with the target's speed, the per-step overhead (host CPU) does not."""
    profile, dtype, where = recommendation.measured_profile(_records(tmp_path))
    assert profile.compute_s == pytest.approx(0.1) and "measured setting" in where
    assert profile.overhead_s == {"multi_worker_mirrored": 0.0,
                                  "parameter_server": pytest.approx(0.0)}
    cluster = specs.ClusterSpec(hosts=8, inter_host_gbps=8.0, inter_host_latency_us=0,
                                device_speedup=10.0)
    p = cost_model.predict(profile, cluster, "multi_worker_mirrored", dtype)
    comm = 2 * 7 / 8 * M / 1e9
    assert p.examples_per_sec == pytest.approx(8 * 64 / (0.01 + comm))
    text = recommendation.recommend(profile, cluster, dtype, where)
    assert f"| MWMS | {p.examples_per_sec:.0f} |" in text


def test_slow_network_many_workers_prefers_the_ring_and_says_why(tmp_path):
    profile, dtype, _ = recommendation.measured_profile(_records(tmp_path))
    cluster = specs.ClusterSpec(hosts=8, inter_host_gbps=1.0, device_speedup=20)
    text = recommendation.recommend(profile, cluster, dtype)
    # PSS: one ps link carries 8 workers' pushes and pulls: 2M/B x 8 = 128 ms per step.
    assert "Recommendation: MWMS" in text and "less communication per step" in text
    assert "| PSS |" in text and "Check it on this machine" not in text  # N=8: no local check


def test_two_worker_target_prints_the_emulated_check(tmp_path):
    profile, dtype, _ = recommendation.measured_profile(_records(tmp_path))
    cluster = specs.ClusterSpec(hosts=2, inter_host_gbps=10.0, device_speedup=10)
    text = recommendation.recommend(profile, cluster, dtype)
    # MWMS here moves 2M through the shaper where the target moves M per link: B_e = 2B/X.
    assert "--bandwidths=2,0" in text
    # PSS: target (G+P)/B x max(1, 2/1) per worker step; here both workers' G+P share the
    # shaper: B_e = B/X.
    assert "--bandwidths=1,0" in text


def test_a_busy_parameter_server_holds_pss_and_the_text_says_so(tmp_path):
    """The PSS N=1 run's ps busy 0.9 cores at 640 examples/s (90 ms of ps CPU per step of 64):
    on 8 fast hosts one ps of one core holds PSS at 711 examples/s, 2 ps of 2 cores at 2844."""
    recs = _records(tmp_path)
    for r in recs:
        if r["run_id"] == "p1":
            r["cpu"] = {"scope": "all tasks", "seconds": 6.0, "wall_s": 4.0,
                        "examples_per_cpu_second": 2560 / 6.0,
                        "cores_by_task": {"ps:0": 0.9, "worker:0": 0.6}}
    profile, dtype, _ = recommendation.measured_profile(recs)
    assert profile.ps_cpu_s_per_step == pytest.approx(0.9 / 640 * 64)
    one = specs.ClusterSpec(hosts=8, inter_host_gbps=100.0)
    text = recommendation.recommend(profile, one, dtype)
    assert "| PSS | 711 |" in text and "| the parameter servers' CPU |" in text
    assert ("PSS is held at 711 examples/s by the parameter servers' CPU (1 ps of 1 core(s) "
            "each, 90.00 ms of ps CPU per worker step measured") in text
    more = specs.ClusterSpec(hosts=8, inter_host_gbps=100.0, num_ps=2, ps_cores=2)
    assert "| PSS | 2844 |" in recommendation.recommend(profile, more, dtype)


def test_recommend_from_a_hand_written_profile_and_cluster(tmp_path):
    """The documented example files: a ResNet-50 profile and an 8-host cluster, no records."""
    proc = run_module("experiments.recommend",
                      "--profile=docs/examples/profile_resnet50_v100.json",
                      "--cluster=docs/examples/cluster_8x8_v100_25g.json", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "8 host(s) x 8 device(s) (64 workers)" in proc.stdout
    assert "Recommendation: MWMS" in proc.stdout
    with open(f"{ROOT}/docs/examples/cluster_8x8_v100_25g.json") as f:
        assert json.load(f)["devices_per_host"] == 8


@pytest.mark.parametrize("args, fragment", [
    ([], "run `python -m experiments.compare` first, or give --profile"),
    (["--cluster=docs/examples/cluster_8x8_v100_25g.json", "--workers=4"],
     "already says the target: drop --workers"),
    (["--profile=docs/examples/nothing.json"], "--profile=docs/examples/nothing.json: cannot read"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, args, fragment):
    proc = run_module("experiments.recommend", f"--results_dir={tmp_path}", *args, timeout=120)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and fragment in lines[0], proc.stderr
