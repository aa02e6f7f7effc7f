"""Benchmark (not a test): does the host give this machine's cores to busy processes at once?
One pinned process per usable core multiplies float32 matrices for --seconds; each short
window's work is compared with one such process alone (experiments/measure/host_cores.py).

    python -m experiments.bench.host_check --seconds=60
    python -m experiments.bench.host_check --seconds=600 --timeline

Run it before trusting N-worker figures measured on a VM: windows well below 1 say the host gave
the processes at once fewer cores' work than the VM shows, at times (why, the check cannot
tell). The comparison runs a short check before and after its runs; its report lists them.
"""
import signal
import sys

from absl import app, flags

from experiments.config.cli import bad_input, parse_flags
from experiments.measure import host_cores
from results import host_check

_SECONDS = flags.DEFINE_float("seconds", 30.0, "How long every core is kept busy at once.",
                              lower_bound=0.5)
_WINDOW = flags.DEFINE_float("window_s", host_cores.WINDOW_S, "Window the work is counted in "
                             "(seconds).", lower_bound=0.05, upper_bound=1.0)
_TIMELINE = flags.DEFINE_bool("timeline", False, "Also print the capacity of each second (of "
                              "the windows in it) as a character: '#' below 0.6, '+' below "
                              f"{host_check.LOW:g}, '.' below 0.9, ' ' above.")


def _mark(capacity):
    return "#" if capacity < 0.6 else "+" if capacity < host_check.LOW else \
        "." if capacity < 0.9 else " "


def main(argv):
    del argv
    # a kill exits through measure's cleanup, which stops the busy children
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        check = host_cores.measure(_SECONDS.value, _WINDOW.value)
    except ValueError as e:  # one usable core
        bad_input(e)
    print(f"host check: {host_check.line(check)}; one process alone: "
          f"{check['alone_per_second']:.0f} products/s")
    if _TIMELINE.value:
        seconds = {}
        for i, capacity in enumerate(check["windows"]):
            seconds.setdefault(int(i * _WINDOW.value), []).append(capacity)
        marks = "".join(_mark(sum(c) / len(c)) for _, c in sorted(seconds.items()))
        for i in range(0, len(marks), 100):
            print(f"{i:5d} s |{marks[i:i + 100]}|")


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)
