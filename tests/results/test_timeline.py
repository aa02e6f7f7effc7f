"""Where a step's time goes, from the stamps inside every worker's step (results/timeline.py):
the breakdown, the straggler's name, the trace and the PNG."""
import json

import matplotlib.image as mpimg
import pytest

from results import timeline


def _lockstep(steps=20, slow="worker:1", late=0.012):
    """Two workers meeting every step: each computes 10 ms, `slow` 12 ms more in 3 steps of 4;
    the synchronization takes 2 ms after the last one's gradients are ready."""
    stamps = {"worker:0": [], "worker:1": []}
    t = 100.0
    for i in range(steps):
        ready = {}
        for w in stamps:
            ready[w] = t + 0.010 + (late if w == slow and i % 4 else 0.0)
        end = max(ready.values()) + 0.002
        for w in stamps:
            stamps[w].append([t, ready[w], end])
        t = end
    return stamps


def test_breakdown_under_lockstep_names_who_waits_and_who_is_last():
    parts = timeline.breakdown(_lockstep(), lockstep=True)
    slow, fast = parts["worker:1"], parts["worker:0"]
    assert slow["compute_s"] == pytest.approx(0.022) and fast["compute_s"] == pytest.approx(0.010)
    assert fast["wait_s"] == pytest.approx(0.012) and slow["wait_s"] == pytest.approx(0.0)
    assert slow["sync_s"] == pytest.approx(0.002) == fast["sync_s"]
    assert slow["last_share"] == pytest.approx(15 / 20) and slow["late_s"] == pytest.approx(0.012)
    assert timeline.straggler_line(parts, True) == "worker:1 last in 75% of steps, median 12.0 " \
                                                  "ms late"


def test_without_lockstep_the_straggler_is_the_slowest_step():
    stamps = {"worker:0": [[0, 0.01, 0.012]] * 5, "worker:1": [[0, 0.03, 0.036]] * 5,
              "worker:2": [[0, 0.01, 0.014]] * 5}
    parts = timeline.breakdown(stamps, lockstep=False)
    assert parts["worker:1"]["wait_s"] is None and parts["worker:1"]["step_s"] == 0.036
    assert timeline.straggler_line(parts, False) == ("worker:1 slowest: median step 36.0 ms, "
                                                     "2.77x the others' median (13.0 ms)")
    assert timeline.straggler_line({"worker:0": parts["worker:0"]}, False) is None


def test_trace_has_a_track_per_worker_and_every_phase(tmp_path):
    stamps = _lockstep(steps=4)
    trace = json.loads(timeline.trace_json(stamps, True, extra=[
        {"name": "evaluation", "worker": "worker:0", "start_s": 101.0, "end_s": 101.5}]))
    events = trace["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert names == {"worker:0", "worker:1"}
    phases = [e for e in events if e["ph"] == "X" and e["pid"] == 1]
    assert {e["name"] for e in phases} == {timeline.COMPUTE, timeline.WAIT, timeline.SYNC}
    first = [e for e in phases if e["args"].get("step") == 0]
    # step 0's compute, waiting and synchronization cover it from its start to its update
    assert sum(e["dur"] for e in first) == pytest.approx((stamps["worker:1"][0][2] - 100.0) * 1e6)
    assert any(e["name"] == "evaluation" and e["dur"] == pytest.approx(5e5) for e in events)


def test_plot_draws_a_row_per_worker(tmp_path):
    path = timeline.plot(_lockstep(steps=8), True, str(tmp_path / "t.png"), "two workers")
    assert mpimg.imread(path).shape[1] > 600


def test_section_reads_records_and_skips_runs_without_stamps(tmp_path):
    stamps = _lockstep(steps=8)
    parts = timeline.breakdown(stamps, True)
    record = {"strategy": "multi_worker_mirrored", "model": "cnn", "num_workers": 2,
              "num_replicas_in_sync": 2, "run_name": "multi_worker_mirrored-n2/cnn/512/r0",
              "config": {"model": "cnn"}, "straggler": None,
              "epochs": [{"epoch": 1}, {"epoch": 2, "timeline": {
                  "lockstep": True, "per_worker": parts,
                  "straggler": timeline.straggler_line(parts, True)}}],
              "timeline": {"stamps": stamps, "epoch": 2}}
    path = lambda name: str(tmp_path / name)  # noqa: E731
    section = timeline.section([record, dict(record, run_name="x/cnn/512/r1")], path)
    assert "worker:1 last in 75% of steps" in section.markdown
    assert section.markdown.count("| worker:1 |") == 1  # the first repeat only
    assert [p.rsplit("/", 1)[-1] for p in section.plots] == [
        "timeline-cnn-multi_worker_mirrored-n2.png"]
    assert json.load(open(section.files[0]))["traceEvents"]
    assert timeline.section([dict(record, epochs=[{"epoch": 1}])], path) is None
