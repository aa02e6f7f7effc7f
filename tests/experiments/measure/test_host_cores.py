"""The host check: its figures from window counts, and a real check of this machine's cores."""
import os

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


def test_one_core_is_refused_and_an_idle_alone_run_is_an_error():
    with pytest.raises(ValueError, match="needs 2 or more usable cores"):
        host_cores.measure(1.0, cores=[0])
    with pytest.raises(RuntimeError, match="no product"):
        host_cores.summarize([[0, 0]], [[10], [10]], 0.25)


def test_a_real_check_of_two_cores():
    cores = sorted(os.sched_getaffinity(0))[:2]
    if len(cores) < 2:
        pytest.skip("one usable core")
    check = host_cores.measure(seconds=0.6, window_s=0.2, cores=cores)
    assert check["processes"] == 2 and len(check["windows"]) == 3
    assert check["alone_per_second"] > 0
    # every window did work once the children started together (the suite's other tests may
    # share the cores, so no tighter bound holds here)
    assert all(0 < c < 3 for c in check["windows"])
