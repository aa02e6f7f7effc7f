import json
import os
import subprocess
import sys

import pytest

from results.records import store as records
from tests.helpers import ROOT
from tests.results import fake


def _record(run_id="r1"):
    return fake.record(run_id)


def test_write_is_atomic_and_loadable(tmp_path):
    path = records.write_record(str(tmp_path), _record())
    assert path == records.record_path(str(tmp_path), "r1")
    assert os.listdir(tmp_path / "records") == ["r1.json"]  # no temp file left behind
    loaded, problems = records.load_records(str(tmp_path))
    assert problems == [] and loaded[0]["strategy"] == "one_device"


def test_incomplete_record_is_refused_and_nothing_written(tmp_path):
    rec = _record()
    del rec["strategy"]
    with pytest.raises(ValueError, match="strategy"):
        records.write_record(str(tmp_path), rec)
    assert not (tmp_path / "records").exists() or not os.listdir(tmp_path / "records")


def test_corrupt_record_is_reported_not_fatal(tmp_path):
    records.write_record(str(tmp_path), _record("good"))
    (tmp_path / "records" / "bad.json").write_text("{truncated")
    loaded, problems = records.load_records(str(tmp_path))
    assert [r["run_id"] for r in loaded] == ["good"]
    assert len(problems) == 1 and problems[0][0] == "bad.json"


def test_overwrite_replaces_whole_file(tmp_path):
    records.write_json_atomic(str(tmp_path / "x.json"), {"a": 1})
    records.write_json_atomic(str(tmp_path / "x.json"), {"b": 2})
    assert json.loads((tmp_path / "x.json").read_text()) == {"b": 2}


def test_records_the_report_cannot_read_are_named_with_a_reason(tmp_path):
    """A cut-off file, a missing documented key, a null run_name, malformed epochs: each is
    skipped with a one-line reason naming the file; the good record still loads."""
    records.write_record(str(tmp_path), _record("good"))
    directory = tmp_path / "records"
    whole = json.dumps(_record("cut"))
    (directory / "cut.json").write_text(whole[:len(whole) // 2])
    no_loss = _record("no_loss")
    del no_loss["final_eval_loss"]
    null_name = _record("null_name")
    null_name["run_name"] = None
    bad_epochs = _record("bad_epochs")
    bad_epochs["epochs"] = [{"epoch": 1, "time_s": 1.0}]
    not_list = _record("not_list")
    not_list["epochs"] = "3"
    for rec in (no_loss, null_name, bad_epochs, not_list):
        (directory / f"{rec['run_id']}.json").write_text(json.dumps(rec))
    loaded, problems = records.load_records(str(tmp_path))
    assert [r["run_id"] for r in loaded] == ["good"]
    why = dict(problems)
    assert set(why) == {"cut.json", "no_loss.json", "null_name.json", "bad_epochs.json",
                        "not_list.json"}
    assert why["cut.json"].startswith("unreadable")
    assert "final_eval_loss" in why["no_loss.json"]
    assert why["null_name.json"] == "run_name is null"
    assert "epochs[0] is missing keys" in why["bad_epochs.json"]
    assert "epochs is str" in why["not_list.json"]
    assert all("\n" not in reason for reason in why.values())


def test_optional_keys_are_checked_only_when_present():
    rec = _record()
    del rec["cpu"], rec["steps_per_epoch"]
    assert records.record_problem(rec) is None  # an old record, before these keys existed
    rec["cpu"] = 3
    assert records.record_problem(rec) == "cpu is int, expected object"


def test_load_records_reads_a_local_directory_without_tensorflow(tmp_path):
    """A local directory is read with the standard library: no TensorFlow imported (seconds of
    start-up saved for recommend and plan on records here); temp files and non-JSON are
    ignored, a missing directory has no records. gs:// and other URLs: the test below."""
    for run_id in ("b", "a"):
        records.write_record(str(tmp_path), _record(run_id))
    (tmp_path / "records" / ".tmp-x.json").write_text("{")  # a write in progress
    (tmp_path / "records" / "notes.txt").write_text("not a record")
    (tmp_path / "records" / "cut.json").write_text('{"run_id": ')  # a record cut short
    script = ("import sys; from results.records.store import load_records; "
              f"loaded, problems = load_records({str(tmp_path)!r}); "
              "print(sorted(r['run_id'] for r in loaded), [p[0] for p in problems], "
              f"load_records({str(tmp_path / 'nothing')!r}), 'tensorflow' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["['a',", "'b']", "['cut.json']", "([],", "[])", "False"]
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "records").write_text("not a directory")
    with pytest.raises(ValueError, match="cannot list .*flat/records"):
        records.load_records(str(tmp_path / "flat"))


def test_records_and_report_round_trip_through_a_gfile_url():
    """Any tf.io.gfile URL works like gs:// (TensorFlow's in-memory ram:// file system, so no
    network): the record is written, listed, read and the whole report written back there."""
    import tensorflow as tf

    from results.report.build import build
    from tests.results import fake

    root = "ram://bucket/run1"
    for rec in fake.sweep():
        records.write_record(root, rec)
    loaded, problems = records.load_records(root)
    assert len(loaded) == len(fake.sweep()) and problems == []
    paths, problems, _ = build(root, target_accuracy=0.5)
    assert problems == [] and f"{root}/report.md" in paths and f"{root}/summary.csv" in paths
    with tf.io.gfile.GFile(f"{root}/report.md") as f:
        assert f.read().startswith("#")
    assert all(tf.io.gfile.exists(p) for p in paths)
