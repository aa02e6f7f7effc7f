"""The host checks of a results directory (`host_check.json`, written by `experiments.compare`
before and after its runs: experiments/measure/host_cores.py) and the report's section on them:
whether K processes at once got K cores' work while the comparison ran.

    python -m experiments.bench.host_check --seconds=60     # one check by hand, printed
"""
import json
import os

from results.records import read_text, write_json_atomic
from results.tables import Section

FILE = "host_check.json"
LOW = 0.75  # a window's capacity below this lost more than a quarter of the cores


def load(results_dir):
    """The directory's checks, oldest first ([] when it has none); ValueError when the file
    is not a list of checks."""
    path = os.path.join(results_dir, FILE)
    try:
        checks = json.loads(read_text(path))["checks"]
    except FileNotFoundError:
        return []
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path} is not a host check file ({e!r})") from e
    if not isinstance(checks, list):
        raise ValueError(f"{path}: 'checks' is not a list")
    return checks


def append(results_dir, check):
    """Adds one check (a dict with `when` and `phase`) to the directory's file, atomically: a
    resumed comparison keeps the checks of the runs before it."""
    return write_json_atomic(os.path.join(results_dir, FILE),
                             {"checks": [*load(results_dir), check]})


def line(check):
    """One line of a check: what K processes at once got, and how often it was low."""
    cap, k = check["capacity"], check["processes"]
    text = (f"{k} busy processes at once got {cap['median']:.2f} of {k} cores' work (median of "
            f"{len(check['windows'])} windows of {check['window_s']:g} s; lowest "
            f"{cap['min']:.2f})")
    if check["low_share"]:
        text += (f"; below {LOW:g} in {check['low_share']:.1%} of windows (longest "
                 f"{check['longest_low_s']:g} s)")
    return text


def section(results_dir):
    """The report's "## The host's cores" section, placed before the tables when a check saw
    cores taken away (the tables' N-worker rows are read in its light); None without checks."""
    try:
        checks = load(results_dir)
    except ValueError as e:
        return Section(f"## The host's cores\n\nNot read: {e}.")
    if not checks:
        return None
    lowest = min(c["capacity"]["min"] for c in checks)
    text = ["## The host's cores", "",
            "Before and after its runs the comparison ran one busy process per core (float32 "
            "matrix products, one thread each: `experiments/measure/host_cores.py`) and counted "
            "their work in short windows against one such process alone. A local cluster's "
            "workers are such processes: where the host gives K of them less than K cores' "
            "work, runs that keep several cores busy at once (local clusters, PSS's ps and chief "
            "beside even one worker, one process on every core) can fall while one-core runs "
            "(the 1-thread baseline and floor, MWMS and mirrored at N=1) do not.", ""]
    text += [f"- {c['phase']} ({c['when']}): {line(c)}." for c in checks]
    text.append("")
    warned = any(c["low_share"] for c in checks)
    if warned:
        text.append(f"**The host took cores away around this comparison**: K processes at once "
                    f"got as little as {lowest:.2f} of K cores' work in a window. Rows that kept "
                    f"several cores busy, measured in such an episode, may be slow by that much "
                    f"(which rows were, the checks cannot tell), and no calibration measured at "
                    f"another moment (the sharing rows, the scaling model's predictions) "
                    f"accounts for it; rerun them, or use a machine whose cores are its own "
                    f"(docs/benchmarks.md, \"The host's cores under load\").")
    else:
        text.append(f"No window below {LOW:g} of the cores: the checks saw the host give every "
                    f"core. They sample their own seconds only; an episode between them is not "
                    f"seen.")
    return Section("\n".join(text), first=warned)
