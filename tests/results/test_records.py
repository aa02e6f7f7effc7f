import json
import os

import pytest

from results import records


def _record(run_id="r1"):
    rec = {k: None for k in records.REQUIRED_KEYS}
    rec.update(run_id=run_id, epochs=[], strategy="one_device", timestamp="2026-01-01T00:00:00")
    return rec


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
