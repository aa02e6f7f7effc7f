"""The host check: its figures from window counts, and a real check of one core."""
import pytest

from experiments.measure import host_cores


def test_capacity_is_the_processes_work_over_that_many_alone():
    # two processes, one alone rate of 100/s; the middle two windows each ran at half speed
    check = host_cores.summarize([[100, 100], [100]], [[100, 50, 50, 100], [100, 50, 40, 100]],
                                 0.25)
    assert check["windows"] == [1.0, 0.5, 0.45, 1.0]
    assert check["capacity"]["min"] == pytest.approx(0.45)
    assert check["capacity"]["median"] == pytest.approx(0.75)
    assert check["low_share"] == 0.5 and check["longest_low_s"] == 0.5
    assert check["processes"] == 2 and check["seconds"] == 1.0


def test_a_check_without_low_windows_says_none():
    check = host_cores.summarize([[200]], [[200, 190], [210, 200]], 0.5)
    assert check["low_share"] == 0 and check["longest_low_s"] == 0
    assert check["capacity"]["min"] == pytest.approx(0.975)


def test_a_real_check_on_one_core():
    import os

    core = min(os.sched_getaffinity(0))
    check = host_cores.measure(seconds=0.6, window_s=0.2, cores=[core])
    assert check["processes"] == 1 and len(check["windows"]) == 3
    assert check["alone_per_second"] > 0
    # one process on the same core as the alone run: its work is of the same order (the
    # suite's other tests may share the core, so no tighter bound holds here)
    assert all(0 < c < 3 for c in check["windows"])
