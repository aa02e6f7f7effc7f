"""Findings flag what the numbers cannot explain and state only what they show."""
from results.report.findings import findings
from results.report.summary import summarize
from tests.results import fake


def _cpu(cores):
    return {"seconds": 1.0, "wall_s": 1.0, "cores_used": cores, "examples_per_cpu_second": 1.0,
            "scope": "all tasks"}


def _base():
    return [fake.record("b", run_name="baseline/cnn/1024/r0"),
            fake.record("ref", epoch_time=0.3, threads=2,
                        run_name="hardware_reference/cnn/1024/r0")]


def _lines(records):
    return findings(summarize(records)).splitlines()


def _about(lines, what):
    return [line for line in lines if what in line]


def test_superlinear_from_extra_cores_is_flagged_and_fastest_carries_it():
    # 2 workers at 0.4 s vs the 1 s baseline: 125% scaling, burning 3.5 cores
    lines = _lines(_base() + [fake.record("w", "multi_worker_mirrored", 2, 0.4, cpu=_cpu(3.5))])
    (flag,) = _about(lines, "multi_worker_mirrored N=2: superlinear")
    assert "scaling 125%" in flag and "burns 3.5 cores against N = 2" in flag
    (head,) = _about(lines, "fastest strategy run")
    assert "multi_worker_mirrored with N=2" in head and "FLAGGED superlinear" in head


def test_superlinear_from_a_handicapped_baseline():
    # the plain TF loop at 1 thread runs at 0.5 s/epoch: the 1 s baseline is handicapped
    lines = _lines(_base() + [
        fake.record("f", "engine_floor", epoch_time=0.5, run_name="engine_floor/cnn/1024/r0"),
        fake.record("w", "multi_worker_mirrored", 2, 0.45, cpu=_cpu(2.0))])
    (flag,) = _about(lines, "multi_worker_mirrored N=2: superlinear")
    assert "handicapped baseline: the baseline runs at 50% of engine_floor" in flag
    assert "burns" not in flag


def test_superlinear_without_a_cause_says_rerun():
    lines = _lines(_base() + [fake.record("w", "multi_worker_mirrored", 2, 0.4)])
    (flag,) = _about(lines, "multi_worker_mirrored N=2: superlinear")
    assert flag.endswith("likely cause: unexplained: rerun.")


def test_faster_than_the_fastest_single_process_is_flagged():
    # PSS N=4 at 0.2 s beats the all-cores process (0.3 s): impossible without more cores
    lines = _lines(_base() + [fake.record("p", "parameter_server", 4, 0.2)])
    (flag,) = _about(lines, "parameter_server N=4: superlinear")
    assert "1.50x the fastest single process (one_device (all cores))" in flag
    assert _about(lines, "1 multi-process setup(s) beat it (flagged below)")
    assert flag.endswith("beating the fastest single process: unexplained: rerun.")
    # with a cpu record: 6 cores burnt against the reference's 2 threads
    lines = _lines(_base() + [fake.record("p", "parameter_server", 4, 0.2, cpu=_cpu(6.0))])
    (flag,) = _about(lines, "parameter_server N=4: superlinear")
    assert "it burns 6.0 cores against the fastest single process's 2" in flag


def test_a_margin_within_the_epochs_spread_is_neither_a_win_nor_a_flag():
    """MWMS N=4 at 0.29 s an epoch against the all-cores process's 0.3 s (86% scaling over the
    1 s baseline: no scaling flag), its epochs 10% either way: faster on the median only, so it
    neither beats the reference (no flag) nor is the fastest setup alone (PSS N=4 at 0.31 s is
    tied with it); at 1% either way the same margin beats the reference and is flagged."""
    def lines(spread):
        return _lines(_base() + [
            fake.record("w", "multi_worker_mirrored", 4, 0.29, spread=spread),
            fake.record("p", "parameter_server", 4, 0.31, spread=spread)])
    wide = lines(0.10)
    (ref,) = _about(wide, "The fastest single process")
    assert ref.endswith("no multi-process setup beats it beyond the epochs' spread; "
                        "multi_worker_mirrored N=4 faster on the median only, within the spread.")
    assert not _about(wide, "superlinear")
    (head,) = _about(wide, "fastest strategy run")
    assert "multi_worker_mirrored with N=4" in head
    assert "tied with parameter_server N=4 within the epochs' spread" in head
    narrow = lines(0.01)
    assert _about(narrow, "1 multi-process setup(s) beat it (flagged below).")
    assert _about(narrow, "multi_worker_mirrored N=4: superlinear")
    assert not _about(narrow, "tied with")


def test_slower_setups_get_the_measured_numbers_not_a_cause():
    pss1 = fake.record("p1", "parameter_server", 1, 1.25)
    pss1["communication_fraction"] = 0.12
    lines = _lines(_base() + [pss1, fake.record("p2", "parameter_server", 2, 1.1)])
    (one,) = _about(lines, "parameter_server N=1 is")
    assert one == ("  - parameter_server N=1 is slower than one device (0.80x the 1-thread "
                   "baseline); N=1: one worker, no compute is split; measured synchronization "
                   "share of a step: 12%.")
    (two,) = _about(lines, "parameter_server N=2 is")
    assert "synchronization not measured" in two
    text = "\n".join(lines)
    assert "only adds communication" not in text and "costs more than" not in text
    assert not _about(lines, "parameter_server N=1: superlinear")
    # the all-cores process is over 100% of the 1-thread baseline with more cores: another
    # budget, not a scaling claim, so not flagged
    assert not _about(lines, "one_device (all cores): superlinear")


def test_superlinear_only_beyond_the_measured_spread():
    """101% scaling from epochs that move by 5% is noise; 110% from the same spread is not."""
    noisy = fake.record("w", "multi_worker_mirrored", 2, 1 / 2.02, spread=0.05)
    assert not _about(_lines(_base() + [noisy]), "superlinear (")
    beyond = fake.record("w", "multi_worker_mirrored", 2, 1 / 2.2, spread=0.05)
    (flag,) = _about(_lines(_base() + [beyond]), "multi_worker_mirrored N=2: superlinear")
    assert "scaling 110%" in flag and "beyond the epochs' spread" in flag
