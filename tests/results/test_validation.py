"""results/validation.py (the arithmetic of experiments.bench.validate_local): the report's
prediction of a cell (every repeat's fit inputs) is held against each repeat's own measurement
of it, and only sweep-based (out of sample) predictions count."""
import pytest

from results.validation import against_repeats, count, scaled_by_one_worker

CELL = ("mlp", 6144, "multi_worker_mirrored", 2, "s")
PS_CELL = ("mlp", 6144, "parameter_server", 3, "s")


def test_the_pooled_prediction_is_held_against_each_repeats_measurement_not_its_own_fit():
    # each repeat's own fit predicted 1000, 1400, 1000; the pooled fit predicts 1100
    per = [{CELL: (1000.0, 1000.0, 0.0, "sweep")},
           {CELL: (1400.0, 900.0, 0.556, "sweep")},
           {CELL: (1000.0, 1200.0, -0.167, "sweep")}]
    pooled = {CELL: (1100.0, 1000.0, 0.1, "sweep")}
    got = against_repeats(pooled, per)[CELL]
    assert [e[0] for e in got] == pytest.approx([0.1, 1100 / 900 - 1, 1100 / 1200 - 1])
    assert count(against_repeats(pooled, per), target=0.15) == (2, 3)  # +22.2% is out
    assert count(against_repeats(pooled, per), target=0.25) == (3, 3)


def test_a_repeat_without_the_cell_and_in_sample_predictions_are_not_counted():
    per = [{CELL: (1.0, 1000.0, 0.0, "sweep"), PS_CELL: (1.0, 500.0, 0.0, "probe")}, {}]
    pooled = {CELL: (1100.0, 1000.0, 0.1, "sweep"), PS_CELL: (900.0, 500.0, 0.8, "probe")}
    got = against_repeats(pooled, per)
    assert got[CELL][1] is None and got[PS_CELL][1] is None
    assert count(got, target=0.15) == (1, 1)  # the probe-based +80% is in-sample: not counted


def test_a_cell_whose_runs_move_apart_from_their_one_worker_runs_caps_a_proportional_fit():
    # N-worker rate over the repeat's own 1-worker rate: v34's mlp PSS N=4 (1.26, 1.30, 0.93)
    # moves by 1.39x, more than 1.15 / 0.85 = 1.35x: no one number puts all three within 15%
    assert scaled_by_one_worker([1.257, 1.300, 0.932], 0.15) == 2
    assert scaled_by_one_worker([1.257, 1.300, 0.932], 0.20) == 3
    # within 1.35x of each other: one number serves every repeat (the spans [0.85, 1.15],
    # [1.02, 1.38] and [1.1475, 1.5525] meet at 1.1475-1.15)
    assert scaled_by_one_worker([1.0, 1.2, 1.35], 0.15) == 3
    assert scaled_by_one_worker([1.0, 1.4], 0.15) == 1
    assert scaled_by_one_worker([], 0.15) == 0
