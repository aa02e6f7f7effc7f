import pytest

from results.records import metrics


def _epochs(times):
    return [{"epoch": i + 1, "time_s": t, "examples_per_sec": 1000.0 / t, "eval_accuracy": 0.1 * (i + 1)}
            for i, t in enumerate(times)]


def test_definitions_hand_worked():
    # T1 = 10 s, T2 = 6 s on 2 workers: speedup 10/6, scaling 10/(2*6)*100 = 83.33 %.
    assert metrics.speedup(10.0, 6.0) == pytest.approx(1.6667, rel=1e-4)
    assert metrics.scaling_percent(10.0, 6.0, 2) == pytest.approx(83.333, rel=1e-4)
    assert metrics.efficiency(10.0, 6.0, 2) == pytest.approx(0.83333, rel=1e-4)
    # Slower than one device: scaling below 50 % on 2 workers.
    assert metrics.scaling_percent(10.0, 12.0, 2) == pytest.approx(41.667, rel=1e-4)


def test_steady_state_excludes_first_epoch():
    s = metrics.steady_state(_epochs([9.0, 2.0, 4.0, 3.0]))
    assert s["epoch_time_s"] == {"median": 3.0, "min": 2.0, "max": 4.0, "n": 3}
    assert s["epochs_used"] == [2, 3, 4] and not s["includes_first_epoch"]
    single = metrics.steady_state(_epochs([9.0]))
    assert single["includes_first_epoch"] and single["epoch_time_s"]["median"] == 9.0


def test_spread_drops_none_and_handles_empty():
    assert metrics.spread([None, 1.0, 3.0])["median"] == 2.0
    assert metrics.spread([])["n"] == 0


def test_time_to_accuracy():
    epochs = _epochs([5.0, 2.0, 3.0])  # accuracies 0.1, 0.2, 0.3
    assert metrics.time_to_accuracy(epochs, 0.2) == 7.0
    assert metrics.time_to_accuracy(epochs, 0.9) is None
