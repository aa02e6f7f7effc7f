"""Summary rows: which runs pool into a row, and what each row is compared against."""
import pytest

from results.records.cells import label
from results.report.summary import COLUMNS, SETTING_KEYS, groups, summarize
from tests.results import fake


def _by(rows):
    return {(r["role"], r["strategy"], r["n"], r["threads_per_task"]): r for r in rows}


def test_rounded_epochs_keep_their_baseline():
    """--train_examples=5000 trains 4992 (one device), 4864 (N=4), 4608 (N=8) examples per
    epoch: every row still finds its baseline, and times are compared per example."""
    rows = summarize(fake.sweep(examples=5000, ns=(1, 2, 4, 8)))
    assert len(groups(rows)) == 1
    assert all(r["speedup"] is not None and r["speedup_vs_reference"] is not None for r in rows)
    assert {r["train_examples"] for r in rows} == {5000}
    by = _by(rows)
    mirrored8 = by[("strategy", "mirrored", 8, 1)]
    assert mirrored8["examples_per_epoch"] == 4608
    assert by[("baseline", "one_device", 1, 1)]["examples_per_epoch"] == 4992
    # the N=8 epoch (1.2 s for 4608) against the baseline's (1 s for 4992), per example
    assert mirrored8["speedup"] == pytest.approx((1.0 / 4992) / (1.2 / 4608))


def test_fixed_global_batch_rows_keep_their_baseline():
    """--global_batch_size=256: 256 per replica on one device, 32 on 8; same setting."""
    rows = summarize(fake.sweep(examples=4096, global_batch=256, ns=(1, 2, 4, 8)))
    assert len(groups(rows)) == 1
    assert all(r["speedup"] is not None for r in rows)
    by = _by(rows)
    assert by[("strategy", "mirrored", 8, 1)]["batch_per_replica_used"] == 32
    assert by[("baseline", "one_device", 1, 1)]["batch_per_replica_used"] == 256
    assert {r["global_batch_size"] for r in rows} == {256}


def test_setting_falls_back_to_top_level_without_config():
    recs = fake.sweep()
    for r in recs:
        r["config"] = {}
    rows = summarize(recs)
    assert all(r["speedup"] is not None for r in rows)
    assert {r["train_examples"] for r in rows} == {1024}


def test_runs_with_different_settings_are_not_pooled():
    """A rerun with --epochs=5 is another row, not a fifth of a median with 4-epoch runs."""
    recs = [fake.record("b", run_name="baseline/cnn/1024/r0", epochs=4),
            fake.record("m4", "multi_worker_mirrored", 2, 1.0, epochs=4),
            fake.record("m4b", "multi_worker_mirrored", 2, 1.2, epochs=4),
            fake.record("m5", "multi_worker_mirrored", 2, 3.0, epochs=5),
            fake.record("lr", "multi_worker_mirrored", 2, 4.0, epochs=4,
                        config={"learning_rate": 0.1})]
    rows = summarize(recs)
    mwms = sorted((r for r in rows if r["strategy"] == "multi_worker_mirrored"),
                  key=lambda r: r["epoch_time_s"])
    assert [(r["runs"], r["epoch_time_s"], r["epochs"], r["learning_rate"]) for r in mwms] == [
        (2, 1.1, 4, 0.02), (1, 3.0, 5, 0.02), (1, 4.0, 4, 0.1)]
    assert mwms[0]["speedup"] is not None and mwms[1]["speedup"] is None  # no 5-epoch baseline
    assert len(groups(rows)) == 3


def test_straggler_runs_stay_out_even_at_delay_zero():
    recs = fake.sweep()
    undisturbed = fake.record("d0", "multi_worker_mirrored", 2, 9.0,
                              run_name="straggler-multi_worker_mirrored-n2-d0/cnn/1024/r0")
    flagged = fake.record("s", "parameter_server", 2, 9.0,
                          straggler={"task": "worker:1", "delay_ms": 0.0})
    configured = fake.record("c", "parameter_server", 2, 9.0,
                             config={"straggler_task": "worker:1"})
    assert summarize(recs + [undisturbed, flagged, configured]) == summarize(recs)


def test_time_to_target_counts_the_runs_that_reached_it():
    recs = [fake.record("b", run_name="baseline", acc=0.9),
            fake.record("m1", "mirrored", 2, acc=0.9),
            fake.record("m2", "mirrored", 2, acc=0.3)]  # never reaches 0.5
    by = _by(summarize(recs, target_accuracy=0.5))
    m = by[("strategy", "mirrored", 2, 1)]
    assert (m["target_reached_runs"], m["runs"]) == (1, 2)
    assert m["time_to_target_s"] == pytest.approx(10.0 + 1.0)  # the reaching run only
    assert by[("baseline", "one_device", 1, 1)]["target_reached_runs"] == 1
    assert _by(summarize(recs))[("strategy", "mirrored", 2, 1)]["target_reached_runs"] is None


def test_reference_is_the_fastest_single_process():
    """Mirrored N=2 (one process) beats the all-cores reference: it is the reference. MWMS N=2
    (two processes) is faster still but is not a single process."""
    recs = fake.sweep() + [fake.record("m", "mirrored", 4, 0.5, threads=2),
                           fake.record("w", "multi_worker_mirrored", 4, 0.4)]
    by = _by(summarize(recs))
    assert {r["reference_row"] for r in by.values()} == {"mirrored N=4"}
    assert by[("strategy", "mirrored", 4, 2)]["speedup_vs_reference"] == 1.0
    assert by[("hardware_reference", "one_device", 1, 2)]["speedup_vs_reference"] == \
        pytest.approx(0.5 / 0.7)
    assert by[("strategy", "multi_worker_mirrored", 4, 1)]["speedup_vs_reference"] == \
        pytest.approx(0.5 / 0.4)


def test_central_storage_is_one_process_with_n_replicas():
    """Its N is its local replicas (not workers) and, in one process, it may be the reference."""
    recs = fake.sweep() + [fake.record("c", "central_storage", 2, 0.3, threads=2)]
    by = _by(summarize(recs))
    row = by[("strategy", "central_storage", 2, 2)]
    assert row["n"] == 2 and row["reference_row"] == "central_storage N=2"
    assert row["speedup_vs_reference"] == 1.0


def _with_floors():
    cpu = lambda cores: {"seconds": 1.0, "wall_s": 1.0, "cores_used": cores,  # noqa: E731
                         "examples_per_cpu_second": 100.0 * cores, "scope": "all tasks"}
    return fake.sweep() + [
        fake.record("f1", "engine_floor", epoch_time=0.9, run_name="engine_floor/cnn/1024/r0"),
        fake.record("fa", "engine_floor", epoch_time=0.6, threads=2,
                    run_name="engine_floor_all/cnn/1024/r0"),
        fake.record("m1", "mirrored", 1, 0.75, threads=2, cpu=cpu(1.0)),
        fake.record("m1b", "mirrored", 1, 0.75, threads=2, cpu=cpu(3.0),
                    timestamp="2026-01-01T00:00:01"),
        fake.record("m1c", "mirrored", 1, 0.75, threads=2, cpu=cpu(2.0),
                    timestamp="2026-01-01T00:00:02")]


def test_engine_floor_cpu_columns():
    rows = summarize(_with_floors())
    assert [r["role"] for r in rows[:2]] == ["engine_floor", "engine_floor"]
    by = _by(rows)
    # against the plain TF loop at the same threads: 1 thread -> engine_floor, 2 -> _all
    assert by[("baseline", "one_device", 1, 1)]["vs_engine_floor"] == pytest.approx(0.9)
    assert by[("hardware_reference", "one_device", 1, 2)]["vs_engine_floor"] == \
        pytest.approx(0.6 / 0.7)
    m1 = by[("strategy", "mirrored", 1, 2)]
    assert m1["vs_engine_floor"] == pytest.approx(0.6 / 0.75)
    assert (m1["cores_used"], m1["examples_per_cpu_second"], m1["cpu_scope"]) == \
        (2.0, 200.0, "all tasks")
    for key in (("strategy", "multi_worker_mirrored", 2, 1), ("strategy", "mirrored", 2, 1),
                ("strategy", "parameter_server", 1, 1), ("engine_floor", "engine_floor", 1, 1)):
        assert by[key]["vs_engine_floor"] is None
    assert by[("baseline", "one_device", 1, 1)]["cores_used"] is None  # no cpu record
    assert {"cores_used", "examples_per_cpu_second", "cpu_scope", "vs_engine_floor",
            "examples_per_epoch", "target_reached_runs", "reference_row"} <= set(COLUMNS)
    assert set(SETTING_KEYS) <= set(COLUMNS)


def test_accumulation_steps_split_settings_and_old_records_count_as_one():
    """K=2 trains other steps than K=1: its own row, not pooled with K=1's; a record from before
    the flag is K=1."""
    old = fake.record("old", "one_device", run_name="baseline/cnn/1024/r0")
    new = fake.record("k1", "one_device", run_name="baseline/cnn/1024/r1",
                      config={"accumulation_steps": 1})
    k2 = fake.record("k2", "one_device", run_name="baseline/cnn/1024/r2",
                     config={"accumulation_steps": 2})
    assert "accumulation_steps" not in old["config"]
    rows = summarize([old, new, k2])
    assert sorted((r["accumulation_steps"], r["runs"]) for r in rows) == [(1, 2), (2, 1)]


def test_a_k_sweep_names_each_setting_by_its_k():
    from results.records.cells import setting_of, setting_title

    k1 = setting_of(fake.record("a", config={"accumulation_steps": 1}))
    k4 = setting_of(fake.record("b", config={"accumulation_steps": 4}))
    assert setting_title(k1) == "cnn, synthetic, 1024 training examples, 64 per replica"
    assert setting_title(k4) == ("cnn, synthetic, 1024 training examples, 64 per replica, "
                                 "4 micro-batches per update")


def test_sharing_calibration_is_a_row_of_n_plain_loops_not_a_single_process():
    """The machine's limit for 2 workers (two plain loops at once) is a row at N=2 named for
    what it is; it is neither the 1-thread floor the toolkit is compared with nor a candidate
    for the fastest single process, however fast."""
    shared = fake.record("fs", "engine_floor", epoch_time=0.3, run_name="engine_floor_shared/cnn/"
                         "1024/r0", sharing={"processes": 2, "slowdown": {"free": 1.1,
                                                                          "lockstep": 1.3}})
    rows = summarize(_with_floors() + [shared])
    by = _by(rows)
    row = by[("engine_floor", "engine_floor", 2, 1)]
    assert label(row) == "engine_floor (2 plain TF loops at once, 1 thread each)"
    assert row["scaling_percent"] == pytest.approx(1.0 / (2 * 0.3) * 100)
    assert by[("baseline", "one_device", 1, 1)]["vs_engine_floor"] == pytest.approx(0.9)
    assert row["reference_row"] != label(row) and row["vs_engine_floor"] is None
    # timing rounds, not a training run: no accuracy against the baseline, no step, no target
    assert row["accuracy_delta"] is None and row["step_time_s"] is None
    assert row["time_to_target_s"] is None
    # a reference, not a setup: never flagged superlinear; the findings measure setups by it
    from results.report.findings import findings
    text = findings(rows)
    assert "2 plain TF loops at once, 1 thread each): superlinear" not in text
    assert "The machine's limit for 2 workers, 2 plain TF loops at once, is 3413 examples/s; " \
           "of it: multi_worker_mirrored N=2 " in text


def test_cores_by_task_are_medians_per_task_and_reported_for_clusters():
    def cpu(chief, worker):
        return {"cores_used": chief + worker, "examples_per_cpu_second": 1.0, "scope": "all tasks",
                "cores_by_task": {"chief:0": chief, "worker:0": worker}}
    recs = fake.sweep() + [
        fake.record("p2a", "parameter_server", 2, 1.2, run_name="parameter_server-n2/cnn/r1",
                    cpu=cpu(0.2, 0.9)),
        fake.record("p2b", "parameter_server", 2, 1.2, run_name="parameter_server-n2/cnn/r2",
                    cpu=cpu(0.4, 0.7)),
        fake.record("p2c", "parameter_server", 2, 1.2, run_name="parameter_server-n2/cnn/r3",
                    cpu=cpu(0.3, 0.8))]
    rows = summarize(recs)
    row = _by(rows)[("strategy", "parameter_server", 2, 1)]
    assert row["cores_by_task"] == "chief:0=0.30 worker:0=0.80"
    assert _by(rows)[("baseline", "one_device", 1, 1)]["cores_by_task"] is None
    from results.report.build import markdown
    text = markdown(rows, [], [], None)
    assert "Cores used by task (local clusters): parameter_server N=2: chief:0 0.30 " \
           "worker:0 0.80." in text


def test_rows_say_whether_their_workers_had_cores_of_their_own():
    """'pinned': yes where every pooled run pinned its workers (--pin_workers), no where none
    did, mixed where a resumed directory pooled both (its figures mix two placements); the
    report's table shows it after the threads."""
    from results.report.build import _table

    recs = fake.sweep(ns=(1, 2))
    for r in recs:
        if r["num_workers"] == 2:
            r["config"]["pin_workers"] = True
    # a second MWMS N=2 run from before the comparison pinned
    recs.append(fake.record("old", "multi_worker_mirrored", 2, epoch_time=1.2,
                            run_name="multi_worker_mirrored-n2/cnn/r1",
                            config={"pin_workers": False}))
    by = _by(summarize(recs))
    assert by[("strategy", "parameter_server", 2, 1)]["pinned"] == "yes"
    assert by[("strategy", "multi_worker_mirrored", 2, 1)]["pinned"] == "mixed"
    assert by[("strategy", "parameter_server", 1, 1)]["pinned"] == "no"
    assert by[("strategy", "mirrored", 2, 1)]["pinned"] == "no"  # one process, N replicas
    table = _table(summarize(recs))
    assert "| parameter_server | 2 | 1 pinned |" in table
    assert "| multi_worker_mirrored | 2 | 1 (pinned in some runs) |" in table
    assert "| parameter_server | 1 | 1 |" in table
