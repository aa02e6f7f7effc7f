"""The order a pipeline stage runs its micro-batches' forwards and backwards in
(--pipeline_schedule; experiments/engine/gpipe.py builds the step in it, results/model/cost_model.py
counts what it holds). Pure Python.

    schedule("1f1b", num_stages=2, microbatches=4)[0]
    -> [F0, F1, B0, F2, B1, F3, B2, B3] (as (FORWARD, m) / (BACKWARD, m) pairs)
"""
from models import PIPELINE_SCHEDULES as SCHEDULES

FORWARD, BACKWARD = "F", "B"


def schedule(name, num_stages, microbatches):
    """Each stage's blocks in the order it runs them: [[(FORWARD or BACKWARD, micro-batch)]].

    gpipe: every forward, then every backward from the last micro-batch: a stage holds all M
    micro-batches' activations until its backwards start.
    1f1b (PipeDream-Flush; Narayanan et al. 2021): stage s runs S - s - 1 forwards, then
    alternates one forward and one backward, then the remaining backwards: it holds at most
    S - s micro-batches' activations, and the bubble is GPipe's."""
    S, M = num_stages, microbatches
    if name == "gpipe":
        return [[(FORWARD, m) for m in range(M)] + [(BACKWARD, m) for m in reversed(range(M))]
                for _ in range(S)]
    if name == "1f1b":
        out = []
        for s in range(S):
            warm = min(S - s - 1, M)
            order = [(FORWARD, m) for m in range(warm)]
            for i in range(M - warm):
                order += [(FORWARD, warm + i), (BACKWARD, i)]
            out.append(order + [(BACKWARD, m) for m in range(M - warm, M)])
        return out
    raise ValueError(f"unknown pipeline schedule {name!r}; valid: {', '.join(SCHEDULES)}")


def in_flight(order):
    """The most micro-batches whose activations one stage's `order` holds at once (forwarded,
    not yet backwarded)."""
    held = peak = 0
    for kind, _ in order:
        held += 1 if kind == FORWARD else -1
        peak = max(peak, held)
    return peak
