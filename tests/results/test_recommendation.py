"""The recommendation for a target cluster (results/recommendation.py, experiments.recommend)."""
import pytest

from results import network, records, recommendation
from results.scaling_model import Network
from tests.helpers import run_module
from tests.results.test_scaling_model import _record

M = 1_000_000


def _records(tmp_path):
    # MWMS: t_comp 0.1, t_sync 0.01 (N=2: 0.13 s/step with a 0.02 s probe).
    # PSS: t_comp 0.1 (N=1: 0.11 s/step, 0.01 s probe), t_sync 0 (N=2: 0.11 s/step, 0.01 probe).
    for r in [_record("m1", "multi_worker_mirrored", 1, 2.0, 20, probe=0.0),
              _record("m2", "multi_worker_mirrored", 2, 1.3, 10, probe=0.02),
              _record("p1", "parameter_server", 1, 2.2, 20, probe=0.01),
              _record("p2", "parameter_server", 2, 1.1, 20, probe=0.01)]:
        records.write_record(str(tmp_path), r)
    return records.load_records(str(tmp_path))[0]


def test_projection_scales_compute_not_sync(tmp_path):
    fitted = network.models(_records(tmp_path), shaped_only=False)
    (mwms,) = [m for (_, s), m in fitted.items() if s == "multi_worker_mirrored"]
    net = Network(8.0, 0.0)  # 1e9 bytes/s
    rate, compute, comm, sync = recommendation.project(mwms, 8, net, 10.0, 1)
    assert compute == pytest.approx(0.01) and sync == pytest.approx(0.01)
    assert comm == pytest.approx(2 * 7 / 8 * M / 1e9)
    assert rate == pytest.approx(8 * 64 / (0.01 + 0.01 + comm))


def test_slow_network_many_workers_prefers_the_ring_and_says_why(tmp_path):
    text = recommendation.recommend(_records(tmp_path), workers=8, gbps=1.0, latency_us=50,
                                    speedup=20, num_ps=1)
    # PSS: one ps link carries 8 workers' pushes and pulls: 2M/B x 8 = 128 ms per step.
    assert "Recommendation: MWMS" in text and "less communication per step" in text
    assert "| PSS |" in text and "Check it on this machine" not in text  # N=8: no local check


def test_two_worker_target_prints_the_emulated_check(tmp_path):
    text = recommendation.recommend(_records(tmp_path), workers=2, gbps=10.0, latency_us=50,
                                    speedup=10, num_ps=1)
    # MWMS here moves 2M through the shaper where the target moves M per link: B_e = 2B/X.
    assert "--bandwidths=2,0" in text
    # PSS: target 2M/B x max(1, 2/1) per step; here 2M/B_e: B_e = B / X / 2.
    assert "--bandwidths=0.5,0" in text


def test_recommend_without_the_runs_exits_2(tmp_path):
    proc = run_module("experiments.recommend", f"--results_dir={tmp_path}", "--workers=8",
                      timeout=120)
    assert proc.returncode == 2
    assert "run `python -m experiments.compare --experiments=network` first" in \
        proc.stderr.strip().splitlines()[-1]
