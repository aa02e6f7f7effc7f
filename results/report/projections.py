"""The report's scaling section: projected rows to other clusters (cost_model.predict for N
workers on a stated network, one host per worker) beside this machine's measured ones,
projection.csv and .png, and the profile-*.json of each fitted setting.
"""
from results.records.cells import SETTING_KEYS
from results.records.store import write_text_atomic
from results.report.tables import Section, csv_text, markdown_table
from strategies import kind

PROJECT_NS = (1, 2, 4, 8, 16, 32, 64)
COLUMNS = (*SETTING_KEYS, "strategy", "n", "kind", "step_time_s", "compute_s",
           "communication_s", "overhead_s", "examples_per_sec", "speedup", "efficiency", "note")
_KEY = len(SETTING_KEYS) + 3  # setting, strategy, N, kind
UNPHYSICAL = "above 100%: not physical, see the scaling model's notes on compute"


FASTER_N1 = ("the N=1 runs stepped faster than the profile's compute alone: see the "
             "one-worker check")


def _flag(row):
    """The row with its `note`: an efficiency above 100% is never shown bare (at N=1 it is
    no scaling at all, only the measured runs against the profile's one worker), and a
    projection held by a bound rather than its step says which."""
    above = row["efficiency"] > 1 + 1e-9
    bound = row.pop("bound", "")
    notes = ["" if not above else FASTER_N1 if row["n"] == 1 else UNPHYSICAL,
             f"held by {bound}" if bound else ""]
    row["note"] = "; ".join(n for n in notes if n)
    return row


def measured_cells(f):
    """{n: (step, probe, examples/s)} measured here: the strategy's N=1 runs (which the profile
    fitted: the projection to one worker is checked against them) and its N >= 2 runs (which
    it did not)."""
    return {**({1: f.measured_n1} if f.measured_n1 else {}), **f.measured}


def projection_rows(fits, net, ns=PROJECT_NS):
    """Projected rows (the cost model on the stated network) and this machine's measured ones
    (compute: the profile's; overhead: the rest of the step, 0 where the step hid part of its
    probe behind compute)."""
    rows = []
    for f in fits:
        one_device = f.batch / f.t_comp  # one device computing alone: every efficiency's base
        for n in ns:
            rows.append(_flag(dict(zip(COLUMNS[:_KEY], (*f.setting, f.strategy, n, "projected")),
                                   **f.project(n, net))))
        for n, (step, probe, rate) in measured_cells(f).items():
            probe = probe or 0.0
            compute = f.t_comp
            rows.append(_flag(dict(zip(COLUMNS[:_KEY], (*f.setting, f.strategy, n, "measured")),
                                   step_time_s=step, compute_s=compute, communication_s=probe,
                                   overhead_s=max(0.0, step - compute - probe), examples_per_sec=rate,
                                   speedup=rate / one_device,
                                   efficiency=rate / one_device / n)))
    return rows


def profiles(fits):
    """{file name: WorkloadProfile} of the fitted settings (one per setting)."""
    out = {}
    for f in fits:
        s = dict(zip(SETTING_KEYS, f.setting))
        name = "-".join(str(v) for v in (
            "profile", f.model.replace(":", "_").replace("/", "_"), f.train_examples,
            f"b{s['batch_size_per_replica']}", f"k{s['accumulation_steps'] or 1}", f.dtype))
        out[f"{name}.json"] = f.profile
    return out


def _ms(seconds):
    return f"{seconds * 1e3:.2f}"


def markdown(fits, rows, net):
    """The report's 'Scaling model' section."""
    parts = ["## Scaling model and projections", "",
             "One cost model (results/model/cost_model.py) on a workload profile measured here "
             "(profile-*.json beside this report). Per-worker step t = compute / speedup + "
             "overhead + communication: compute, the median one-core step of the 1-thread "
             "baseline and the 1-thread MWMS N=1 runs less their probe (every strategy alike); "
             "overhead, a strategy's N=1 step minus compute and its own probe; "
             "communication, ring all-reduce 2(N-1)/N·G/B + 2(N-1)·a within and across hosts "
             "(MWMS; a sparse gradient's rows all-gathered, (N-1)·(G_rows/B + a), beside the "
             "all-reduce of its dense rest) or push G and pull P with a ps link serving "
             "N/K workers, (G+P)/B·max(1, N/K) + 2a but no less than the profile's "
             "sync_floor_s, what this machine's software took for one push and pull (PSS), "
             "less the share a strategy's N=1 run hid behind compute (its overlap, never "
             "more than the compute). "
             f"Projected network: B = {net.bandwidth_gbps:g} Gbit/s per link, "
             f"a = {net.latency_us:g} µs per message (`--network_gbps`, `--network_latency_us`).", "",
             "Assumptions: each projected worker has its own host, synchronization overlaps "
             "compute only by the measured overlap and never by more than the compute, links are full duplex and uncontended, every worker is equally "
             "fast, the per-replica batch stays fixed, an all-reduce costs the stated network's "
             "transfer and latency only, a PSS worker's push and pull at least what this "
             "machine's software took for one (its N=1 runs' probe: the two overlap, and the "
             "larger is paid; see the N=1 check below).", "",
             ]
    one = []
    for f in fits:
        if f.measured_n1:
            alone = f.project(1, net)
            step, probe, rate = f.measured_n1
            one.append([f.model, str(f.train_examples), f.strategy,
                        f"{alone['examples_per_sec']:.0f}" + (
                            f" (held by {alone['bound']})" if alone["bound"] else ""),
                        f"{rate:.0f}", f"{(alone['examples_per_sec'] / rate - 1) * 100:+.1f}%",
                        f"{_ms(alone['step_time_s'])} ({_ms(alone['communication_s'])})",
                        f"{_ms(step)} ({_ms(probe) if probe is not None else '–'})"])
    if one:
        # Where the two differ, the brackets say how much of it is synchronization: the
        # projection's exposed share of the stated network's (under PSS no less than the
        # profile's sync_floor_s), the runs' own probe
        parts += ["", "One worker projected on the stated network against the same strategy's "
                      "N=1 runs here (the runs the profile took its overhead and overlap from: "
                      "a check of the projection's arithmetic, not a validation). In brackets, "
                      "the synchronization of each: the projected step's not hidden behind its "
                      "compute (the stated network's transfer; under PSS at least this "
                      "machine's software cost of a push and pull), the runs' probe as timed "
                      "alone (an all-reduce at N=1 reduces nothing):", "",
                  markdown_table(["model", "examples", "strategy", "projected N=1 ex/s",
                                  "measured N=1 ex/s", "difference",
                                  "projected step ms (synchronization)",
                                  "measured step ms (probe)"], one)]
    parts += ["", "Notes:", ""] + [f"- {f.model}, {f.train_examples} examples, {f.strategy}: "
                                   f"{'; '.join(f.notes)}." for f in fits if f.notes]
    parts += [f"- {r['model']}, {r['train_examples']} examples, {r['strategy']} N={r['n']} "
              f"({r['kind']}): efficiency {r['efficiency'] * 100:.0f}% vs one device, "
              f"{r['note']}."
              for r in rows if r["note"]]
    projected = [[r["model"], str(r["train_examples"]), r["strategy"], str(r["n"]),
                  f"{r['examples_per_sec']:.0f}", f"{r['speedup']:.2f}",
                  f"{r['efficiency'] * 100:.0f}%" + (f" ({r['note']})" if r["note"] else ""),
                  f"{r['communication_s'] / r['step_time_s'] * 100:.0f}%"]
                 for r in rows if r["kind"] == "projected" and r["n"] >= 4]
    parts += ["", markdown_table(["model", "examples", "strategy", "N", "projected ex/s",
                                  "speedup vs one device", "efficiency", "comm share of step"],
                                 projected)]
    return "\n".join(parts)


def assumption_line(net):
    """The projections' assumptions in one line (the appendix gives the model)."""
    return (f"Projected: one worker per host on {net.bandwidth_gbps:g} Gbit/s links, "
            f"{net.latency_us:g} µs per message (`--network_gbps`, `--network_latency_us`), "
            f"compute and overlap as measured here, every worker equally fast; the model and "
            f"its checks are in the appendix.")


def compact(rows):
    """Per strategy its projected examples/s and efficiency at each N >= 2: the answer's
    projection table."""
    projected = [r for r in rows if r["kind"] == "projected" and r["n"] >= 2]
    ns = sorted({r["n"] for r in projected})
    by = {(r["strategy"], r["n"]): r for r in projected}
    cells = [[kind(strategy).short] + [f"{by[strategy, n]['examples_per_sec']:,.0f} "
                           f"({by[strategy, n]['efficiency'] * 100:.0f}%)"
                           if (strategy, n) in by else "–" for n in ns]
             for strategy in sorted({r["strategy"] for r in projected})]
    return markdown_table(["projected ex/s (efficiency)", *(f"N={n}" for n in ns)], cells) \
        if cells else ""


def section(fits, net, path):
    """The scaling model's part of the report: its projection plot and CSV; None unfitted."""
    if not fits:
        return None
    from results.report import plots  # matplotlib, only when there is something to draw

    projected = projection_rows(fits, net)
    files = [write_text_atomic(path("projection.csv"), csv_text(projected, COLUMNS))]
    files += [write_text_atomic(path(name), profile.to_json())
              for name, profile in profiles(fits).items()]
    return Section(markdown(fits, projected, net),
                   plots=[plots.projection(projected, path("projection.png"))], files=files)
