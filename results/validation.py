"""The scaling model's out-of-sample errors on this machine's runs, per repeat and pooled, from a
comparison's records: the arithmetic of issue 28's local validation (docs/benchmarks.md), run by

    python -m experiments.bench.validate_local --results_dir=/tmp/v20

Per repeat r: only that repeat's records (its baseline, N=1 runs, sharing calibrations and
collectives sweeps) predict its own N >= 2 runs. Pooled: every repeat's inputs and the report's
one estimator of "measured" (results/workload_profile.measured_cell). The report's prediction
against each repeat: the pooled prediction (what `experiments.report` prints for a comparison
of R repeats without adaptive runs: every repeat's fit inputs, none of the N >= 2 runs) against
each repeat's own measurement of the cell. A prediction whose synchronization came from the
predicted runs' own probe (no sweep at that N) is marked in-sample and counts as no validation.

The measured figure of one cell moves between repeats too; the last column gives the error a
prediction equal to the cell's median of them would make per repeat (median / measured - 1:
+12% is a run 11% below the median), and the last line how many per-repeat figures fall within
the target that way: a reference for the cells' own spread, not a ceiling (a per-repeat fit
moves with its repeat and can do better).
"""
import collections

from results import metrics, scaling_model
from results.cells import repeat_of
from results.tables import PREDICTION_TARGET


def errors(records):
    """{(model, examples, strategy, n, setting): (predicted, measured, error, source)} of the
    records' fits (the setting keeps two sizes or batches of one model apart)."""
    out = {}
    for f in scaling_model.fit(records):
        for n, (predicted, measured, error) in f.predictions.items():
            out[f.model, f.train_examples, f.strategy, n, f.setting] = (
                predicted, measured, error, f.sync.get(n, (0.0, "probe"))[1])
    return out


def _mark(error, source, target):
    """'+3.1%', with ' (in-sample)' and ' **' (outside the target) where they apply."""
    return (f"{error * 100:+.1f}%" + ("" if source == "sweep" else " (in-sample)")
            + ("" if abs(error) <= target else " **"))


def against_repeats(pooled, per):
    """{key: [(error, source) or None per repeat]}: the pooled prediction of each cell against
    each repeat's own measurement of it (per: one errors() dict per repeat, in order)."""
    return {key: [((p[0] - e[1]) / e[1], p[3]) if (e := errors_k.get(key)) else None
                  for errors_k in per] for key, p in pooled.items()}


def count(errors_by_key, target=PREDICTION_TARGET):
    """(within the target, out-of-sample counted) over {key: [(error, source) or None]}."""
    found = [e for row in errors_by_key.values() for e in row if e and e[1] == "sweep"]
    return sum(abs(e[0]) <= target for e in found), len(found)


def table(records, target=PREDICTION_TARGET):
    """Markdown rows: one per (model, strategy, N), each repeat's error, the pooled one and the
    report's (pooled) prediction against each repeat."""
    by_repeat = collections.defaultdict(list)
    for r in records:
        by_repeat[repeat_of(r)].append(r)
    repeats = sorted(k for k in by_repeat if k)
    per = {k: errors(by_repeat[k]) for k in repeats}
    pooled = errors(records)
    own = {key: [(per[k][key][2], per[k][key][3]) if key in per[k] else None for k in repeats]
           for key in pooled}
    report = against_repeats(pooled, [per[k] for k in repeats])
    lines = [f"| model | examples | strategy | N | {' | '.join(repeats)} | pooled: predicted vs "
             f"measured ex/s, error | the report's prediction against each repeat | a "
             f"prediction equal to the cell's median: its error per repeat |",
             "|---" * (7 + len(repeats)) + "|"]
    oracle = timed = 0
    for key in sorted(pooled, key=lambda k: k[:4]):
        measured = [per[k][key][1] for k in repeats if key in per[k]]
        median = metrics.median(measured)
        off = [median / m - 1 for m in measured]
        oracle, timed = oracle + sum(abs(e) <= target for e in off), timed + len(off)
        p = pooled[key]
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | "
                     + " | ".join(_mark(*e, target) if e else "-" for e in own[key])
                     + f" | {p[0]:.0f} vs {p[1]:.0f}, {_mark(p[2], p[3], target)} | "
                     + " / ".join(_mark(*e, target) if e else "-" for e in report[key]) + " | "
                     + " / ".join(f"{e * 100:+.1f}%" for e in off) + " |")
    bound = f"±{target * 100:g}%"
    lines.append("")
    lines.append("{} of {} out-of-sample per-repeat predictions within {} (** marks the "
                 "others)".format(*count(own, target), bound))
    lines.append("{} of {} of the report's predictions (every repeat's inputs) against each "
                 "repeat's measurement within {}".format(*count(report, target), bound))
    lines.append(f"a prediction equal to each cell's median measurement: {oracle} of {timed} "
                 f"within {bound} (the measurements' own spread)")
    return "\n".join(lines)
