"""The network experiment's model (results/report/network.py) by hand and from fixture records: the
shared-shaper cost model, the fit to unshaped runs, errors, the crossover, the report's section."""
import csv

import matplotlib.image as mpimg
import pytest

from results.model import cost_model, specs
from results.records import store as records
from results.report import network
from results.report.build import build
from tests.results.model.test_scaling_model import _record

M = 1_000_000  # gradient bytes of the fixture records


def _profile(compute=0.1, overhead=None, cpu=None):
    return specs.WorkloadProfile("cnn", 64, compute, {"float32": M}, pull_bytes=M,
                                 overhead_s=overhead or {}, cpu_s_per_example=cpu or {})


def _model(strategy, local=0.0, loopback=0.0, cores=0, **kw):
    return network.Model(strategy, _profile(**kw), "float32", local, loopback, cores)


def test_shared_shaper_cost_model_by_hand():
    mwms = _model("multi_worker_mirrored", local=0.01)
    # Both workers send M through one 0.08 Gbit/s (1e7 bytes/s) shaper: 2 M / 1e7 = 0.2 s.
    assert mwms.comm_s(2, 0.08) == pytest.approx(0.2)
    assert mwms.rate(2, 0.08) == pytest.approx(2 * 64 / (0.1 + 0.01 + 0.2))
    pss = _model("parameter_server")
    # A worker step pushes M and pulls M (0.2 s); two workers share the shaper: at most
    # 1e7 / 2e6 = 5 steps/s for the whole cluster, i.e. 320 examples/s.
    assert pss.rate(2, 0.08) == pytest.approx(min(2 * 64 / 0.3, 320))
    assert pss.rate(2, 0.08) == pytest.approx(320)
    # the machine's cores, whatever the network: 2 cores / 0.02 CPU-s per example
    capped = _model("parameter_server", cores=2, cpu={"parameter_server": 0.02})
    assert capped.rate(2, 80) == pytest.approx(100.0)
    # What the same all-reduce costs on the real loopback is paid in series with the shaper.
    series = _model("multi_worker_mirrored", local=0.01, loopback=0.02)
    assert series.comm_s(2, 0.08) == pytest.approx(0.2 + 0.02)
    # the one cost model, not a second one (defect 8)
    shaper = specs.ClusterSpec(hosts=2, inter_host_gbps=0.08, shared_medium=True)
    assert pss.comm_s(2, 0.08) == pytest.approx(cost_model.parameter_server_s(M, M, shaper))


def _network_records(tmp_path, measured_slow_rate, config=None):
    def rec(run_id, strategy, n, epoch_time, steps, probe, gbps=None):
        r = _record(run_id, strategy, n, epoch_time, steps, probe=probe)
        r["config"] = dict(config or {})  # a real record's flags (its setting reads them)
        if gbps:
            r["network"] = {"emulated_gbps": gbps, "latency_ms": None, "method": "tc tbf"}
        return r

    # MWMS N=1: 0.1 s/step, no probe cost. N=2 on the real loopback: 0.13 s/step with a 0.02 s
    # probe -> this machine's local term 0.01. Shaped to 0.08 Gbit/s the model says 0.1 + 0.01 +
    # 0.2 + 0.02 (the loopback's own probe, in series) = 0.33 s/step.
    slow_epoch = 10 * 2 * 64 / measured_slow_rate
    for r in [rec("m1", "multi_worker_mirrored", 1, 2.0, 20, 0.0),
              rec("m2", "multi_worker_mirrored", 2, 1.3, 10, 0.02),
              rec("m3", "multi_worker_mirrored", 2, slow_epoch, 10, 0.2, gbps=0.08)]:
        records.write_record(str(tmp_path), r)


def test_rows_fit_to_the_real_loopback_and_check_the_shaped_runs(tmp_path):
    predicted = 2 * 64 / 0.33
    _network_records(tmp_path, measured_slow_rate=predicted / 1.1)  # model 10% too optimistic
    recs, _ = records.load_records(str(tmp_path))
    fitted = network.models(recs)
    (model,) = fitted.values()
    assert (model.profile.compute_s, model.local_s) == (pytest.approx(0.1), pytest.approx(0.01))
    rows = {r["bandwidth_gbps"]: r for r in network.rows(recs)}
    assert rows[0.08]["predicted_examples_per_sec"] == pytest.approx(predicted)
    assert rows[0.08]["error"] == pytest.approx(0.1)
    assert rows[0.08]["delivered_gbps"] == pytest.approx(2 * M * 8 / 0.2 / 1e9)
    assert rows[0.0]["note"] == "fit point (real loopback)"
    assert rows[0.0]["error"] == pytest.approx(0.0)
    paths, _, _ = build(str(tmp_path))
    report = (tmp_path / "report.md").read_text()
    assert "## Network experiment" in report and "+10.0%" in report
    assert "1/1 within ±15%" in report
    # no calibration cell (a K > 1 setting has none): said, and paid in series
    assert "no shaped calibration cell among these records (the network experiment runs one " \
           "per all-reduce strategy, at K=1): the shaped transfer and p0 are paid in series" in \
           report
    png = str(tmp_path / "network.png")
    assert png in paths and mpimg.imread(png).shape[0] > 100
    assert (tmp_path / "network.csv").read_text().startswith("model,")


def test_shaped_runs_stay_out_of_the_summary_and_the_scaling_fit(tmp_path):
    _network_records(tmp_path, measured_slow_rate=300)
    build(str(tmp_path))
    with open(tmp_path / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    # m2 (real loopback) is an ordinary MWMS N=2 run; m3 (shaped) is not in the summary.
    assert [(r["strategy"], r["n"], r["runs"]) for r in rows] == [
        ("multi_worker_mirrored", "1", "1"), ("multi_worker_mirrored", "2", "1")]


def test_crossover_where_pss_overtakes_mwms():
    # On a slow network MWMS wins: its ring puts 2M through the shaper per step of both workers
    # (2 batches), PSS 2M per batch. On a fast one this PSS wins: MWMS pays 0.1 s locally.
    mwms = _model("multi_worker_mirrored", local=0.1)
    pss = _model("parameter_server")
    fitted = {("s", "multi_worker_mirrored"): mwms, ("s", "parameter_server"): pss}
    b = network.crossover(fitted, "s")
    assert b is not None
    assert mwms.rate(2, b) == pytest.approx(pss.rate(2, b), rel=1e-9)
    assert pss.rate(2, b * 2) > mwms.rate(2, b * 2) and mwms.rate(2, b / 2) > pss.rate(2, b / 2)
    # one crossing, one figure: the plot searches other bounds than the report
    assert network.crossover(fitted, "s", low=b / 3, high=b * 7) == pytest.approx(b, rel=1e-9)
    assert f"lines cross at {b:.3g} Gbit/s" in network.crossing_line(fitted, "s")


def test_lines_that_meet_at_the_pss_bend_and_run_together_are_a_tie():
    """Without a local term the two lines are one above PSS's bend (a worker's push and pull
    cost what MWMS's ring does per step): the report says they meet and tie there, not that
    PSS overtakes (a crossing within a hair of the bend is the two lines running together)."""
    fitted = {("s", "multi_worker_mirrored"): _model("multi_worker_mirrored"),
              ("s", "parameter_server"): _model("parameter_server")}
    b = network.crossover(fitted, "s")
    assert b is not None and network.gap_above(fitted, "s", b) < network.TIE
    line = network.crossing_line(fitted, "s")
    assert f"meet at {b:.3g} Gbit/s" in line and "a predicted tie" in line
    assert "cross at" not in line


def test_an_all_reduce_hides_the_measured_share_of_its_loopback_cost(tmp_path):
    """The shaped collectives cell's probe gives the share h of min(transfer, p0) that runs beside
    the other; the shaped rows are predicted with it and the calibration (marked by its run
    name) is no row. Without the cell the sum is paid in series (the test above)."""
    _network_records(tmp_path, measured_slow_rate=100.0)
    # at 0.16 Gbit/s the transfer is 2 M / 2e7 = 0.1 s and p0 0.02 s: in series 0.12; the probe
    # took 0.11, so half of p0 ran beside the transfer
    cal = _record("c", "multi_worker_mirrored", 2, 0.5, 4, probe=0.11,
                  run_name="collectives-multi_worker_mirrored-n2-b0.16/cnn/4096/r0")
    cal.update(train_examples=4096, network={"emulated_gbps": 0.16, "latency_ms": None,
                                             "method": "tc tbf"})
    records.write_record(str(tmp_path), cal)
    recs, _ = records.load_records(str(tmp_path))
    (model,) = network.models(recs).values()
    assert model.hidden == pytest.approx(0.5) and model.calibrations == [(0.16, 0.11)]
    # at 0.08 Gbit/s: 0.2 + 0.02 - 0.5 x min(0.2, 0.02) = 0.21 s of synchronization
    assert model.comm_s(2, 0.08) == pytest.approx(0.21)
    rows = network.rows(recs)
    assert sorted(r["bandwidth_gbps"] for r in rows) == [0.0, 0.08]  # the calibration: no row
    shaped = next(r for r in rows if r["bandwidth_gbps"] == 0.08)
    assert shaped["predicted_examples_per_sec"] == pytest.approx(2 * 64 / (0.1 + 0.01 + 0.21))
    assert shaped["hidden_share"] == pytest.approx(0.5)
    # within [0, 1]: a probe slower than the sum hides nothing
    assert network.hidden_share(model, [(0.16, 0.2)]) == 0.0
    assert network.hidden_share(model, [(0.16, 0.09)]) == 1.0
    assert "0.50 of the smaller of the shaped transfer and p0 (20.0 ms) runs beside the other, " \
           "from its probe under a shaper: at 0.16 Gbit/s 110.0 ms against 120.0 in series." in \
           network.markdown(rows, network.models(recs))
    # two calibrations at other rates: each named with its own sum, h their median share
    model.calibrations = [(0.16, 0.11), (0.32, 0.065)]  # at 0.32: 0.05 + 0.02 in series
    assert "from its probes (the median share of 2) under a shaper: at 0.16 Gbit/s 110.0 ms " \
           "against 120.0 in series; at 0.32 Gbit/s 65.0 ms against 70.0 in series." in \
           network.markdown(rows, {key: model for key in network.models(recs)})
    build(str(tmp_path))  # the report hands the network section its calibration too
    assert "0.50 of the smaller of the shaped transfer" in (tmp_path / "report.md").read_text()
