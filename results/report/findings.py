"""The report's findings: plain statements that follow from the summary rows, and nothing the
numbers cannot show. A result that should be impossible (scaling above 100%, or a multi-process
setup faster than the fastest single process) is flagged "superlinear" with the likely cause the
data points to, never reported as a plain win.
"""
from results.records.cells import (BASELINE_RUN, ENGINE_FLOOR, is_machine_limit, label,
                                   setting_title, single_process)
from results.report.summary import (baseline_of, beyond_spread, epoch_per_example, groups,
                                    reference_of, seconds_per_example, tied)
from strategies import BASELINE, COMPARED

_SLACK = 1.05  # measurements on a shared machine move by a few percent


def _baseline_name(group):
    """'the 1-thread baseline' (compare's --threads_per_worker sets the baseline's threads)."""
    base = next((r for r in group if r["role"] == BASELINE_RUN), None)
    threads = base["threads_per_task"] if base else None
    return f"the {threads}-thread baseline" if threads else "the baseline"


def superlinear(row, group):
    """Why this row is not believable as measured (a phrase), or None. Only beyond the measured
    spread: the row's slowest steady epoch must still beat the comparison's fastest, so a row
    at 101% whose epochs move by 5% is noise, not a finding. A single process with more cores
    than the baseline (the all-cores reference) is another budget, not scaling: not flagged."""
    over = []
    base = baseline_of(group)
    more_cores = row["n"] == 1 and base is not None and \
        (row["threads_per_task"] or 0) > (base["threads_per_task"] or 0)
    if row["scaling_percent"] is not None and row["scaling_percent"] > 100 and not more_cores:
        low = epoch_per_example(base, "min") if base else None
        high = epoch_per_example(row, "max")
        if low and high and low / (row["n"] * high) > 1:
            over.append(f"scaling {row['scaling_percent']:.0f}% of N x {_baseline_name(group)}"
                        f", beyond the epochs' spread")
    ref = reference_of(group)
    if row["speedup_vs_reference"] is not None and row["speedup_vs_reference"] > 1 + 1e-9 \
            and ref is not None and beyond_spread(row, ref):
        over.append(f"{row['speedup_vs_reference']:.2f}x the fastest single process "
                    f"({row['reference_row']})")
    return " and ".join(over) or None


def _cores_cause(row, compare_to, what):
    """More cores burnt than `compare_to` (N, or the reference's cores), from the cpu record;
    without one, from the threads each task was given."""
    if row["cores_used"] is not None:
        if row["cores_used"] > compare_to * _SLACK:
            return f"it burns {row['cores_used']:.1f} cores against {what} {compare_to:.3g}"
        return None
    if row["threads_per_task"] and row["n"] == 1 and row["threads_per_task"] > compare_to:
        return (f"its one process has {row['threads_per_task']} threads against {what} "
                f"{compare_to:g} (no cpu measurement in the record)")
    return None


def _handicapped_baseline(group):
    """The baseline runs slower than another single process at its own thread count (the plain
    TF loop or any other): then T1 is too slow and every scaling % above it is inflated."""
    base = next((r for r in group if r["role"] == BASELINE_RUN and seconds_per_example(r)), None)
    if not base:
        return None
    peers = [r for r in group if r is not base and single_process(r["strategy"], r["n"])
             and r["threads_per_task"] == base["threads_per_task"] and seconds_per_example(r)]
    fastest = min(peers, key=seconds_per_example, default=None)
    if fastest and seconds_per_example(base) > seconds_per_example(fastest) * _SLACK:
        share = seconds_per_example(fastest) / seconds_per_example(base)
        return (f"handicapped baseline: the baseline runs at {share * 100:.0f}% of "
                f"{label(fastest)} at the same {base['threads_per_task']} thread(s)")
    return None


def cause_of(row, group):
    """The likely cause of a superlinear row, from the data, or 'unexplained: rerun'; each
    impossible figure gets its own."""
    parts = []
    if row["scaling_percent"] is not None and row["scaling_percent"] > 100:
        causes = [c for c in (_cores_cause(row, row["n"], "N ="), _handicapped_baseline(group))
                  if c]
        parts.append("; ".join(causes) or "unexplained: rerun")
    if row["speedup_vs_reference"] is not None and row["speedup_vs_reference"] > 1 + 1e-9:
        ref = reference_of(group)
        # the reference used at most its threads' worth of cores when it has no cpu record
        ref_cores = ref and (ref["cores_used"] or ref["threads_per_task"])
        cause = _cores_cause(row, ref_cores, "the fastest single process's") \
            if ref_cores and row["cores_used"] is not None else None
        parts.append(("beating the fastest single process: " if parts else "")
                     + (cause or "unexplained: rerun"))
    return "; ".join(parts)


def _flags(group):
    # The machine's-limit row is a reference (K independent loops), not a setup to believe.
    return {id(r): f"superlinear ({why}); likely cause: {cause_of(r, group)}"
            for r in group if not is_machine_limit(r) and (why := superlinear(r, group))}


def _machine_limit(group, strat):
    """How far each multi-process setup is from N plain TF loops at once on these cores."""
    out = []
    for limit in (r for r in group if is_machine_limit(r) and r["examples_per_sec"]):
        peers = [r for r in strat if r["n"] == limit["n"] and not single_process(
            r["strategy"], r["n"]) and r["examples_per_sec"]]
        shares = ", ".join(f"{r['strategy']} N={r['n']} "
                           f"{r['examples_per_sec'] / limit['examples_per_sec'] * 100:.0f}%"
                           for r in peers)
        out.append(f"  - The machine's limit for {limit['n']} workers, {limit['n']} plain TF "
                   f"loops at once, is {limit['examples_per_sec']:.0f} examples/s"
                   + (f"; of it: {shares}." if shares else "."))
    return out


def _fastest(group, strat, flags):
    best = max(strat, key=lambda r: r["examples_per_sec"])
    ties = [label(r) for r in tied(best, strat)]
    text = (f"fastest strategy run is {best['strategy']} with N={best['n']} "
            f"({best['examples_per_sec']:.0f} examples/s"
            + (f", {best['speedup']:.2f}x {_baseline_name(group)}" if best["speedup"] else "")
            + ")" + (f", tied with {', '.join(ties)} within the epochs' spread" if ties else ""))
    if id(best) in flags:
        text += f", FLAGGED {flags[id(best)]}"
    return text + "."


def _against_reference(group, strat):
    ref = reference_of(group)
    if not ref:
        return []
    faster = [r for r in strat if not single_process(r["strategy"], r["n"])
              and (r["speedup_vs_reference"] or 0) > 1 + 1e-9]
    # beyond the epochs' spread, as superlinear() flags them; the rest only on the median
    beat = [r for r in faster if beyond_spread(r, ref)]
    close = [label(r) for r in faster if not beyond_spread(r, ref)]
    said = f"{len(beat)} multi-process setup(s) beat it (flagged below)" if beat else \
        "no multi-process setup beats it"
    if close:
        said += ("; " if beat else " beyond the epochs' spread; ") + \
            f"{', '.join(close)} faster on the median only, within the spread"
    return [f"  - The fastest single process is {label(ref)} at {ref['examples_per_sec']:.0f} "
            f"examples/s; {said}."]


def _slower_than_one_device(group, strat):
    """The strategy rows slower than the baseline beyond the epochs' spread (a row at 0.98x
    whose epochs overlap the baseline's is not slower, it is the same)."""
    out = []
    base = baseline_of(group)
    for r in strat:
        if r["speedup"] is None or r["speedup"] >= 1 or base is None or \
                not beyond_spread(base, r):
            continue
        split = "; N=1: one worker, no compute is split" if r["n"] == 1 else ""
        sync = (f"measured synchronization share of a step: "
                f"{r['communication_fraction'] * 100:.0f}%"
                if r["communication_fraction"] is not None else "synchronization not measured")
        out.append(f"  - {r['strategy']} N={r['n']} is slower than one device "
                   f"({r['speedup']:.2f}x {_baseline_name(group)}){split}; {sync}.")
    return out


def _adding_workers(strat):
    out = []
    for strategy in COMPARED:
        pts = sorted((r for r in strat if r["strategy"] == strategy), key=lambda r: r["n"])
        for a, b in zip(pts, pts[1:]):
            if b["examples_per_sec"] <= a["examples_per_sec"] * _SLACK:
                out.append(f"  - {strategy}: going from N={a['n']} to N={b['n']} changes "
                           f"throughput by "
                           f"{(b['examples_per_sec'] / a['examples_per_sec'] - 1) * 100:+.0f}%.")
    return out


def _accuracy(strat):
    worst = min((r for r in strat if r["accuracy_delta"] is not None),
                key=lambda r: r["accuracy_delta"], default=None)
    if worst is None or worst["accuracy_delta"] >= 0:
        return []
    return [f"  - Accuracy: the largest drop vs the baseline is "
            f"{worst['accuracy_delta'] * 100:+.1f} points ({worst['strategy']} N={worst['n']}, "
            f"global batch {worst['global_batch_used']})."]


def overhead_sentence(group):
    """The toolkit's own cost against the plain TF loop, from the vs_engine_floor column."""
    base = next((r for r in group if r["role"] == BASELINE_RUN), None)
    ref = next((r for r in group if r["role"] == "hardware_reference"), None)
    x = base and base["vs_engine_floor"]
    y = ref and ref["vs_engine_floor"]
    if not x and not y:
        return None
    pct = lambda v: f"{v * 100:.0f}%" if v else "not measured"  # noqa: E731
    threads = base["threads_per_task"] if base else 1
    return (f"Toolkit overhead: one_device at {threads} thread{'s' * (threads != 1)} runs at "
            f"{pct(x)} of the plain TF loop; at all cores {pct(y)}.")


def findings(rows):
    """Markdown bullet lines, per setting."""
    out = []
    for setting, group in groups(rows).items():
        flags = _flags(group)
        strat = [r for r in group if r["role"] == "strategy" and r["epoch_time_s"]
                 and r["strategy"] not in (BASELINE, ENGINE_FLOOR)]
        lines = []
        if strat:
            lines += _against_reference(group, strat) + _slower_than_one_device(group, strat)
            lines += _machine_limit(group, strat) + _adding_workers(strat) + _accuracy(strat)
        lines += [f"  - {label(r)}: {flag}." for r in group if (flag := flags.get(id(r)))]
        if not strat and not lines:
            continue
        head = _fastest(group, strat, flags) if strat else "no distributed setup measured."
        out += [f"- **{setting_title(setting)}**: {head}", *lines]
    return "\n".join(out) or "- Not enough runs for findings (a baseline and a strategy needed)."
