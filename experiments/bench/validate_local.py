"""Benchmark (not a test): the scaling model's out-of-sample errors on this machine's runs, per
repeat and pooled, from a comparison's records (docs/benchmarks.md, issue 28's validation).

    python -m experiments.compare --workers=1,2,3,4 --models=cnn,mlp,wide_mlp \
        --strategies=multi_worker_mirrored,parameter_server --repeats=3 --results_dir=/tmp/v1
    python -m experiments.bench.validate_local --results_dir=/tmp/v1

Per repeat r: only that repeat's records (its baseline, N=1 runs, sharing calibrations and
collectives sweeps) predict its own N >= 2 runs. Pooled: every repeat's inputs and the report's
one estimator of "measured" (results/workload_profile.measured_cell, as `experiments.report`
states it). A
prediction whose synchronization came from the predicted runs' own probe (no sweep at that N)
is marked in-sample and counts as no validation.

The measured figure of one cell moves between repeats too; the last column gives the error a
prediction equal to the cell's median of them would make per repeat (median / measured - 1:
+12% is a run 11% below the median), and the last line how many per-repeat figures an
oracle that knew each cell's median would put within the target: the most a per-repeat target
can expect of any model on this machine's day.
"""
import collections
import sys

from absl import app, flags

from experiments.config.cli import parse_flags
from results import metrics, scaling_model
from results.records import load_records
from results.tables import PREDICTION_TARGET

_DIR = flags.DEFINE_string("results_dir", "runs/compare", "A comparison's results directory.")
_TARGET = flags.DEFINE_float("target", PREDICTION_TARGET, "The error bound to count against.")


def repeat_of(record):
    """'r0', 'r1', ... from the comparison cell's run name (None outside a comparison)."""
    tail = (record.get("run_name") or "").rsplit("/", 1)[-1]
    return tail if tail.startswith("r") and tail[1:].isdigit() else None


def errors(records):
    """{(model, examples, strategy, n, setting): (predicted, measured, error, source)} of the
    records' fits (the setting keeps two sizes or batches of one model apart)."""
    out = {}
    for f in scaling_model.fit(records):
        for n, (predicted, measured, error) in f.predictions.items():
            out[f.model, f.train_examples, f.strategy, n, f.setting] = (
                predicted, measured, error, f.sync.get(n, (0.0, "probe"))[1])
    return out


def table(records):
    """Markdown rows: one per (model, strategy, N), each repeat's error and the pooled one."""
    by_repeat = collections.defaultdict(list)
    for r in records:
        by_repeat[repeat_of(r)].append(r)
    repeats = sorted(k for k in by_repeat if k)
    per = {k: errors(by_repeat[k]) for k in repeats}
    pooled = errors(records)
    lines = [f"| model | examples | strategy | N | {' | '.join(repeats)} | pooled: predicted vs "
             f"measured ex/s, error | a prediction equal to the cell's median: its error per repeat |",
             "|---" * (6 + len(repeats)) + "|"]
    counted = within = oracle = timed = 0
    for key in sorted(pooled, key=lambda k: k[:4]):
        measured = [per[k][key][1] for k in repeats if key in per[k]]
        median = metrics.median(measured)
        off = [median / m - 1 for m in measured]
        oracle, timed = oracle + sum(abs(e) <= _TARGET.value for e in off), timed + len(off)
        cells = []
        for k in repeats:
            e = per[k].get(key)
            if e is None:
                cells.append("-")
                continue
            out = e[3] == "sweep" and abs(e[2]) <= _TARGET.value
            counted, within = counted + (e[3] == "sweep"), within + out
            cells.append(f"{e[2] * 100:+.1f}%" + ("" if e[3] == "sweep" else " (in-sample)")
                         + ("" if abs(e[2]) <= _TARGET.value else " **"))
        p = pooled[key]
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {' | '.join(cells)} | "
                     f"{p[0]:.0f} vs "
                     f"{p[1]:.0f}, {p[2] * 100:+.1f}%" + ("" if p[3] == "sweep" else
                                                           " (in-sample)") + " | "
                     + " / ".join(f"{e * 100:+.1f}%" for e in off) + " |")
    lines.append("")
    lines.append(f"{within} of {counted} out-of-sample per-repeat predictions within "
                 f"±{_TARGET.value * 100:g}% (** marks the others)")
    lines.append(f"a prediction equal to each cell's median measurement: {oracle} of {timed} "
                 f"within ±{_TARGET.value * 100:g}% (the measurements' own spread)")
    return "\n".join(lines)


def main(argv):
    del argv
    records, problems = load_records(_DIR.value)
    for p in problems:
        print(f"skipped: {p}", file=sys.stderr)
    print(table(records))


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)
