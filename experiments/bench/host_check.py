"""Benchmark (not a test): does the host give this machine's cores to busy processes at once?
One pinned process per usable core multiplies float32 matrices for --seconds; each short
window's work is compared with one such process alone (experiments/measure/host_cores.py).

    python -m experiments.bench.host_check --seconds=60
    python -m experiments.bench.host_check --seconds=600 --window_s=0.25 --timeline

Run it before trusting N-worker figures measured on a VM: a capacity well below 1 in some
windows means the host ran the vCPUs on fewer cores than it shows, at times (the comparison
runs a short check before and after its runs and its report says what they saw).
"""
from absl import app, flags

from experiments.config.cli import parse_flags
from experiments.measure import host_cores
from results import host_check

_SECONDS = flags.DEFINE_float("seconds", 30.0, "How long every core is kept busy at once.",
                              lower_bound=0.5)
_WINDOW = flags.DEFINE_float("window_s", 0.25, "Window the work is counted in (seconds).",
                             lower_bound=0.05)
_TIMELINE = flags.DEFINE_bool("timeline", False, "Also print each second's capacity as a "
                              "character: '#' below 0.6, '+' below 0.75, '.' below 0.9.")


def main(argv):
    del argv
    check = host_cores.measure(_SECONDS.value, _WINDOW.value)
    print(f"host check: {host_check.line(check)}; one process alone: "
          f"{check['alone_per_second']:.0f} products/s")
    if _TIMELINE.value:
        per_second = max(1, round(1 / _WINDOW.value))
        windows = check["windows"]
        seconds = [sum(windows[i:i + per_second]) / len(windows[i:i + per_second])
                   for i in range(0, len(windows), per_second)]
        marks = "".join("#" if c < 0.6 else "+" if c < host_check.LOW else "." if c < 0.9
                        else " " for c in seconds)
        for i in range(0, len(marks), 100):
            print(f"{i:5d} s |{marks[i:i + 100]}|")


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)
