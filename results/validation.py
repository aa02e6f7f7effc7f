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
+12% is a run 11% below the median), and the line after the counts how many per-repeat figures
fall within the target that way: a reference for the cells' own spread, not a ceiling (a
per-repeat fit moves with its repeat and can do better). The line after it is the reference for
a per-repeat fit: where a cell's N-worker runs move otherwise than the repeat's own 1-worker run
of the strategy (their ratio moving by more than (1 + t) / (1 - t) between repeats), no
prediction that is that run's rate times one number per cell meets the target in every repeat,
whatever the number (scaled_by_one_worker, the number chosen after seeing the runs).
"""
import collections

from results import metrics, scaling_model
from results.cells import repeat_of
from results.tables import PREDICTION_TARGET


def errors(records):
    """{(model, examples, strategy, n, setting): (predicted, measured, error, source, the
    strategy's own N=1 rate)} of the records' fits (the setting keeps two sizes or batches of
    one model apart)."""
    out = {}
    for f in scaling_model.fit(records):
        for n, (predicted, measured, error) in f.predictions.items():
            out[f.model, f.train_examples, f.strategy, n, f.setting] = (
                predicted, measured, error, f.sync.get(n, (0.0, "probe"))[1],
                f.measured_n1[2] if f.measured_n1 else None)
    return out


def scaled_by_one_worker(ratios, target=PREDICTION_TARGET):
    """How many of a cell's repeats a prediction of c x the repeat's own 1-worker rate puts
    within the target, c one number for the cell chosen after the fact (the best c). ratios:
    each repeat's N-worker rate over its 1-worker rate. Repeat r is within for c in
    [ratio_r (1 - t), ratio_r (1 + t)]; the best c lies at one of those intervals' ends."""
    spans = [(q * (1 - target), q * (1 + target)) for q in ratios]
    return max((sum(lo <= c <= hi for lo, hi in spans) for c, _ in spans), default=0)


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
    oracle = timed = scaled = scaled_timed = 0
    for key in sorted(pooled, key=lambda k: k[:4]):
        measured = [per[k][key][1] for k in repeats if key in per[k]]
        median = metrics.median(measured)
        off = [median / m - 1 for m in measured]
        oracle, timed = oracle + sum(abs(e) <= target for e in off), timed + len(off)
        ratios = [per[k][key][1] / per[k][key][4] for k in repeats
                  if key in per[k] and per[k][key][4]]
        scaled += scaled_by_one_worker(ratios, target)
        scaled_timed += len(ratios)
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
    lines.append(f"a prediction equal to each repeat's own 1-worker rate times one number per "
                 f"cell, the best number chosen after the fact: {scaled} of {scaled_timed} "
                 f"within {bound} (the most a prediction proportional to that run can reach)")
    return "\n".join(lines)
