"""The report built from fixture records: CSV values, report sections, PNGs that open."""
import csv

import matplotlib.image as mpimg
import pytest

from results.records import store as records
from results.report.build import build
from results.report.summary import COLUMNS


def _record(run_id, strategy, n, times, acc, run_name="", size=1024):
    epochs = [{"epoch": i + 1, "time_s": t, "examples_per_sec": size / t, "train_loss": 1.0 / (i + 1),
               "train_accuracy": 0.5, "eval_loss": 1.0 - acc, "eval_accuracy": acc * (i + 1) / len(times)}
              for i, t in enumerate(times)]
    replicas = n if strategy in ("mirrored", "multi_worker_mirrored") else 1
    return {"run_id": run_id, "run_name": run_name, "timestamp": f"2026-01-01T00:00:0{len(run_id)}",
            "strategy": strategy, "model": "cnn", "dataset": "synthetic",
            "num_workers": n if strategy in ("multi_worker_mirrored", "parameter_server") else 1,
            "num_replicas_in_sync": replicas, "batch_size_per_replica": 64,
            "global_batch_size": 64 * replicas, "train_examples": size, "epochs": epochs,
            "steady_state": {}, "final_eval_accuracy": epochs[-1]["eval_accuracy"],
            "final_eval_loss": 1.0 - acc, "config": {}, "environment": {}, "threads_per_task": 1}


@pytest.fixture
def results_dir(tmp_path):
    for rec in [
        # first epochs are slow (tracing) and must not count
        _record("b1", "one_device", 1, [50.0, 10.0, 12.0], 0.90, "baseline/cnn/1024/r0"),
        _record("b2", "one_device", 1, [50.0, 11.0, 11.0], 0.92, "baseline/cnn/1024/r1"),
        _record("ref", "one_device", 1, [50.0, 7.0, 7.0], 0.91, "hardware_reference/cnn/1024/r0"),
        _record("mw2", "multi_worker_mirrored", 2, [60.0, 8.0, 8.0], 0.88),
        _record("ps2", "parameter_server", 2, [60.0, 20.0, 20.0], 0.90),
    ]:
        records.write_record(str(tmp_path), rec)
    (tmp_path / "records" / "broken.json").write_text('{"run_id": ')
    return tmp_path


def _rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_summary_csv_matches_definitions(results_dir):
    paths, problems, _ = build(str(results_dir), target_accuracy=0.5)
    assert [p[0] for p in problems] == ["broken.json"]
    rows = _rows(results_dir / "summary.csv")
    assert tuple(rows[0]) == COLUMNS and len(rows) == 4
    by = {(r["strategy"], r["role"]): r for r in rows}
    base = by[("one_device", "baseline")]
    # steady epochs pooled over both repeats: 10, 12, 11, 11 -> median 11
    assert float(base["epoch_time_s"]) == 11.0 and base["runs"] == "2"
    assert float(base["epoch_time_min_s"]) == 10.0 and float(base["epoch_time_max_s"]) == 12.0
    mw = by[("multi_worker_mirrored", "strategy")]
    assert float(mw["speedup"]) == pytest.approx(11.0 / 8.0)
    assert float(mw["scaling_percent"]) == pytest.approx(11.0 / (2 * 8.0) * 100)
    assert float(mw["efficiency"]) == pytest.approx(11.0 / 8.0 / 2)
    assert float(mw["speedup_vs_reference"]) == pytest.approx(7.0 / 8.0)
    assert float(mw["accuracy_delta"]) == pytest.approx(0.88 - 0.91)  # baseline median of 0.90, 0.92
    ps = by[("parameter_server", "strategy")]
    assert float(ps["speedup"]) == pytest.approx(0.55)
    # time to 50 %: accuracy after epoch 2 of 3 is 2/3 of final (> 0.5) -> 60 + 20 s
    assert float(ps["time_to_target_s"]) == pytest.approx(80.0)


def test_the_report_opens_with_its_decision_and_a_compact_table(results_dir):
    """Before the appendix: at most six decision lines, the first naming the fastest run (the
    all-cores reference, 7 s an epoch, against MWMS's 8), then one table of at most 8 columns
    whose first row is that run; the definitions and the full table only in the appendix; and
    the same decision lines in what `build` gives the terminal."""
    _, _, notes = build(str(results_dir), target_accuracy=None)
    text = (results_dir / "report.md").read_text()
    answer, appendix = text.split("## Appendix")
    said = [line[2:] for line in answer.splitlines() if line.startswith("- ")]
    assert 1 <= len(said) <= 6 and all(len(line) <= 160 for line in said)
    assert said[0].startswith("Use one device (all cores): 146 examples/s, 1.57x one device on 1 core")
    assert any(line.startswith("MWMS N=2: 0.88x the best") for line in said)
    assert any(line.startswith("PSS N=2: 0.35x the best") for line in said)
    table = [line for line in answer.splitlines() if line.startswith("|")]
    assert 3 <= len(table) and len(table[0].strip("|").split("|")) <= 8
    assert table[2].startswith("| one device (all cores) | 146")
    assert "Speedup = T1/TN" in appendix and "Speedup = T1/TN" not in answer
    assert [n.strip() for n in notes if n.startswith("  ")] == said


def test_runs_without_a_baseline_get_the_fastest_and_what_a_decision_needs(tmp_path):
    """Runs made by hand (a GPU host, a platform's job) have no one-device baseline: the report
    names the fastest and how to get a decision, and its table leaves 'vs one device' empty."""
    for rec in (_record("mw2", "multi_worker_mirrored", 2, [60.0, 8.0, 8.0], 0.88),
                _record("ps2", "parameter_server", 2, [60.0, 20.0, 20.0], 0.90)):
        records.write_record(str(tmp_path), rec)
    build(str(tmp_path))
    answer = (tmp_path / "report.md").read_text().split("## Appendix")[0]
    (line,) = [x for x in answer.splitlines() if x.startswith("- ")]
    assert line.startswith("- Fastest measured: MWMS N=2, 128 examples/s. No one-device baseline")
    assert "| MWMS N=2 | 128 (128–128) | – | 1.00x |" in answer


def test_report_sections_and_plots(results_dir):
    paths, _, _ = build(str(results_dir), target_accuracy=None)
    text = (results_dir / "report.md").read_text()
    for section in ("# Strategy comparison", "cnn, synthetic, 1024", "## Appendix",
                    "### All runs: cnn, synthetic, 1024", "### Findings", "### Plots",
                    "### Skipped records", "broken.json"):
        assert section in text
    assert "parameter_server N=2 is slower than one device (0.55x the 1-thread baseline)" in text
    assert "only adds communication" not in text and "costs more than the compute" not in text
    assert "no multi-process setup beats it" in text  # the all-cores reference (7 s) beats MWMS (8 s)
    pngs = [p for p in paths if p.endswith(".png")]
    assert len(pngs) == 4
    for p in pngs:
        img = mpimg.imread(p)
        assert img.shape[0] > 300 and img.shape[1] > 400


def test_size_sweep_plot_when_sizes_differ(tmp_path):
    for size in (1024, 4096):
        records.write_record(str(tmp_path), _record(f"b{size}", "one_device", 1, [5.0, 1.0], 0.9,
                                                    "baseline", size=size))
        records.write_record(str(tmp_path), _record(f"m{size}", "mirrored", 2, [5.0, 0.8], 0.9,
                                                    size=size))
    paths, _, _ = build(str(tmp_path))
    assert any(p.endswith("size_sweep.png") for p in paths)


def test_no_records_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="no readable records"):
        build(str(tmp_path))


def test_straggler_runs_get_their_own_table_and_plot(results_dir):
    """Straggler runs stay out of the main summary; their table is relative to the same
    setting without a straggler, and the PSS share comes from steps_by_worker."""
    slow = [("mw-d50", "multi_worker_mirrored", [60.0, 32.0, 32.0], None),
            ("ps-d50", "parameter_server", [60.0, 25.0, 25.0], {"worker:0": 30, "worker:1": 10})]
    for run_id, strategy, times, steps in slow:
        rec = _record(run_id, strategy, 2, times, 0.9, f"straggler-{strategy}-n2-d50")
        rec["straggler"], rec["steps_by_worker"] = {"task": "worker:1", "delay_ms": 50.0}, steps
        records.write_record(str(results_dir), rec)
    paths, _, _ = build(str(results_dir))
    assert len(_rows(results_dir / "summary.csv")) == 4  # unchanged by the straggler runs
    rows = {(r["strategy"], float(r["delay_ms"])): r
            for r in _rows(results_dir / "straggler.csv")}
    assert set(rows) == {("multi_worker_mirrored", 0.0), ("multi_worker_mirrored", 50.0),
                         ("parameter_server", 0.0), ("parameter_server", 50.0)}
    assert float(rows[("multi_worker_mirrored", 50.0)]["relative_throughput"]) == \
        pytest.approx(8.0 / 32.0)
    assert float(rows[("parameter_server", 50.0)]["relative_throughput"]) == \
        pytest.approx(20.0 / 25.0)
    assert float(rows[("parameter_server", 50.0)]["straggler_step_share"]) == 0.25
    text = (results_dir / "report.md").read_text()
    assert "## Straggler experiment" in text
    assert "parameter_server N=2: with worker:1 slowed by 50 ms/step it keeps 80%" in text
    assert "the straggler ran 25% of the steps (fair share 50%)" in text
    (png,) = [p for p in paths if p.endswith("straggler.png")]
    assert mpimg.imread(png).shape[1] > 400


def test_report_names_reference_overhead_and_target_counts(tmp_path):
    from tests.results import fake

    recs = fake.sweep() + [
        fake.record("f1", "engine_floor", epoch_time=0.9, run_name="engine_floor/cnn/1024/r0"),
        fake.record("fa", "engine_floor", epoch_time=0.56, threads=2,
                    run_name="engine_floor_all/cnn/1024/r0"),
        fake.record("m2b", "mirrored", 2, 1.2, acc=0.3, run_name="mirrored-n2/cnn/r1",
                    timestamp="2026-01-01T00:00:01")]
    for rec in recs:
        records.write_record(str(tmp_path), rec)
    build(str(tmp_path), target_accuracy=0.5)
    text = (tmp_path / "report.md").read_text()
    assert "Fastest single process (the reference): engine_floor (plain TF loop, 2 threads)." \
        in text
    assert ("Toolkit overhead: one_device at 1 thread runs at 90% of the plain TF loop; at all "
            "cores 80%.") in text
    (mirrored2,) = [line for line in text.splitlines() if line.startswith("| mirrored | 2 |")]
    assert mirrored2.endswith("| 13.2 (1/2) |")  # one of the two runs reached 50%
    rows = _rows(tmp_path / "summary.csv")
    assert [r["role"] for r in rows[:2]] == ["engine_floor", "engine_floor"]
    assert {r["reference_row"] for r in rows} == {"engine_floor (plain TF loop, 2 threads)"}


def test_report_completes_with_records_it_cannot_read(tmp_path):
    """A cut-off record, one missing final_eval_loss, one with run_name null: named under
    'Skipped records', and the report is still built from the rest."""
    import json

    from tests.results import fake

    for rec in fake.sweep():
        records.write_record(str(tmp_path), rec)
    directory = tmp_path / "records"
    whole = json.dumps(fake.record("cut"))
    (directory / "cut.json").write_text(whole[:len(whole) // 2])
    no_loss = fake.record("no_loss")
    del no_loss["final_eval_loss"]
    null_name = fake.record("null_name", run_name=None)
    for rec in (no_loss, null_name):
        (directory / f"{rec['run_id']}.json").write_text(json.dumps(rec))
    paths, problems, _ = build(str(tmp_path), target_accuracy=0.5)
    assert sorted(name for name, _ in problems) == ["cut.json", "no_loss.json",
                                                    "null_name.json"]
    text = (tmp_path / "report.md").read_text()
    assert "## Skipped records" in text and "`no_loss.json`: missing keys: final_eval_loss" in text
    assert len(_rows(tmp_path / "summary.csv")) == 8
    # the command line too: one line per skipped record, exit 0, the report rebuilt from the
    # readable ones
    from tests.helpers import run_module

    (tmp_path / "report.md").unlink()
    proc = run_module("experiments.report", f"--results_dir={tmp_path}", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert "skipped record null_name.json: run_name is null" in proc.stdout
    assert proc.stdout.splitlines()[-1].endswith(f"; read {tmp_path / 'report.md'}")
    assert "## Skipped records" in (tmp_path / "report.md").read_text()


def test_central_storage_gets_its_row_label_and_plot_line(results_dir):
    rec = _record("cs2", "central_storage", 2, [60.0, 9.0, 9.0], 0.89)
    rec["num_replicas_in_sync"], rec["global_batch_size"] = 2, 128  # its N: local replicas
    records.write_record(str(results_dir), rec)
    paths, _, _ = build(str(results_dir), target_accuracy=None)
    (row,) = [r for r in _rows(results_dir / "summary.csv") if r["strategy"] == "central_storage"]
    assert row["n"] == "2" and row["role"] == "strategy"
    assert "| central_storage | 2 |" in (results_dir / "report.md").read_text()
    assert any(p.endswith("throughput_vs_workers.png") for p in paths)


def test_the_rows_are_hparams_trials_in_tensorboard(results_dir):
    import tensorflow as tf
    from tensorboard.plugins.hparams import plugin_data_pb2

    def trials():
        out = {}
        for event_file in (results_dir / "tensorboard" / "hparams").glob("*/events.*"):
            hps, metrics = {}, {}
            for event in tf.compat.v1.train.summary_iterator(str(event_file)):
                for value in event.summary.value:
                    if value.metadata.plugin_data.plugin_name == "hparams":
                        data = plugin_data_pb2.HParamsPluginData.FromString(
                            value.metadata.plugin_data.content)
                        hps = {k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind"))
                               for k, v in data.session_start_info.hparams.items()}
                    else:
                        metrics[value.tag] = float(tf.make_ndarray(value.tensor))
            out[event_file.parent.name] = (hps, metrics)
        return out

    build(str(results_dir), 0.5)
    first = trials()
    with open(results_dir / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(first) == len(rows)  # one trial per summary row
    assert all(name.startswith("trial-") for name in first)  # inside hparams/, whatever the model
    mw = next(v for v in first.values() if v[0]["strategy"] == "multi_worker_mirrored")
    row = next(r for r in rows if r["strategy"] == "multi_worker_mirrored")
    assert mw[0]["n"] == 2 and mw[0]["model"] == "cnn"
    assert mw[1]["examples_per_sec"] == pytest.approx(float(row["examples_per_sec"]), rel=1e-6)
    assert mw[1]["scaling_percent"] == pytest.approx(float(row["scaling_percent"]), rel=1e-6)
    # the experiment-wide config is there and names what tells the rows apart (TensorBoard
    # ticks the first five by name), and a rebuilt report keeps one copy of each trial
    (config,) = (results_dir / "tensorboard" / "hparams").glob("events.*")
    names = set()
    for event in tf.compat.v1.train.summary_iterator(str(config)):
        for value in event.summary.value:
            if value.metadata.plugin_data.plugin_name == "hparams":
                data = plugin_data_pb2.HParamsPluginData.FromString(
                    value.metadata.plugin_data.content)
                names |= {h.name for h in data.experiment.hparam_infos}
    assert {"role", "strategy", "n"} <= names
    assert "model" not in names and "batch_size_per_replica" not in names  # the same in all
    build(str(results_dir), 0.5)
    assert trials() == first
    assert len(list((results_dir / "tensorboard" / "hparams").glob("*/events.*"))) == len(rows)
