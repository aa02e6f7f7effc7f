"""host_check.json and the report's section on it."""
from results import host_check


def _check(low_share, lowest):
    return {"processes": 2, "window_s": 0.25, "seconds": 1.0, "alone_per_second": 3000.0,
            "capacity": {"median": 0.99, "min": lowest, "p10": lowest},
            "low_share": low_share, "longest_low_s": 0.5 if low_share else 0,
            "windows": [0.99, lowest, 0.99, 1.0]}


def test_checks_accumulate_in_order(tmp_path):
    assert host_check.load(tmp_path) == [] and host_check.section(tmp_path) is None
    host_check.append(str(tmp_path), {**_check(0, 0.97), "phase": "before the runs", "when": "a"})
    host_check.append(str(tmp_path), {**_check(0, 0.96), "phase": "after the runs", "when": "b"})
    assert [c["phase"] for c in host_check.load(tmp_path)] == ["before the runs",
                                                               "after the runs"]
    section = host_check.section(tmp_path)
    assert not section.first and "No window below 0.75" in section.markdown
    assert "- after the runs (b): 2 busy processes at once got 0.99 of 2 cores' work" in \
        section.markdown


def test_cores_taken_away_are_said_before_the_tables(tmp_path):
    host_check.append(str(tmp_path), {**_check(0, 0.98), "phase": "before the runs", "when": "a"})
    host_check.append(str(tmp_path), {**_check(0.25, 0.52), "phase": "after the runs", "when": "b"})
    section = host_check.section(tmp_path)
    assert section.first
    assert "The host took cores away around this comparison" in section.markdown
    assert "as little as 0.52" in section.markdown
    assert "below 0.75 in 25.0% of windows (longest 0.5 s)" in section.markdown


def test_a_malformed_file_is_said_not_read(tmp_path):
    (tmp_path / host_check.FILE).write_text('{"checks": 3}')
    section = host_check.section(tmp_path)
    assert "Not read" in section.markdown and "'checks' is not a list" in section.markdown
    (tmp_path / host_check.FILE).write_text("{not json")
    assert "is not a host check file" in host_check.section(tmp_path).markdown


def test_validate_local_lists_the_host_checks_after_its_table(tmp_path):
    from tests.helpers import run_module

    host_check.append(str(tmp_path), {**_check(0.25, 0.52), "phase": "after the runs",
                                      "when": "2026-11-29 12:00:00 UTC"})
    proc = run_module("experiments.bench.validate_local", f"--results_dir={tmp_path}",
                      timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert ("host check after the runs (2026-11-29 12:00:00 UTC): 2 busy processes at once got "
            "0.99 of 2 cores' work") in proc.stdout


def test_a_comparisons_check_is_said_even_when_its_file_cannot_keep_it(tmp_path, capsys):
    from experiments.comparison import runner

    (tmp_path / host_check.FILE).write_text("{not json")
    runner.check_host(str(tmp_path), 0.5, "before the runs")
    out = capsys.readouterr().out
    assert "compare: host check before the runs: " in out
    assert "compare: the host check before the runs is not kept" in out
    assert (tmp_path / host_check.FILE).read_text() == "{not json"  # left as it was
