"""The scaling model: the workload profile fitted from fixture records, this machine's runs
predicted from it, the projections through the cost model, and the report's section."""
import csv
import dataclasses
import json

import matplotlib.image as mpimg
import pytest

from results import (cost_model, latency_bandwidth, projections, records, scaling_model, specs,
                     workload_profile)
from results.report import build
from results.scaling_model import Network
from results.summary import summarize

NET = Network(bandwidth_gbps=8.0, latency_us=100.0)  # 1e9 bytes/s, 1e-4 s


def _record(run_id, strategy, n, epoch_time, steps, probe=None, run_name="", threads=1,
            accumulation=1, times=None):
    step_batch = 64 * accumulation  # examples a replica trains per step
    epochs = [{"epoch": i + 1, "time_s": t, "examples_per_sec": steps * step_batch * (
        n if strategy == "multi_worker_mirrored" else 1) / t, "train_loss": 1.0,
        "train_accuracy": 0.5, "eval_loss": 1.0, "eval_accuracy": 0.9}
        for i, t in enumerate([10 * epoch_time, *(times or [epoch_time, epoch_time])])]
    rec = {"run_id": run_id, "run_name": run_name, "timestamp": "2026-01-01T00:00:00",
           "strategy": strategy, "model": "cnn", "dataset": "synthetic",
           "num_workers": n if strategy != "one_device" else 1, "num_ps": 1,
           "num_replicas_in_sync": n if strategy == "multi_worker_mirrored" else 1,
           "batch_size_per_replica": 64, "global_batch_size": step_batch * (
               n if strategy == "multi_worker_mirrored" else 1), "train_examples": 1280,
           "accumulation_steps": accumulation,
           "steps_per_epoch": steps, "epochs": epochs, "steady_state": {},
           "final_eval_accuracy": 0.9, "final_eval_loss": 1.0,
           "config": {"accumulation_steps": accumulation} if accumulation > 1 else {},
           "environment": {"cpu_count": 2, "usable_cpus": 2}, "threads_per_task": threads}
    if probe is not None:
        rec["communication"] = {"gradient_bytes": 1_000_000, "method": "x",
                                "probe_s": {"median": probe, "min": probe, "max": probe, "n": 1}}
        rec["communication_fraction"] = 0.1
    return rec


@pytest.fixture
def results_dir(tmp_path):
    # baseline: 20 steps of 64 in 2.0 s -> compute 0.1 s/step
    for rec in [_record("b", "one_device", 1, 2.0, 20, run_name="baseline/cnn/1280/r0"),
                # MWMS N=2: 10 steps in 1.5 s -> 0.15 s/step = 0.1 compute + 0.02 probe + 0.03
                _record("m", "multi_worker_mirrored", 2, 1.5, 10, probe=0.02),
                # PSS N=2: 20 steps in 1.5 s, 2 workers at once -> 0.15 s per worker step
                _record("p", "parameter_server", 2, 1.5, 20, probe=0.01)]:
        records.write_record(str(tmp_path), rec)
    return tmp_path


def _load(results_dir, *extra):
    recs, _ = records.load_records(str(results_dir))
    return recs + list(extra)


def _fits(recs):
    return {f.strategy: f for f in scaling_model.fit(recs)}


def test_profile_and_the_two_worker_prediction(results_dir):
    fits = _fits(_load(results_dir))
    mw, ps = fits["multi_worker_mirrored"], fits["parameter_server"]
    assert mw.profile is ps.profile  # one profile per setting, every strategy alike
    assert mw.profile.compute_s == pytest.approx(0.1) and mw.profile.batch == 64
    assert mw.profile.gradient_bytes == {"float32": 1_000_000}
    predicted, measured, error = mw.prediction_n2
    assert predicted == pytest.approx(2 * 64 / 0.12)  # compute + probe at N=2, nothing fitted
    assert measured == pytest.approx(2 * 64 * 10 / 1.5)
    assert error == pytest.approx(predicted / measured - 1)
    assert ps.prediction_n2[0] == pytest.approx(2 * 64 / 0.11)
    # projections: N=1 is one worker alone; N=64 the cost model on the stated network
    assert mw.project(1, NET)["speedup"] == pytest.approx(1.0)
    assert mw.project(1, NET)["communication_s"] == 0.0
    ring = cost_model.allreduce_s(1e6, specs.ClusterSpec(hosts=64, inter_host_gbps=8.0,
                                                         inter_host_latency_us=100.0))
    assert mw.project(64, NET)["step_time_s"] == pytest.approx(0.1 + ring)
    assert mw.project(64, NET)["efficiency"] < mw.project(4, NET)["efficiency"] < 1


def test_this_machines_contention_never_reaches_a_projection(results_dir):
    """Defects 2 and 3: what the N=2 run spent beyond compute and probe (cores shared by more
    processes than there are) is its prediction's error, not a term the projections carry."""
    calm = _fits(_load(results_dir))["multi_worker_mirrored"]
    crowded = _load(results_dir)
    for r in crowded:
        if r["strategy"] == "multi_worker_mirrored":  # 0.5 s per step instead of 0.15
            r["epochs"] = [dict(e, time_s=e["time_s"] * 0.5 / 0.15,
                                examples_per_sec=e["examples_per_sec"] * 0.15 / 0.5)
                           for e in r["epochs"]]
    busy = _fits(crowded)["multi_worker_mirrored"]
    assert busy.prediction_n2[2] > calm.prediction_n2[2] + 1  # the error shows it
    for n in projections.PROJECT_NS:
        assert busy.project(n, NET) == calm.project(n, NET)
    # ... and a PSS N=1 projection is compute + its N=1 overhead + the ps round trip, no
    # shorter than the N=1 runs' own (the test below)
    ps1 = _record("p1", "parameter_server", 1, 20 * 0.12, 20, probe=0.01)
    ps = _fits(_load(results_dir, ps1))["parameter_server"]
    assert ps.overhead == pytest.approx(0.12 - 0.1 - 0.01)
    one = ps.project(1, NET)
    wire = cost_model.parameter_server_s(1e6, 1e6, ps.cluster(1, NET))
    assert one["step_time_s"] == pytest.approx(0.1 + 0.01 + max(0.01, wire))


def test_a_projected_pss_worker_pays_the_larger_of_its_software_cost_and_the_wire(results_dir):
    """The PSS N=1 runs' probe (30 ms here over loopback) is one push and pull as this
    machine's software does it: a projected worker with a link of its own pays the larger of it
    and the wire (they overlap: docs/benchmarks.md, one PSS worker under a shaper), so the
    projection of one worker on a fast network meets the runs it came from, and a slow
    network's transfer still shows; this machine's own runs pay what was measured here."""
    ps1 = _record("p1", "parameter_server", 1, 20 * 0.14, 20, probe=0.03)
    ps = _fits(_load(results_dir, ps1))["parameter_server"]
    assert ps.profile.sync_floor_s == {"parameter_server": pytest.approx(0.03)}
    assert ps.overhead == pytest.approx(0.14 - 0.1 - 0.03)
    fast = ps.cluster(1, NET)  # 2 MB at 8 Gbit/s: 2.2 ms of wire, under the 30 ms floor
    assert cost_model.parameter_server_s(1e6, 1e6, fast) < 0.03
    assert ps.project(1, NET)["step_time_s"] == pytest.approx(0.14)  # the runs' own step
    slow = scaling_model.Network(bandwidth_gbps=0.25, latency_us=100.0)  # 64 ms of wire
    wire = cost_model.parameter_server_s(1e6, 1e6, ps.cluster(1, slow))
    assert wire > 0.03
    assert ps.project(1, slow)["step_time_s"] == pytest.approx(0.1 + 0.01 + wire)
    # not where the tasks share this machine: its runs (what was measured here, Here), a
    # cluster of its cores (machine_cores), the emulated shared medium
    here = cost_model.Here(sync_s=0.005)
    for cluster in (cost_model.this_machine(1, 0), cost_model.this_machine(1, 2),
                    cost_model.this_machine(1, 0, shaped_gbps=100.0)):
        p = cost_model.predict(ps.profile, cluster, "parameter_server", here=here)
        assert p.communication_s < 0.03, cluster
    for cluster in (dataclasses.replace(fast, machine_cores=2),
                    dataclasses.replace(fast, shared_medium=True)):
        p = cost_model.predict(ps.profile, cluster, "parameter_server")
        assert p.communication_s < 0.03, cluster
    # the overlap hides no more of a slow link's transfer than the N=1 runs hid of their probe
    hiding = dataclasses.replace(ps.profile, overlap={"parameter_server": 0.5})
    p = cost_model.predict(hiding, ps.cluster(1, slow), "parameter_server")
    assert p.communication_s == pytest.approx(wire - 0.5 * 0.03)  # not wire x 0.5
    # a hand-written profile without the figure pays the wire alone, as before
    bare = dataclasses.replace(ps.profile, sync_floor_s={})
    assert cost_model.predict(bare, fast, "parameter_server").step_s == pytest.approx(
        0.1 + 0.01 + cost_model.parameter_server_s(1e6, 1e6, fast))


def test_each_n_is_predicted_with_the_sharing_calibration_of_as_many_processes(results_dir):
    """Defect 3: an N=4 run on 2 cores is predicted with the K=4 calibration, never K=2's."""
    four = _record("m4", "multi_worker_mirrored", 4, 1.0, 5, probe=0.03)
    recs = _load(results_dir, four, _sharing(1.0, 1.3), _sharing(1.9, 2.4, "s4", processes=4))
    mw = _fits(recs)["multi_worker_mirrored"]
    assert mw.slowdowns[2][0] == pytest.approx(1.3) and mw.slowdowns[4][0] == pytest.approx(2.4)
    assert mw.predictions[4][0] == pytest.approx(4 * 64 / (0.1 * 2.4 + 0.03))
    without = _fits(_load(results_dir, four, _sharing(1.0, 1.3)))["multi_worker_mirrored"]
    assert 4 not in without.slowdowns
    assert without.predictions[4][0] == pytest.approx(4 * 64 / (0.1 + 0.03))
    assert any("N=4: no sharing calibration with 4 processes" in n for n in without.notes)


def test_accumulation_steps_count_in_the_step_batch(results_dir, tmp_path):
    """Defect 1: with --accumulation_steps=4 a step is 4 micro-batches: the profile's batch is
    256, and the prediction is not 4x low."""
    for rec in [_record("b", "one_device", 1, 8.0, 20, run_name="baseline/cnn/1280/r0",
                        accumulation=4),
                _record("m", "multi_worker_mirrored", 2, 4.4, 10, probe=0.02, accumulation=4)]:
        records.write_record(str(tmp_path / "k4"), rec)
    (mw,) = scaling_model.fit(records.load_records(str(tmp_path / "k4"))[0])
    assert mw.profile.batch == 256 and mw.profile.compute_s == pytest.approx(0.4)
    predicted, measured, error = mw.prediction_n2
    assert predicted == pytest.approx(2 * 256 / 0.42) and abs(error) < 0.05


def test_one_estimator_of_measured(results_dir):
    """Defect 5: the scaling section's measured examples/s is the summary table's."""
    two = _record("m", "multi_worker_mirrored", 2, 1.5, 10, probe=0.02, times=[1.2, 1.6])
    again = _record("m2", "multi_worker_mirrored", 2, 1.5, 10, probe=0.02, times=[1.3, 2.0])
    recs = [r for r in _load(results_dir) if r["strategy"] != "multi_worker_mirrored"]
    mw = _fits(recs + [two, again])["multi_worker_mirrored"]
    (row,) = [r for r in summarize(recs + [two, again])
              if r["strategy"] == "multi_worker_mirrored"]
    assert mw.measured[2][2] == pytest.approx(row["examples_per_sec"])


def test_the_projection_to_one_worker_is_shown_against_the_measured_n1(results_dir):
    """The issue's N=1 check in the report itself: the strategy's N=1 runs are a measured row
    (projection.csv, the plot's dots at N=1) and a line beside the one-worker projection."""
    # MWMS N=1 on 2 threads (not a one-core run: the compute stays the baseline's 0.1 s): 20
    # steps in 2.2 s -> 0.11 s per step, 0.001 of it its probe
    n1 = _record("m1", "multi_worker_mirrored", 1, 2.2, 20, probe=0.001, threads=2)
    fits = _fits(_load(results_dir, n1))
    mw, ps = fits["multi_worker_mirrored"], fits["parameter_server"]
    assert ps.measured_n1 is None and mw.measured_n1[2] == pytest.approx(64 * 20 / 2.2)
    rows = projections.projection_rows([mw, ps], NET)
    (one,) = [r for r in rows if r["kind"] == "measured" and r["n"] == 1]
    assert one["strategy"] == "multi_worker_mirrored"
    assert one["examples_per_sec"] == pytest.approx(64 * 20 / 2.2)
    assert one["speedup"] == pytest.approx(0.109 / 0.11)  # against compute + overhead
    assert not one["note"]
    faster = projections._flag(dict(one, efficiency=1.03))  # no scaling: not "not physical"
    assert faster["note"] == projections.FASTER_N1
    projected = mw.project(1, NET)["examples_per_sec"]
    assert projected == pytest.approx(64 / 0.109)  # the overhead its N=1 runs left: 9 ms
    text = projections.markdown([mw, ps], rows, NET)
    # beside it, each side's step and what it paid to synchronize: the projection's network
    # (nothing for one all-reduce worker) against the runs' own probe of 1 ms
    assert (f"| cnn | 1280 | multi_worker_mirrored | {projected:.0f} | {64 * 20 / 2.2:.0f} | "
            f"{(projected / (64 * 20 / 2.2) - 1) * 100:+.1f}% | 109.00 (0.00) | "
            f"110.00 (1.00) |") in text
    assert "| cnn | 1280 | parameter_server | " not in text.split("One worker projected")[1] \
        .split("\n\n")[1]


def test_the_ps_cpu_of_the_pss_n1_runs_bounds_pss(results_dir):
    """The profile takes the PSS N=1 runs' ps CPU per step from the record's cores per task
    (the ps busy 0.8 cores at 640 examples/s: 80 ms a step of 64); one ps then serves at most
    800 examples/s here and on any cluster, below the 1164 the N=2 step alone predicts."""
    n1 = _record("p1", "parameter_server", 1, 2.0, 20, probe=0.01)  # 640 examples/s
    n1["cpu"] = {"scope": "all tasks", "seconds": 6.0, "wall_s": 4.0,
                 "examples_per_cpu_second": 2560 / 6.0,
                 "cores_by_task": {"chief:0": 0.1, "ps:0": 0.8, "worker:0": 0.6}}
    without = _fits(_load(results_dir))["parameter_server"]
    assert without.profile.ps_cpu_s_per_step == 0.0  # no PSS N=1 run: no bound
    assert without.prediction_n2[0] == pytest.approx(2 * 64 / 0.11)
    ps = _fits(_load(results_dir, n1))["parameter_server"]
    assert ps.profile.ps_cpu_s_per_step == pytest.approx(0.8 / 640 * 64)
    assert ps.profile.ps_threads == 1
    assert ps.prediction_n2[0] == pytest.approx(800)
    assert any(n.startswith("N=2 prediction held by the parameter servers' CPU: 1 ps of 1 "
                            "thread(s) serve at most 800 examples/s (80.00 ms") for n in ps.notes)
    assert any("ps used 80.00 ms of CPU per worker step with 1 thread(s)" in n for n in ps.notes)
    # a run at other threads is another figure: the threads most runs had decide which
    other = dict(n1, run_id="p9", threads_per_task=2, cpu=dict(n1["cpu"], cores_by_task={
        "ps:0": 1.6, "worker:0": 0.6}))
    assert workload_profile.ps_cpu_of([n1, other, dict(n1, run_id="p8")]) == (
        pytest.approx(0.08), 1)
    assert ps.project(64, NET)["examples_per_sec"] == pytest.approx(800)
    (row,) = [r for r in projections.projection_rows([ps], NET)
              if r["kind"] == "projected" and r["n"] == 64]
    assert row["note"] == "held by the parameter servers' CPU" and "bound" not in row
    mw = _fits(_load(results_dir, n1))["multi_worker_mirrored"]
    assert mw.project(64, NET)["examples_per_sec"] > 800


def test_the_ps_rate_under_load_at_n_is_shown_beside_this_machines_pss_run_not_in_it(
        results_dir):
    """A collectives cell at N measured the ps serving 9 steps/s (576 examples/s) with N workers
    pushing updates and nothing else: the notes of this machine's PSS N=2 run give the median of
    its calibrations at K = 2 (another model's and another N's are not its calibration); the
    prediction keeps the N=1 runs' bound of 800 (bounding by the load read worse on fresh runs:
    docs/benchmarks.md, v19)."""
    n1 = _record("p1", "parameter_server", 1, 2.0, 20, probe=0.01)
    n1["cpu"] = {"scope": "all tasks", "seconds": 6.0, "wall_s": 4.0,
                 "examples_per_cpu_second": 2560 / 6.0,
                 "cores_by_task": {"chief:0": 0.1, "ps:0": 0.8, "worker:0": 0.6}}

    def loaded(run_id, n, steps_per_s, model="cnn"):
        rec = _collectives("parameter_server", n, 2e-3, 1e-8, run_id)
        rec["model"] = model
        rec["communication"]["ps_load"] = {
            "steps_per_s": {"median": steps_per_s, "min": 0, "max": 0, "n": 3}}
        return rec

    recs = _load(results_dir, n1, loaded("c1", 2, 8.0), loaded("c2", 2, 10.0),
                 loaded("c3", 3, 1.0), loaded("c4", 2, 1.0, "mlp"))
    for r in recs:  # every record with a config (a collectives cell's has one)
        r["config"] = {**r.get("config", {}), "steps_per_execution": 1}
    ps = _fits(recs)["parameter_server"]
    assert ps.prediction_n2[0] == pytest.approx(800)
    assert any(n.startswith("N=2: with 2 workers pushing a step's update and nothing else, the "
                            "parameter servers served 9.0 steps/s here (576 examples/s; 2 "
                            "calibration(s) at K=2") for n in ps.notes)
    assert not any("1.0 steps/s" in n for n in ps.notes)


def test_sparse_rows_are_swept_as_the_all_reduce_that_moves_what_their_all_gather_does():
    """An all-gather sends each worker the other n-1 workers' rows, (n-1) G; the swept ring
    all-reduce of S moves 2(n-1)/n S: at n = 3 the sweep's 1.5 G, at 2 the gradient itself."""
    sparse = specs.WorkloadProfile(model="e", batch=64, compute_s=0.01,
                                   gradient_bytes={"float32": 1e6}, gradient_kind="sparse",
                                   pull_bytes=2e6)
    dense = dataclasses.replace(sparse, gradient_kind="dense")
    mw = "multi_worker_mirrored"
    assert scaling_model.sync_bytes(sparse, mw, "float32", 2) == 1e6
    assert scaling_model.sync_bytes(sparse, mw, "float32", 3) == 1.5e6
    assert scaling_model.sync_bytes(sparse, mw, "float32", 4) == 2e6
    assert scaling_model.sync_bytes(dense, mw, "float32", 4) == 1e6
    assert scaling_model.sync_bytes(sparse, "parameter_server", "float32", 4) == 1.5e6


def test_compute_is_the_baseline_for_every_strategy(results_dir):
    """Defect 7: a PSS N=1 worker that borrowed a second core steps faster than one core
    computes: the profile keeps the 1-thread compute, PSS's overhead is 0 and the notes say so."""
    ps1 = _record("p1", "parameter_server", 1, 20 * 0.095, 20, probe=0.01)
    ps = _fits(_load(results_dir, ps1))["parameter_server"]
    assert ps.t_comp == pytest.approx(0.1) and ps.overhead == 0.0
    assert any("parameter_server N=1 stepped" in n and "overhead 0" in n for n in ps.notes)


def test_compute_is_the_median_of_every_one_core_step_without_a_peer(results_dir):
    """One run's step moves ~10% from run to run here, so the compute is the median of every
    run that computes one replica's step on one core and waits for no peer: the 1-thread
    baseline (0.1 s) and 1-thread MWMS N=1 runs less their probe (0.094 - 0.014, 0.09). A PSS
    N=1 worker shares its step with its ps and chief, and an MWMS N=1 run at 2 threads has two
    cores: neither counts."""
    own = [_record("m1", "multi_worker_mirrored", 1, 20 * 0.094, 20, probe=0.014),
           _record("m2", "multi_worker_mirrored", 1, 20 * 0.09, 20),
           _record("p1", "parameter_server", 1, 20 * 0.05, 20, probe=0.01),
           _record("m3", "multi_worker_mirrored", 1, 20 * 0.05, 20, threads=2)]
    mw = _fits(_load(results_dir, *own))["multi_worker_mirrored"]
    # the median of 0.1, 0.08 and 0.09 (with the probe left in: of 0.1, 0.094 and 0.09)
    assert mw.profile.compute_s == pytest.approx(0.09)
    assert any("the median" in n and "(3 runs" in n for n in mw.notes)
    # with the baseline alone, as before
    alone = _fits(_load(results_dir))["multi_worker_mirrored"]
    assert alone.profile.compute_s == pytest.approx(0.1)


def test_pss_pulls_variables_in_their_own_dtype(tmp_path):
    """Defect 6: with bfloat16 sync a PSS step pushes G/2 but pulls the float32 variables."""
    for rec in [_record("b", "one_device", 1, 2.0, 20, run_name="baseline/cnn/1280/r0"),
                _record("p", "parameter_server", 2, 1.5, 20, probe=0.01)]:
        rec["config"]["gradient_sync_dtype"] = "bfloat16"
        if rec["strategy"] == "parameter_server":
            rec["communication"].update(gradient_bytes=500_000, dense_gradient_bytes=500_000,
                                        pull_bytes=1_000_000)
        records.write_record(str(tmp_path), rec)
    (ps,) = scaling_model.fit(records.load_records(str(tmp_path))[0])
    assert ps.profile.gradient_bytes == {"bfloat16": 500_000} and ps.profile.pull_bytes == 1e6
    cluster = ps.cluster(4, NET)
    assert ps.project(4, NET)["communication_s"] == pytest.approx(
        1.5e6 / 1e9 * 4 + 2e-4) == pytest.approx(cost_model.parameter_server_s(5e5, 1e6, cluster))


def test_report_has_projection_table_plot_profile_and_prints_validation(results_dir):
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
        projections.PROJECT_NS)
    for name in ("projection.png", "step_breakdown.png"):
        (png,) = [p for p in paths if p.endswith(name)]
        assert mpimg.imread(png).shape[1] > 400
    # the measured profile, as a file recommend reads (--profile)
    (profile,) = [p for p in paths if p.endswith("profile-cnn-1280-b64-k1-float32.json")]
    loaded = specs.load_profile(profile)
    assert loaded.compute_s == pytest.approx(0.1) and json.loads(open(profile).read())["batch"] == 64


def test_negative_efficiency_rows_are_flagged_not_shown_bare(results_dir):
    """A measured N=2 step faster than one worker alone: its efficiency is above 100% and is
    never shown bare."""
    recs = _load(results_dir)
    for r in recs:
        if r["strategy"] == "multi_worker_mirrored":  # 0.09 s per step < compute 0.1
            r["epochs"] = [dict(e, time_s=e["time_s"] * 0.09 / 0.15,
                                examples_per_sec=e["examples_per_sec"] * 0.15 / 0.09)
                           for e in r["epochs"]]
    mw = _fits(recs)["multi_worker_mirrored"]
    rows = projections.projection_rows([mw], NET)
    (measured,) = [r for r in rows if r["kind"] == "measured"]
    assert measured["efficiency"] > 1 and measured["note"].startswith("above 100%: not physical")
    assert all(r["efficiency"] <= 1 and not r["note"] for r in rows if r["kind"] == "projected")
    assert "above 100%: not physical" in projections.markdown([mw], rows, NET)


def test_straggler_and_fixed_global_batch_runs_are_not_fitted(results_dir):
    recs = _load(results_dir)
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
    ps1 = _record("p1", "parameter_server", 1, 20 * 0.12, 20, probe=0.03)
    uncapped = _fits(_load(results_dir, ps1))["parameter_server"].prediction_n2[0]
    # 0.12 - 0.1 - 0.03 < 0: the N=1 step hid 1/3 of its probe behind compute (the overlap,
    # overhead 0), and the N=2 prediction hides the same share of its synchronization
    assert _fits(_load(results_dir, ps1))["parameter_server"].profile.overlap == {
        "parameter_server": pytest.approx(1 / 3)}
    assert uncapped == pytest.approx(2 * 64 / (0.1 + 0.0 + 0.01 * 2 / 3))
    rate = 64 / 0.12  # the N=1 run's examples/s
    ps1["cpu"] = {"examples_per_cpu_second": rate / 1.5, "scope": "all tasks"}
    recs = _load(results_dir, ps1)
    for rec in recs:
        rec["environment"] = {"cpu_count": 2, "usable_cpus": 2}
    fit = _fits(recs)["parameter_server"]
    assert fit.prediction_n2[0] == pytest.approx(2 * rate / 1.5) and 2 * rate / 1.5 < uncapped
    assert any("capped by this machine's CPU: 2.00 cores busy (all 2: no sharing calibration" in n
               for n in fit.notes)
    # processes that hand off every step leave cores idle: the cap counts the cores the sharing
    # calibration's lockstep phase kept busy (2 x 0.8 here), not the slowdown's inverse
    slowed = _fits(recs + [_sharing(free=1.0, lockstep=1.25, busy=0.8)])["parameter_server"]
    assert slowed.prediction_n2[0] == pytest.approx(1.6 * rate / 1.5)
    assert any("capped by this machine's CPU: 1.60 cores busy" in n for n in slowed.notes)
    # a partial CPU figure (one task of a real cluster) says nothing about the whole cluster
    ps1["cpu"]["scope"] = "this task only (partial: other hosts not measured)"
    assert _fits(_load(results_dir, ps1))["parameter_server"].prediction_n2[0] == \
        pytest.approx(uncapped)


def _sharing(free, lockstep, run_id="s", processes=2, busy=None):
    """A sharing calibration's record; busy: the lockstep phase's cores per process."""
    rec = _record(run_id, "engine_floor", 1, 1.0, 20, run_name="engine_floor_shared/cnn/1280/r0")
    rec["num_workers"] = processes
    rec["sharing"] = {"processes": processes, "rounds": 3, "steps_per_round": 20, "batch": 64,
                      "examples_per_sec": {"solo": 640.0, "free": 640.0 / free,
                                           "lockstep": 640.0 / lockstep},
                      "slowdown": {"free": free, "lockstep": lockstep}}
    if busy is not None:
        rec["sharing"]["cores_per_process"] = {"free": 1.0, "lockstep": busy}
    return rec


def test_two_worker_prediction_on_this_machine_uses_the_sharing_slowdown(results_dir):
    """Two workers on one machine share its cores: the N=2 prediction multiplies compute by the
    slowdown two plain loops in lockstep showed there; the prediction for workers with cores of
    their own stays beside it, and without a calibration nothing changes."""
    before = _fits(_load(results_dir))
    assert not before["multi_worker_mirrored"].slowdowns
    assert any("no sharing calibration" in n for n in before["multi_worker_mirrored"].notes)
    fits = _fits(_load(results_dir, _sharing(free=1.2, lockstep=1.5),
                       _sharing(1.4, 1.7, "s2")))
    mw, ps = fits["multi_worker_mirrored"], fits["parameter_server"]
    assert mw.slowdowns[2][:2] == (pytest.approx(1.6), "lockstep") and mw.slowdowns[2][2] == 2
    assert mw.prediction_n2[0] == pytest.approx(2 * 64 / (0.1 * 1.6 + 0.02))
    assert mw.own_cores[2] == pytest.approx(before["multi_worker_mirrored"].prediction_n2[0])
    assert ps.prediction_n2[0] == pytest.approx(2 * 64 / (0.1 * 1.6 + 0.01))
    assert any("slowdown of 2 plain TF loops run lockstep" in n for n in mw.notes)
    # the calibration is a floor: no fit of its own, and it does not move the profile
    assert set(fits) == {"multi_worker_mirrored", "parameter_server"}
    assert mw.t_comp == before["multi_worker_mirrored"].t_comp


def test_the_cap_counts_the_cores_kept_busy_at_each_n(results_dir):
    """On 2 cores, PSS at N=2 and N=4: each N's cap is the cores that N processes handing off
    every step kept busy in the sharing calibration with K = N (2 x 0.8 and 4 x 0.45), times the
    N=1 run's examples per CPU-second; never more than the machine's cores."""
    ps1 = _record("p1", "parameter_server", 1, 20 * 0.12, 20, probe=0.03)
    rate = 64 / 0.12
    ps1["cpu"] = {"examples_per_cpu_second": rate / 1.5, "scope": "all tasks"}
    four = _record("p4", "parameter_server", 4, 1.5, 40, probe=0.01)
    recs = _load(results_dir, ps1, four, _sharing(1.0, 1.25, busy=0.8),
                 _sharing(1.9, 2.2, "s4", 4, busy=0.45))
    for rec in recs:
        rec["environment"] = {"cpu_count": 2, "usable_cpus": 2}
    fit = _fits(recs)["parameter_server"]
    assert fit.predictions[2][0] == pytest.approx(1.6 * rate / 1.5)
    assert fit.predictions[4][0] == pytest.approx(1.8 * rate / 1.5)
    assert any("N=4 prediction capped by this machine's CPU: 1.80 cores busy" in n
               for n in fit.notes)
    crowded = [dict(r, environment={"cpu_count": 2, "usable_cpus": 2}) for r in _load(
        results_dir, ps1, four, _sharing(1.9, 2.2, "s4", 4, busy=0.6))]  # 2.4 "busy" cores
    assert _fits(crowded)["parameter_server"].predictions[4][0] == pytest.approx(2 * rate / 1.5)
    # the profile carries both figures, and the one cost model, told the cluster shares this
    # machine's 2 cores, caps PSS where the local model does
    assert fit.profile.cpu_s_per_example["parameter_server"] == pytest.approx(1.5 / rate)
    assert fit.profile.sharing == {"2": {"slowdown": 1.25, "busy_cores": pytest.approx(1.6)},
                                   "4": {"slowdown": 2.2, "busy_cores": pytest.approx(1.8)}}
    for n, hosts in ((2, 2), (4, 4)):
        local = specs.ClusterSpec(hosts=hosts, machine_cores=2)
        predicted = cost_model.predict(fit.profile, local, "parameter_server")
        assert predicted.examples_per_sec == pytest.approx(fit.predictions[n][0])
        assert predicted.bound == "this machine's cores"


def test_all_reduce_pays_the_sweeps_cpu_per_synchronization_in_the_cap(results_dir):
    """An MWMS N=1 run reduces nothing: at N the cap adds the CPU one process spent per
    synchronization in the sweep with N processes (its cpu_s, at the gradient's size). PSS's N=1
    run already pushes and pulls: its cap adds nothing."""
    mw1 = _record("m1", "multi_worker_mirrored", 1, 20 * 0.1, 20, probe=0.0)
    mw1["cpu"] = {"examples_per_cpu_second": 640.0, "scope": "all tasks"}  # 0.1 CPU-s a step
    sweep = _collectives("multi_worker_mirrored", 2, 1e-3, 4e-9)
    for p in sweep["communication"]["sweep"]:  # 2 ms + 2e-8 s per byte of one process's CPU
        p["cpu_s"] = {"median": 2e-3 + 2e-8 * p["bytes"], "min": 0, "max": 0, "n": 10}
    recs = _load(results_dir, mw1, sweep, _sharing(1.0, 1.0, busy=0.5))
    for rec in recs:
        rec["environment"] = {"cpu_count": 2, "usable_cpus": 2}
    fit = _fits(recs)["multi_worker_mirrored"]
    step_cpu = 0.1 + 2e-3 + 2e-8 * 1e6  # the N=1 run's CPU per step + the synchronization's
    assert fit.predictions[2][0] == pytest.approx(1.0 * 64 / step_cpu)
    assert any("plus 22.00 ms of one process's CPU per synchronization" in n for n in fit.notes)


def _collectives(strategy, n, alpha, beta, run_id="c"):
    """A collectives cell's record: a sweep whose times follow alpha + beta x bytes exactly."""
    rec = _record(run_id, strategy, n, 1.0, 4, probe=0.5,
                  run_name=f"collectives-{strategy}-n{n}/cnn/1280/r0")
    rec["config"] = {"comm_sweep": True, "train_examples": 4096}
    rec["communication"]["sweep"] = [
        {"bytes": b, "probe_s": {"median": alpha + beta * b, "min": 0, "max": 0, "n": 10}}
        for b in (4096 * 4 ** i for i in range(7))]
    return rec


def test_latency_bandwidth_fit_recovers_alpha_and_beta_and_reports_residuals():
    exact = [(b, 50e-6 + b / 1e9) for b in (4096 * 4 ** i for i in range(7))]
    lb = latency_bandwidth.fit_latency_bandwidth(exact)
    assert lb.alpha_s == pytest.approx(50e-6, rel=1e-6)
    assert lb.gbps == pytest.approx(8.0, rel=1e-6)
    assert max(abs(r) for r in lb.residuals) < 1e-9
    # relative weighting: 20% noise on the largest message does not swamp alpha
    noisy = exact[:-1] + [(exact[-1][0], exact[-1][1] * 1.2)]
    assert latency_bandwidth.fit_latency_bandwidth(noisy).alpha_s == pytest.approx(50e-6, rel=0.25)
    with pytest.raises(specs.SpecError, match="2 message sizes"):
        latency_bandwidth.fit_latency_bandwidth(exact[:1])


def test_the_sweep_at_n_replaces_the_predicted_runs_own_probe(results_dir):
    """Out of sample: with a collectives cell at N, the N-worker prediction synchronizes for
    alpha + beta x bytes of that sweep, not for the probe measured in the runs it predicts; the
    cell is no row of the summary and no fit of its own. Without one, the note says in-sample."""
    before = _fits(_load(results_dir))
    assert before["multi_worker_mirrored"].sync[2] == (0.02, "probe")
    assert any("in-sample" in n for n in before["multi_worker_mirrored"].notes)
    recs = _load(results_dir, _collectives("multi_worker_mirrored", 2, 1e-3, 4e-9),
                 _collectives("parameter_server", 2, 2e-3, 1e-8, "c2"))
    fits = _fits(recs)
    mw, ps = fits["multi_worker_mirrored"], fits["parameter_server"]
    assert mw.sync[2] == (pytest.approx(1e-3 + 4e-9 * 1e6), "sweep")
    assert mw.prediction_n2[0] == pytest.approx(2 * 64 / (0.1 + 1e-3 + 4e-3))
    # the network experiment's calibration, swept under a shaper: not this machine's loopback
    shaped = _collectives("multi_worker_mirrored", 2, 9e-3, 9e-8, "c3")
    shaped["network"] = {"emulated_gbps": 0.2, "method": "tc tbf"}
    assert _fits(recs + [shaped])["multi_worker_mirrored"].sync[2] == mw.sync[2]
    # PSS: its sweep pulls and pushes each size; a step pushes G and pulls P (= G here)
    assert ps.sync[2][0] == pytest.approx(2e-3 + 1e-8 * (1e6 + ps.profile.pull_bytes) / 2)
    assert not any("in-sample" in n for n in mw.notes)
    # the report shows each fit: alpha, the per-tensor cost, the bandwidth and the residuals
    text = projections.markdown(list(fits.values()),
                                  projections.projection_rows(list(fits.values()), NET), NET)
    assert "| multi_worker_mirrored | 2 | 1.00 | 0 | 2.00 | " in text
    assert "(sweep)" in text and "(in-sample)" not in text
    rows = summarize(recs)
    assert not any(r.get("train_examples") == 4096 for r in rows)
    assert len(rows) == len(summarize(_load(results_dir)))


def test_a_sparse_gradient_is_synchronized_as_its_swept_rows(results_dir):
    """A model with IndexedSlices: the collectives cell swept rows too (MWMS all-gathers them),
    and the prediction takes the rows' fit at the gradient's bytes, not the dense all-reduce's;
    a dense model's cell ignores them."""
    recs = _load(results_dir)
    for r in recs:
        if r.get("communication"):
            r["communication"]["gradient_kinds"] = {"indexed_slices": 1}
    swept = _collectives("multi_worker_mirrored", 2, 1e-3, 4e-9)
    swept["communication"]["sweep"] += [
        {"bytes": b, "kind": "indexed_slices",
         "probe_s": {"median": 3e-3 + 2e-8 * b, "min": 0, "max": 0, "n": 10}}
        for b in (4160 * 4 ** i for i in range(7))]
    mw = _fits(recs + [swept])["multi_worker_mirrored"]
    assert mw.profile.gradient_kind == "sparse"
    assert mw.sync[2] == (pytest.approx(3e-3 + 2e-8 * 1e6), "sweep")
    assert any("ms of sparse rows" in n for n in mw.notes)
    text = projections.markdown([mw], projections.projection_rows([mw], NET), NET)
    assert "| multi_worker_mirrored (sparse rows) | 2 | 3.00 | 0 | 0.40 |" in text
    assert "| multi_worker_mirrored | 2 | 1.00 |" in text  # the dense sweep beside it
    dense = _fits(_load(results_dir, swept))["multi_worker_mirrored"]
    assert dense.sync[2] == (pytest.approx(1e-3 + 4e-9 * 1e6), "sweep")
    # rows of 0.9 MB beside two dense tensors of 0.1 MB: MWMS all-gathers the rows and
    # all-reduces the dense pack on its own, each from its own sweep
    for r in recs:
        if r.get("communication"):
            r["communication"].update(gradient_kinds={"dense": 2, "indexed_slices": 1},
                                      sparse_gradient_bytes=900_000)
    split = _fits(recs + [swept])["multi_worker_mirrored"]
    assert split.profile.sparse_gradient_bytes == 900_000 and split.profile.sparse_tensors == 1
    assert split.sync[2][0] == pytest.approx(3e-3 + 2e-8 * 9e5 + 1e-3 + 4e-9 * 1e5)
    assert any("ms for the dense rest" in n for n in split.notes)


def test_the_profile_takes_the_records_boundary_bytes_so_plans_include_pipelines(results_dir):
    """Each run records what a two-stage cut of its model moves per example; the measured
    profile carries it (the median over the setting's records), and without it none."""
    assert _fits(_load(results_dir))["multi_worker_mirrored"].profile.boundary_activation_bytes \
        == 0
    recs = _load(results_dir)
    for r, size in zip(recs, (12544, 12544, 12000)):
        r["boundary_activation_bytes"] = size
    assert _fits(recs)["parameter_server"].profile.boundary_activation_bytes == 12544


def test_an_n1_step_faster_than_the_compute_alone_makes_the_overlap_an_upper_bound(results_dir):
    """A PSS N=1 step (0.095 s) below the 1-thread compute alone (0.1 s): its worker computed
    faster than the baseline, so "100% of its probe hidden" is an upper bound, and the notes
    give what its own in-step timeline saw after the gradients were ready (as the default
    comparison's PSS N=1 run did on 2026-11-27: 3.65 ms of a 5.84 ms probe)."""
    ps1 = _record("p1", "parameter_server", 1, 20 * 0.095, 20, probe=0.03)
    ps1["epochs"][-1]["timeline"] = {"per_worker": {"worker:0": {"sync_s": 0.012}}}
    fit = _fits(_load(results_dir, ps1))["parameter_server"]
    assert fit.profile.overlap == {"parameter_server": 1.0}
    (note,) = [n for n in fit.notes if "upper bound" in n]
    assert "stepped 5.00 ms faster than the 1-thread compute alone" in note
    assert "timeline shows 12.00 ms of the step after its gradients were ready (the probe: " \
        "30.00 ms)" in note
    # hiding a part of its probe only (0.12 s: 1/3 hidden) is an overlap, not an upper bound
    ps1 = _record("p1", "parameter_server", 1, 20 * 0.12, 20, probe=0.03)
    assert not [n for n in _fits(_load(results_dir, ps1))["parameter_server"].notes
                if "upper bound" in n]
