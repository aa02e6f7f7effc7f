"""The scaling model: cost formulas by hand, the fit and the 2-worker validation from fixture
records, and the report's projection section and plot."""
import csv

import matplotlib.image as mpimg
import pytest

from results import records, scaling_model
from results.report import build
from results.scaling_model import Network, parameter_server_s, ring_allreduce_s

NET = Network(bandwidth_gbps=8.0, latency_us=100.0)  # 1e9 bytes/s, 1e-4 s


def test_cost_models_by_hand():
    assert ring_allreduce_s(1e6, 1, NET) == 0.0
    # 2 (N-1)/N M/B + 2 (N-1) a
    assert ring_allreduce_s(1e6, 4, NET) == pytest.approx(2 * 3 / 4 * 1e-3 + 6 * 1e-4)
    # 2 M/B max(1, N/K) + 2 a: a ps link carries N/K workers' traffic once N > K
    assert parameter_server_s(1e6, 2, 2, NET) == pytest.approx(2e-3 + 2e-4)
    assert parameter_server_s(1e6, 8, 2, NET) == pytest.approx(2e-3 * 4 + 2e-4)


def _record(run_id, strategy, n, epoch_time, steps, probe=None, run_name="", threads=1):
    epochs = [{"epoch": i + 1, "time_s": t, "examples_per_sec": steps * 64 * (
        n if strategy == "multi_worker_mirrored" else 1) / t, "train_loss": 1.0,
        "train_accuracy": 0.5, "eval_loss": 1.0, "eval_accuracy": 0.9}
        for i, t in enumerate([10 * epoch_time, epoch_time, epoch_time])]
    rec = {"run_id": run_id, "run_name": run_name, "timestamp": "2026-01-01T00:00:00",
           "strategy": strategy, "model": "cnn", "dataset": "synthetic",
           "num_workers": n if strategy != "one_device" else 1, "num_ps": 1,
           "num_replicas_in_sync": n if strategy == "multi_worker_mirrored" else 1,
           "batch_size_per_replica": 64, "global_batch_size": 64 * (
               n if strategy == "multi_worker_mirrored" else 1), "train_examples": 1280,
           "steps_per_epoch": steps, "epochs": epochs, "steady_state": {},
           "final_eval_accuracy": 0.9, "final_eval_loss": 1.0, "config": {}, "environment": {},
           "threads_per_task": threads}
    if probe is not None:
        rec["communication"] = {"gradient_bytes": 1_000_000, "method": "x",
                                "probe_s": {"median": probe, "min": probe, "max": probe, "n": 1}}
        rec["communication_fraction"] = 0.1
    return rec


@pytest.fixture
def results_dir(tmp_path):
    # baseline: 20 steps of 64 in 2.0 s -> t_comp = 0.1 s/step
    for rec in [_record("b", "one_device", 1, 2.0, 20, run_name="baseline/cnn/1280/r0"),
                # MWMS N=2: 10 steps in 1.5 s -> 0.15 s/step = 0.1 compute + 0.02 probe + 0.03
                _record("m", "multi_worker_mirrored", 2, 1.5, 10, probe=0.02),
                # PSS N=2: 20 steps in 1.5 s, 2 workers at once -> 0.15 s per worker step
                _record("p", "parameter_server", 2, 1.5, 20, probe=0.01)]:
        records.write_record(str(tmp_path), rec)
    return tmp_path


def test_fit_and_two_worker_validation(results_dir):
    recs, _ = records.load_records(str(results_dir))
    fits = {f.strategy: f for f in scaling_model.fit(recs)}
    mw = fits["multi_worker_mirrored"]
    assert mw.t_comp == pytest.approx(0.1) and mw.t_sync == pytest.approx(0.03)
    predicted, measured, error = mw.prediction_n2
    assert predicted == pytest.approx(2 * 64 / 0.12)  # t_comp + probe, nothing fitted
    assert measured == pytest.approx(2 * 64 * 10 / 1.5)
    assert error == pytest.approx(predicted / measured - 1)
    ps = fits["parameter_server"]
    assert ps.t_sync == pytest.approx(0.15 - 0.1 - 0.01)
    # projection: N=1 is the baseline itself for MWMS; efficiency falls with N
    proj = mw.project(1, NET)
    assert proj["speedup"] == pytest.approx(1.0) and proj["communication_s"] == 0.0
    p64 = mw.project(64, NET)
    assert p64["step_time_s"] == pytest.approx(0.1 + ring_allreduce_s(1e6, 64, NET) + 0.03)
    assert p64["efficiency"] < mw.project(4, NET)["efficiency"] < 1


def test_report_has_projection_table_plot_and_prints_validation(results_dir):
    paths, _, notes = build(str(results_dir), network=NET)
    assert any("multi_worker_mirrored N=2: predicted 1067 examples/s" in n and "error" in n
               for n in notes)
    text = (results_dir / "report.md").read_text()
    assert "## Scaling model and projections" in text and "B = 8 Gbit/s" in text
    assert "| cnn | 1280 | parameter_server | 64 |" in text
    with open(results_dir / "projection.csv") as f:
        rows = list(csv.DictReader(f))
    kinds = {(r["strategy"], r["kind"]) for r in rows}
    assert ("multi_worker_mirrored", "measured") in kinds and ("parameter_server",
                                                                "projected") in kinds
    assert {int(r["n"]) for r in rows if r["kind"] == "projected"} == set(
        scaling_model.PROJECT_NS)
    for name in ("projection.png", "step_breakdown.png"):
        (png,) = [p for p in paths if p.endswith(name)]
        assert mpimg.imread(png).shape[1] > 400


def _fits(recs):
    return {f.strategy: f for f in scaling_model.fit(recs)}


def test_t_comp_from_the_strategys_own_one_worker_run(results_dir):
    """With an MWMS N=1 run, t_comp is its step (minus its probe), not the baseline's; PSS has
    no N=1 run here and falls back to the baseline, and the notes say so."""
    recs, _ = records.load_records(str(results_dir))
    own = _record("m1", "multi_worker_mirrored", 1, 24 * 0.11, 24, probe=0.0)  # 0.11 s/step
    fits = _fits(recs + [own])
    mw, ps = fits["multi_worker_mirrored"], fits["parameter_server"]
    assert mw.t_comp == pytest.approx(0.11)
    assert mw.t_sync == pytest.approx(0.15 - 0.11 - 0.02)
    assert mw.prediction_n2[0] == pytest.approx(2 * 64 / (0.11 + 0.02))
    assert any("from multi_worker_mirrored N=1" in n for n in mw.notes)
    assert ps.t_comp == pytest.approx(0.1)
    assert ps.notes[0] == ("t_comp from the 1-thread baseline: no parameter_server N=1 run in "
                           "this setting")
    # a PSS N=1 run's own push/pull (its probe) is not compute
    ps1 = _record("p1", "parameter_server", 1, 20 * 0.12, 20, probe=0.03)
    assert _fits(recs + [ps1])["parameter_server"].t_comp == pytest.approx(0.09)


def test_negative_residual_is_clamped_and_unphysical_efficiency_flagged(results_dir):
    """An N=1 run slower than the N=2 step (e.g. other threads): t_sync would be negative and
    the measured N=2 efficiency above 100%; neither is shown bare."""
    recs, _ = records.load_records(str(results_dir))
    slow = _record("m1", "multi_worker_mirrored", 1, 24 * 0.2, 24, threads=2)  # 0.2 s/step
    mw = _fits(recs + [slow])["multi_worker_mirrored"]
    assert mw.t_sync == 0.0
    assert any("clamped to 0" in n for n in mw.notes)
    assert any("2 thread(s) per task, the N>=2 workers 1" in n for n in mw.notes)
    rows = scaling_model.projection_rows([mw], NET)
    (measured,) = [r for r in rows if r["kind"] == "measured"]
    assert measured["efficiency"] > 1 and measured["note"].startswith("above 100%: not physical")
    assert all(r["efficiency"] <= 1 and not r["note"] for r in rows if r["kind"] == "projected")
    text = scaling_model.markdown([mw], rows, NET)
    assert "above 100%: not physical" in text and "clamped to 0" in text


def test_straggler_and_fixed_global_batch_runs_are_not_fitted(results_dir):
    recs, _ = records.load_records(str(results_dir))
    for r in recs:
        if r["strategy"] == "multi_worker_mirrored":
            r["run_name"] = "straggler-multi_worker_mirrored-n2-d0/cnn/1280/r0"
    assert [f.strategy for f in scaling_model.fit(recs)] == ["parameter_server"]
    for r in recs:
        r["config"] = {"global_batch_size": 128}
    assert scaling_model.fit(recs) == []


def test_two_worker_prediction_capped_by_the_machines_cores(results_dir):
    """A PSS N=1 cluster that burned 1.5 cores (worker + ps + chief) for its throughput cannot
    double it with 2 workers on a 2-core machine: the prediction is capped at cores x its
    examples per CPU-second, and the notes say so. Without CPU figures nothing is capped."""
    recs, _ = records.load_records(str(results_dir))
    ps1 = _record("p1", "parameter_server", 1, 20 * 0.12, 20, probe=0.03)
    uncapped = _fits(recs + [ps1])["parameter_server"].prediction_n2[0]
    assert uncapped == pytest.approx(2 * 64 / (0.09 + 0.01))
    rate = 64 / 0.12  # the N=1 run's examples/s
    ps1["cpu"] = {"examples_per_cpu_second": rate / 1.5, "scope": "all tasks"}
    for rec in recs:
        rec["environment"] = {"cpu_count": 2, "usable_cpus": 2}
    fit = _fits(recs + [ps1])["parameter_server"]
    assert fit.prediction_n2[0] == pytest.approx(2 * rate / 1.5) and 2 * rate / 1.5 < uncapped
    assert any("capped by this machine's CPU: 2 cores" in n for n in fit.notes)
    # shared cores whose processes wait on each other do 1/slowdown of their work: so does the cap
    slowed = _fits(recs + [ps1, _sharing(free=1.0, lockstep=1.25)])["parameter_server"]
    assert slowed.prediction_n2[0] == pytest.approx(2 * rate / 1.5 / 1.25)
    assert any("examples per CPU-second / 1.25" in n for n in slowed.notes)
    # a partial CPU figure (one task of a real cluster) says nothing about the whole cluster
    ps1["cpu"]["scope"] = "this task only (partial: other hosts not measured)"
    assert _fits(recs + [ps1])["parameter_server"].prediction_n2[0] == pytest.approx(uncapped)


def test_t_comp_falls_back_to_the_baseline_when_the_probe_covers_the_step(results_dir):
    """A PSS N=1 run whose push/pull probe is as long as its step leaves no compute to read: the
    fit must not vanish; it uses the baseline's step and says why."""
    recs, _ = records.load_records(str(results_dir))
    ps1 = _record("p1", "parameter_server", 1, 20 * 0.05, 20, probe=0.06)
    fit = _fits(recs + [ps1])["parameter_server"]
    assert fit.t_comp == pytest.approx(0.1) and fit.prediction_n2 is not None
    assert any("probe is as long as its step" in n for n in fit.notes)


def _sharing(free, lockstep, run_id="s"):
    rec = _record(run_id, "engine_floor", 1, 1.0, 20, run_name="engine_floor_shared/cnn/1280/r0")
    rec["num_workers"] = 2
    rec["sharing"] = {"processes": 2, "rounds": 3, "steps_per_round": 20, "batch": 64,
                      "examples_per_sec": {"solo": 640.0, "free": 640.0 / free,
                                           "lockstep": 640.0 / lockstep},
                      "slowdown": {"free": free, "lockstep": lockstep}}
    return rec


def test_two_worker_prediction_on_this_machine_uses_the_sharing_slowdown(results_dir):
    """Two workers on one machine share its cores: the N=2 prediction multiplies t_comp by the
    slowdown two plain loops in lockstep showed there (MWMS workers wait for each other every
    step, a PSS worker for the ps); the prediction for workers with cores of their own stays
    beside it, and without a calibration nothing changes."""
    recs, _ = records.load_records(str(results_dir))
    before = _fits(recs)
    assert before["multi_worker_mirrored"].slowdown is None
    assert any("no sharing calibration" in n for n in before["multi_worker_mirrored"].notes)
    fits = _fits(recs + [_sharing(free=1.2, lockstep=1.5), _sharing(1.4, 1.7, "s2")])
    mw, ps = fits["multi_worker_mirrored"], fits["parameter_server"]
    assert mw.slowdown[:2] == (pytest.approx(1.6), "lockstep") and mw.slowdown[2] == 2
    assert mw.prediction_n2[0] == pytest.approx(2 * 64 / (0.1 * 1.6 + 0.02))
    assert mw.own_cores_n2 == pytest.approx(before["multi_worker_mirrored"].prediction_n2[0])
    assert ps.slowdown[:2] == (pytest.approx(1.6), "lockstep")
    assert ps.prediction_n2[0] == pytest.approx(2 * 64 / (0.1 * 1.6 + 0.01))
    assert any("slowdown of two plain TF loops run lockstep" in n for n in mw.notes)
    # the calibration is a floor: no fit of its own, and it does not move t_comp; the N=2
    # run's slower compute is this machine's, so it leaves t_sync (which projections carry)
    assert set(fits) == {"multi_worker_mirrored", "parameter_server"}
    assert mw.t_comp == before["multi_worker_mirrored"].t_comp
    mild = _fits(recs + [_sharing(free=1.0, lockstep=1.2)])
    assert mild["multi_worker_mirrored"].t_sync == pytest.approx(0.15 - 0.1 * 1.2 - 0.02)
    assert mild["parameter_server"].t_sync == pytest.approx(0.15 - 0.1 * 1.2 - 0.01)
    assert before["multi_worker_mirrored"].t_sync == pytest.approx(0.15 - 0.1 - 0.02)
