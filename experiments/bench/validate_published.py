"""Benchmark (not a test): the cost model against published multi-node results. Each case of
the cases file is a published result turned into a workload profile and a cluster spec by the
rules in docs/benchmarks.md (fixed before predicting); this prints the predicted scaling
efficiency beside the published one.

    python -m experiments.bench.validate_published
    python -m experiments.bench.validate_published --cases=docs/examples/published/cases.json
"""
import json
import sys

from absl import app, flags

from experiments.config.cli import parse_flags
from results.model import cost_model, specs

_CASES = flags.DEFINE_string("cases", "docs/examples/published/cases.json",
                             "Published results as {cases: [{name, strategy, published, "
                             "profile, cluster}]}.")
_TARGET = flags.DEFINE_float("target", 10.0, "The bound on |predicted - published| in points.")


def predictions(cases):
    """[(case, cost_model.Prediction)] of every case."""
    out = []
    for case in cases:
        profile = specs.WorkloadProfile(**case["profile"])
        cluster = specs.ClusterSpec(**case["cluster"]).check()
        out.append((case, cost_model.predict(profile, cluster, case["strategy"])))
    return out


def table(cases):
    lines = ["| case | GPUs | published efficiency | predicted | points | communication "
             "share |", "|---|---|---|---|---|---|"]
    within = 0
    for case, p in predictions(cases):
        published = case["published"]["efficiency"] * 100
        delta = p.efficiency * 100 - published
        within += abs(delta) <= _TARGET.value
        lines.append(f"| {case['name']} | {p.workers} | {published:.1f}% | "
                     f"{p.efficiency * 100:.1f}% | {delta:+.1f}"
                     + ("" if abs(delta) <= _TARGET.value else " **") +
                     f" | {p.communication_share:.0%} |")
    lines += ["", f"{within} of {len(cases)} within ±{_TARGET.value:g} points (** marks the "
                  f"others)"]
    return "\n".join(lines)


def main(argv):
    del argv
    try:
        with open(_CASES.value) as f:
            cases = json.load(f)["cases"]
    except (OSError, ValueError, KeyError) as e:
        sys.stderr.write(f"error: --cases={_CASES.value}: {e}\n")
        sys.exit(2)
    print(table(cases))


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)
