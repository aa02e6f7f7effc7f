"""results/report/adaptive.py: the adaptive experiment's table from records (fake ones here; the
real preset is in docs/benchmarks.md)."""
from results.report import adaptive
from tests.results.fake import record


def _cell(name, strategy="multi_worker_mirrored", n=2, epoch_time=1.0, acc=0.9, **extra):
    return record(name, strategy, n, epoch_time, run_name=f"adaptive-{name}/cnn/4096/r0",
                  examples=4096, global_batch=128, epochs=4, acc=acc,
                  memory_per_device=[{"bytes": 30e6}], **extra)


def _adapt_run():
    rec = _cell("changing-auto", "one_device", 1, epoch_time=0.5, acc=0.91)
    # 4 epochs: 2 under MWMS (the second slowed), then 2 under one device after a switch that
    # was asked at t=100 and whose next epoch started at t=106
    for i, e in enumerate(rec["epochs"]):
        e["started_at"] = 90.0 + 10 * i + (6 if i >= 2 else 0)
    rec["adapt"] = {"initial": {"strategy": "multi_worker_mirrored", "workers": 2},
                    "schedule": "0:10,1:0.05",
                    "switches": [{"after_epoch": 2, "requested_at": 100.0,
                                  "verdict": {"to": "1 device"},
                                  "memory_per_device_bytes": 45e6}]}
    rec["epochs"][2]["started_at"] = 106.0
    return rec


def test_the_table_has_every_configuration_in_each_scenario():
    records = [_cell("one_device", "one_device", 1, epoch_time=2.0, acc=0.9),
               _cell("steady-mwms-n2", epoch_time=1.0),
               _cell("changing-mwms-n2", epoch_time=3.0, acc=0.92), _adapt_run()]
    rows = adaptive.rows(records)
    by = {(r["scenario"], r["configuration"]): r for r in rows}
    # one device has no network to slow: it stands in both scenarios
    assert ("steady", "single device") in by and ("changing", "single device") in by
    auto = by[("changing", "adaptive (--adapt)")]
    # its epochs (10 x 0.5 + 3 x 0.5) and the 6 s between its segments
    assert auto["training_time_s"] == 10 * 0.5 + 3 * 0.5 + 6.0
    assert auto["examples_per_sec"] == 4 * 4096 / auto["training_time_s"]
    assert auto["peak_memory_per_device_mb"] == 45.0  # the configuration it left was larger
    assert round(auto["accuracy_delta_points"], 6) == 1.0
    assert auto["switches"] == "after epoch 2: 1 device"
    lines = adaptive.checks([r for r in rows if r["scenario"] == "changing"])
    start = by[("changing", "data parallel (MWMS N=2)")]["training_time_s"]
    assert lines[0].startswith("against the configuration the plan chose at the start "
                               "(data parallel (MWMS N=2))")
    assert lines[0].endswith(f"{auto['training_time_s']:.1f} s vs {start:.1f} s: "
                             f"{1 - auto['training_time_s'] / start:.1%} less time")


def test_the_communication_share_comes_from_the_timeline():
    rec = _cell("steady-mwms-n2")
    timeline = {"per_worker": {w: {"step_s": 0.02, "wait_s": 0.001, "sync_s": 0.004}
                               for w in ("worker:0", "worker:1")}}
    for e in rec["epochs"]:
        e["timeline"] = timeline
    assert abs(adaptive.communication_share(rec) - 0.25) < 1e-9
    assert adaptive.communication_share(_cell("one_device", "one_device", 1)) == 0.0
    assert adaptive.communication_share(_cell("model_parallel-s2-m4", "model_parallel",
                                              1)) is None  # its copies are not timed


def test_adaptive_runs_are_in_their_table_and_no_other(tmp_path):
    from results.records.store import write_record
    from results.report import build as report

    for rec in (_cell("one_device", "one_device", 1), _cell("changing-mwms-n2"), _adapt_run(),
                record("b", run_name="baseline/cnn/4096/r0", examples=4096)):
        write_record(str(tmp_path), rec)
    report.build(str(tmp_path))
    summary = (tmp_path / "summary.csv").read_text().splitlines()
    assert len(summary) == 2 and "baseline" in summary[1]  # the baseline only
    text = (tmp_path / "report.md").read_text()
    assert "## Adaptive: the seed's Table I on this machine" in text
    assert "### cnn, changing network (0:10,1:0.05: epoch:Gbit/s)" in text
    # the changing scenario: one device, MWMS and --adapt (no steady cell ran)
    assert len((tmp_path / "adaptive.csv").read_text().splitlines()) == 1 + 3


def test_the_straggler_scenario_is_a_table_of_its_own(tmp_path):
    slowed = _cell("straggler-mwms-n2", epoch_time=2.0,
                   straggler={"task": "worker:1", "delay_ms": None, "schedule": "0:0,2:60"})
    auto = _cell("straggler-auto", "one_device", 1, epoch_time=0.5)
    # its last segment ran on one device, without the schedule: the journal still says it
    auto["adapt"] = {"initial": {"strategy": "multi_worker_mirrored", "workers": 2},
                     "schedule": "0:10", "straggler_schedule": "0:0,2:60", "switches": []}
    rows = adaptive.rows([_cell("one_device", "one_device", 1), slowed, auto])
    mine = [r for r in rows if r["scenario"] == "straggler"]
    assert [r["configuration"] for r in mine] == ["single device", "data parallel (MWMS N=2)",
                                                  "adaptive (--adapt)"]
    assert {r["straggler_schedule"] for r in mine[1:]} == {"0:0,2:60"}
    text = adaptive.markdown(rows)
    assert "### cnn, a straggler (0:0,2:60: epoch:ms added to the last worker's steps" in text
