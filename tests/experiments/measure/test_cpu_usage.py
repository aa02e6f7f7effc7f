"""CPU seconds by task between two readings of a local cluster's processes."""
import os
import time

import pytest

from experiments.measure import cpu_usage


def test_by_task_counts_process_by_process_so_a_restart_is_never_negative():
    before = {10: ("chief:0", 5.0), 11: ("worker:0", 40.0), 12: ("worker:1", 41.0)}
    # worker:1 was restarted in between: a new process (pid 13) with 2 s of its own
    after = {10: ("chief:0", 5.5), 11: ("worker:0", 43.0), 13: ("worker:1", 2.0)}
    assert cpu_usage.by_task(after, before) == {
        "chief:0": pytest.approx(0.5), "worker:0": pytest.approx(3.0), "worker:1": 2.0}


def test_a_single_process_reads_itself_as_one_task(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    meter = cpu_usage.CpuMeter(in_cluster=False)
    reading = meter.reading()
    assert list(reading) == [os.getpid()] and reading[os.getpid()][0] == "process"
    start = time.process_time()
    while time.process_time() - start < 0.05:  # burn a little CPU (ticks are 10 ms)
        pass
    spent = cpu_usage.by_task(meter.reading(), reading)
    assert set(spent) == {"process"} and spent["process"] > 0
    assert meter.scope == cpu_usage.ALL_TASKS


def test_this_process_reads_itself_below_a_clock_tick(monkeypatch):
    # a 17 ms steady epoch read in 10 ms ticks could come out at 0 CPU seconds (no `cpu`
    # in the record); the process's own clock resolves a 3 ms burn
    monkeypatch.delenv("TF_CONFIG", raising=False)
    meter = cpu_usage.CpuMeter(in_cluster=False)
    spent = []
    for _ in range(5):
        before = meter.seconds()
        start = time.process_time()
        while time.process_time() - start < 0.003:
            pass
        spent.append(meter.seconds() - before)
    assert all(0.003 <= s < 0.05 for s in spent), spent


def test_a_lost_tasks_seconds_until_it_died_count_for_its_task():
    # worker:1 (pid 12) had 41 s at the epoch's start, died at 44 s and was reaped by the
    # launcher (its 44 s joined the reaped children's), then restarted as pid 13 with 2 s.
    before = {10: ("chief:0", 5.0), 12: ("worker:1", 41.0), cpu_usage.EXITED: ("exited", 0.5)}
    after = {10: ("chief:0", 5.5), 13: ("worker:1", 2.0), cpu_usage.EXITED: ("exited", 44.5)}
    assert cpu_usage.by_task(after, before) == {
        "chief:0": pytest.approx(0.5), "worker:1": pytest.approx(3.0 + 2.0)}
    # nothing ended: the reaped children's seconds are nobody's epoch
    same = {10: ("chief:0", 6.0), cpu_usage.EXITED: ("exited", 0.5)}
    assert cpu_usage.by_task(same, {10: ("chief:0", 5.0), cpu_usage.EXITED: ("exited", 0.5)}) \
        == {"chief:0": pytest.approx(1.0)}


def test_the_launcher_tree_reads_its_reaped_childrens_seconds(monkeypatch):
    import subprocess
    import sys

    # this test process plays the launcher: a child task burns CPU, ends and is reaped
    monkeypatch.setenv(cpu_usage.LAUNCH_T0_ENV, "1")
    monkeypatch.setattr(os, "getppid", os.getpid)
    meter = cpu_usage.CpuMeter(in_cluster=True)
    before = meter.reading()
    subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\n"
                    "while time.process_time() - t < 0.3: pass"], check=True)
    after = meter.reading()
    assert after[cpu_usage.EXITED][1] - before[cpu_usage.EXITED][1] >= 0.25
