"""The scaling model: the workload profile fitted from fixture records, this machine's measured
runs beside it, the projections through the cost model, and the report's section."""
import csv
import dataclasses
import json

import matplotlib.image as mpimg
import pytest

from results.model import cost_model, scaling_model, specs, workload_profile
from results.model.scaling_model import Network
from results.records import store as records
from results.records.cells import setting_of
from results.report import projections
from results.report.build import build
from results.report.summary import summarize

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


def test_profile_the_measured_two_worker_runs_and_the_projections(results_dir):
    fits = _fits(_load(results_dir))
    mw, ps = fits["multi_worker_mirrored"], fits["parameter_server"]
    assert mw.profile is ps.profile  # one profile per setting, every strategy alike
    assert mw.profile.compute_s == pytest.approx(0.1) and mw.profile.batch == 64
    assert mw.profile.gradient_bytes == {"float32": 1_000_000}
    # this machine's N=2 runs, (per-worker step, probe, examples/s): shown beside the
    # projections, nothing fitted to them; no N=1 runs of either strategy
    assert mw.measured == {2: (pytest.approx(0.15), pytest.approx(0.02),
                               pytest.approx(2 * 64 * 10 / 1.5))}
    assert ps.measured == {2: (pytest.approx(0.15), pytest.approx(0.01),
                               pytest.approx(64 * 20 / 1.5))}
    assert mw.measured_n1 is None and ps.measured_n1 is None
    assert mw.overhead == 0.0 and ps.overhead == 0.0  # no N=1 runs: none measured
    # PSS projected to two workers: compute + one push and pull of G and P over the stated
    # network (no N=1 runs: no floor of this machine's software)
    pss = ps.project(2, NET)
    wire = cost_model.parameter_server_s(1e6, 1e6, ps.cluster(2, NET))
    assert pss["step_time_s"] == pytest.approx(0.1 + wire)
    assert pss["examples_per_sec"] == pytest.approx(2 * 64 / (0.1 + wire))
    # projections: N=1 is one worker alone; N=64 the cost model on the stated network
    assert mw.project(1, NET)["speedup"] == pytest.approx(1.0)
    assert mw.project(1, NET)["communication_s"] == 0.0
    ring = cost_model.allreduce_s(1e6, specs.ClusterSpec(hosts=64, inter_host_gbps=8.0,
                                                         inter_host_latency_us=100.0))
    assert mw.project(64, NET)["step_time_s"] == pytest.approx(0.1 + ring)
    assert mw.project(64, NET)["efficiency"] < mw.project(4, NET)["efficiency"] < 1


def test_this_machines_contention_never_reaches_a_projection(results_dir):
    """Defects 2 and 3: what the N=2 run spent beyond compute and probe (cores shared by more
    processes than there are) shows in its measured row, not in a term the projections carry."""
    calm = _fits(_load(results_dir))["multi_worker_mirrored"]
    crowded = _load(results_dir)
    for r in crowded:
        if r["strategy"] == "multi_worker_mirrored":  # 0.5 s per step instead of 0.15
            r["epochs"] = [dict(e, time_s=e["time_s"] * 0.5 / 0.15,
                                examples_per_sec=e["examples_per_sec"] * 0.15 / 0.5)
                           for e in r["epochs"]]
    busy = _fits(crowded)["multi_worker_mirrored"]
    assert calm.measured[2][0] == pytest.approx(0.15)
    assert busy.measured[2][0] == pytest.approx(0.5)  # the measured row shows it ...
    (row,) = [r for r in projections.projection_rows([busy], NET) if r["kind"] == "measured"]
    assert row["overhead_s"] == pytest.approx(0.5 - 0.1 - 0.02)  # ... as the step's rest
    assert busy.profile == calm.profile  # ... and the profile never sees it
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


def test_accumulation_steps_count_in_the_step_batch(results_dir, tmp_path):
    """Defect 1: with --accumulation_steps=4 a step is 4 micro-batches: the profile's batch is
    256, and neither the measured rate nor the projection is 4x low."""
    for rec in [_record("b", "one_device", 1, 8.0, 20, run_name="baseline/cnn/1280/r0",
                        accumulation=4),
                _record("m", "multi_worker_mirrored", 2, 4.4, 10, probe=0.02, accumulation=4)]:
        records.write_record(str(tmp_path / "k4"), rec)
    (mw,) = scaling_model.fit(records.load_records(str(tmp_path / "k4"))[0])
    assert mw.profile.batch == 256 and mw.profile.compute_s == pytest.approx(0.4)
    step, probe, measured = mw.measured[2]
    assert step == pytest.approx(0.44) and measured == pytest.approx(2 * 256 * 10 / 4.4)
    ring = cost_model.allreduce_s(1e6, mw.cluster(2, NET))
    projected = mw.project(2, NET)["examples_per_sec"]
    assert projected == pytest.approx(2 * 256 / (0.4 + ring))
    assert abs(projected / measured - 1) < 0.15  # the measured 0.44 s step holds a 20 ms probe


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
    assert one["speedup"] == pytest.approx(0.1 / 0.11)  # against one device's compute alone
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
    800 examples/s on any cluster, below what the steps of two workers alone would give."""
    n1 = _record("p1", "parameter_server", 1, 2.0, 20, probe=0.01)  # 640 examples/s
    n1["cpu"] = {"scope": "all tasks", "seconds": 6.0, "wall_s": 4.0,
                 "examples_per_cpu_second": 2560 / 6.0,
                 "cores_by_task": {"chief:0": 0.1, "ps:0": 0.8, "worker:0": 0.6}}
    without = _fits(_load(results_dir))["parameter_server"]
    assert without.profile.ps_cpu_s_per_step == 0.0  # no PSS N=1 run: no bound
    unbounded = without.project(2, NET)
    assert unbounded["bound"] != cost_model.PS_BOUND and unbounded["examples_per_sec"] > 1000
    ps = _fits(_load(results_dir, n1))["parameter_server"]
    assert ps.profile.ps_cpu_s_per_step == pytest.approx(0.8 / 640 * 64)
    assert ps.profile.ps_threads == 1
    two = ps.project(2, NET)
    assert two["examples_per_sec"] == pytest.approx(800) and two["bound"] == cost_model.PS_BOUND
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


def test_report_has_projection_table_plot_and_profile(results_dir):
    paths, _, _ = build(str(results_dir), network=NET)
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
    # this machine's MWMS N=2 run as measured: the profile's compute, its probe, the rest
    (mw,) = [r for r in rows if (r["strategy"], r["kind"]) == ("multi_worker_mirrored",
                                                                "measured")]
    assert int(mw["n"]) == 2
    assert float(mw["examples_per_sec"]) == pytest.approx(2 * 64 * 10 / 1.5, rel=1e-3)
    assert (float(mw["compute_s"]), float(mw["communication_s"]), float(mw["overhead_s"])) == (
        pytest.approx(0.1, rel=1e-3), pytest.approx(0.02, rel=1e-3), pytest.approx(0.03, rel=1e-3))
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


def test_the_profile_carries_the_cpu_and_sharing_figures_the_cost_model_caps_with(results_dir):
    """On 2 cores, PSS at N=2 and N=4: the profile keeps the N=1 run's CPU per example and, per
    K, the slowdown and the cores K processes handing off every step kept busy in the sharing
    calibration (2 x 0.8 and 4 x 0.45); the one cost model, told a cluster shares the machine's
    2 cores, caps PSS at those cores times the N=1 run's examples per CPU-second, never at more
    than the machine's cores. The calibrations are no fit of their own and leave the compute
    alone; a partial CPU figure (one task of a real cluster) is none."""
    ps1 = _record("p1", "parameter_server", 1, 20 * 0.12, 20, probe=0.03)
    rate = 64 / 0.12
    ps1["cpu"] = {"examples_per_cpu_second": rate / 1.5, "scope": "all tasks"}
    four = _record("p4", "parameter_server", 4, 1.5, 40, probe=0.01)
    recs = _load(results_dir, ps1, four, _sharing(1.0, 1.25, busy=0.8),
                 _sharing(1.9, 2.2, "s4", 4, busy=0.45))
    for rec in recs:
        rec["environment"] = {"cpu_count": 2, "usable_cpus": 2}
    fits = _fits(recs)
    assert set(fits) == {"multi_worker_mirrored", "parameter_server"}
    fit = fits["parameter_server"]
    assert fit.t_comp == pytest.approx(0.1) and sorted(fit.measured) == [2, 4]
    assert fit.profile.cpu_s_per_example["parameter_server"] == pytest.approx(1.5 / rate)
    assert fit.profile.sharing == {"2": {"slowdown": 1.25, "busy_cores": pytest.approx(1.6)},
                                   "4": {"slowdown": 2.2, "busy_cores": pytest.approx(1.8)}}
    for n, busy in ((2, 1.6), (4, 1.8)):
        local = specs.ClusterSpec(hosts=n, machine_cores=2)
        predicted = cost_model.predict(fit.profile, local, "parameter_server")
        assert predicted.examples_per_sec == pytest.approx(busy * rate / 1.5)
        assert predicted.bound == "this machine's cores"
    # a cluster of hosts of their own is not capped by this machine
    assert fit.project(4, NET)["bound"] != "this machine's cores"
    crowded = [dict(r, environment={"cpu_count": 2, "usable_cpus": 2}) for r in _load(
        results_dir, ps1, four, _sharing(1.9, 2.2, "s4", 4, busy=0.6))]  # 2.4 "busy" cores
    profile = _fits(crowded)["parameter_server"].profile
    assert profile.sharing["4"]["busy_cores"] == pytest.approx(2.4)
    assert cost_model.predict(profile, specs.ClusterSpec(hosts=4, machine_cores=2),
                              "parameter_server").examples_per_sec == pytest.approx(2 * rate / 1.5)
    ps1["cpu"]["scope"] = "this task only (partial: other hosts not measured)"
    assert "parameter_server" not in \
        _fits(_load(results_dir, ps1))["parameter_server"].profile.cpu_s_per_example


def _collectives(strategy, n, run_id="c", marked_by_flag=False):
    """A collectives cell's record: named as the comparison names it, or (an older record)
    marked by --comm_sweep in its config."""
    rec = _record(run_id, strategy, n, 1.0, 4, probe=0.5, run_name=(
        f"{strategy}-n{n}/cnn/1280/r0" if marked_by_flag else
        f"collectives-{strategy}-n{n}/cnn/1280/r0"))
    rec["config"] = {"train_examples": 4096, **({"comm_sweep": True} if marked_by_flag else {})}
    return rec


def test_a_collectives_cell_is_no_run_of_the_setting_nor_a_summary_row(results_dir):
    """A collectives cell (its run name; the network experiment's shaped calibration, or an
    older comparison's unshaped one, marked by --comm_sweep) trains a token epoch to time synchronization: in the very
    setting of the runs beside it, it is no fit of its own, moves neither their measured cells
    nor their profile, and is no row of the summary."""
    shaped = _collectives("multi_worker_mirrored", 2, "c3")
    shaped["network"] = {"emulated_gbps": 0.2, "method": "tc tbf"}
    cells = [_collectives("multi_worker_mirrored", 2),
             _collectives("parameter_server", 2, "c2", marked_by_flag=True), shaped]
    runs = _load(results_dir)
    for r in runs + cells:  # one setting for all: every record with the same config
        r["config"] = {**r.get("config", {}), "steps_per_execution": 1, "train_examples": 1280}
    assert {setting_of(r) for r in runs + cells} == {setting_of(runs[0])}
    before = _fits(runs)
    fits = _fits(runs + cells)
    assert set(fits) == set(before) == {"multi_worker_mirrored", "parameter_server"}
    for strategy, f in fits.items():
        assert f.measured == before[strategy].measured
        assert f.profile == before[strategy].profile
    assert len(summarize(runs + cells)) == len(summarize(runs))


def test_a_sparse_gradient_is_profiled_as_rows_and_projected_as_their_all_gather(results_dir):
    """A model with IndexedSlices: the profile's gradient is sparse and the projections
    all-gather its rows rather than all-reduce them; where the records split the gradient (rows
    of 0.9 MB beside two dense tensors of 0.1 MB) the rows are gathered and the dense rest
    all-reduced, each on its own."""
    recs = _load(results_dir)
    dense = _fits(recs)["multi_worker_mirrored"]
    cluster = dense.cluster(4, NET)
    assert dense.profile.gradient_kind == "dense"
    assert dense.project(4, NET)["communication_s"] == pytest.approx(
        cost_model.allreduce_s(1e6, cluster))
    for r in recs:
        if r.get("communication"):
            r["communication"]["gradient_kinds"] = {"indexed_slices": 1}
    mw = _fits(recs)["multi_worker_mirrored"]
    assert mw.profile.gradient_kind == "sparse" and mw.profile.sparse_tensors == 1
    gathered = cost_model.allreduce_s(1e6, cluster, "sparse")
    assert gathered != pytest.approx(cost_model.allreduce_s(1e6, cluster))
    assert mw.project(4, NET)["communication_s"] == pytest.approx(gathered)
    for r in recs:
        if r.get("communication"):
            r["communication"].update(gradient_kinds={"dense": 2, "indexed_slices": 1},
                                      sparse_gradient_bytes=900_000)
    split = _fits(recs)["multi_worker_mirrored"]
    assert split.profile.sparse_gradient_bytes == 900_000 and split.profile.sparse_tensors == 1
    assert split.profile.tensors == 3
    assert split.project(4, NET)["communication_s"] == pytest.approx(
        cost_model.allreduce_s(9e5, cluster, "sparse") + cost_model.allreduce_s(1e5, cluster))


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
    partial = _fits(_load(results_dir, ps1))["parameter_server"]
    assert partial.profile.overlap == {"parameter_server": pytest.approx(1 / 3)}
    assert partial.overhead == 0.0
    assert not [n for n in partial.notes if "upper bound" in n]
