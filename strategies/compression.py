"""Gradient compression's forms (--compression) and the bytes each makes a replica send, without
TensorFlow: validation reads the forms before TF starts, the engine
(experiments/engine/compressed_sync.py) runs them, and the cost model counts their bytes.
"""
import dataclasses
import math

METHODS = ("int8", "topk", "powersgd", "bf16")  # bf16: the cast of --gradient_sync_dtype


@dataclasses.dataclass(frozen=True)
class Spec:
    method: str  # "none" or one of METHODS
    ratio: float = 0.0  # topk
    rank: int = 0  # powersgd

    @property
    def reduces(self):
        """Whether a Reducer exchanges the gradients (bf16 is a cast before the usual sync)."""
        return self.method in ("int8", "topk", "powersgd")


def parse(text):
    """--compression's value as a Spec; ValueError (one line: the value and the valid forms)."""
    forms = "none, bf16, int8, topk:RATIO (0 < RATIO <= 1) or powersgd:RANK (RANK >= 1)"
    name, _, arg = (text or "none").partition(":")
    try:
        if name in ("none", "bf16", "int8") and not arg:
            return Spec(name)
        if name == "topk" and 0 < float(arg) <= 1:
            return Spec(name, ratio=float(arg))
        if name == "powersgd" and int(arg) >= 1:
            return Spec(name, rank=int(arg))
    except ValueError:
        pass
    raise ValueError(f"--compression={text!r} is not valid; choose one of: {forms}")


def as_matrix(shape):
    """(rows, cols) a tensor of `shape` is compressed as by PowerSGD, or None for a vector: the
    last axis (a Dense kernel's or a conv kernel's outputs; TF kernels are HWIO) against all
    the others, so a 3x3 conv is (9 x inputs, outputs), not 3 rows that no rank reduces."""
    if len(shape) < 2:
        return None
    return int(math.prod(shape[:-1])), int(shape[-1])


def exchange(spec):
    """How the replicas exchange the compressed form: "gather" (each receives every other's:
    int8, topk) or "reduce" (all-reduced like a plain gradient: powersgd's factors, a cast)."""
    return "gather" if spec.method in ("int8", "topk") else "reduce"


def payload_bytes(spec, shapes, itemsize=4):
    """Bytes of one replica's compressed dense gradients of `shapes` (itemsize: the gradients'
    bytes per value): what it hands its exchange per step."""
    sizes = [math.prod(s) for s in shapes]
    if spec.method == "int8":  # values packed in int32 lanes (padded to 4) + float32 scales
        return 4 * math.ceil(sum(sizes) / 4) + 4 * len(sizes)
    if spec.method == "topk":  # (value, int32 index) pairs
        return sum((itemsize + 4) * top_k(spec.ratio, size) for size in sizes)
    if spec.method == "powersgd":  # two rank-r factors per matrix, vectors as they are
        floats = 0
        for s, size in zip(shapes, sizes):
            m = as_matrix(s)
            floats += size if m is None else min(spec.rank, *m) * (m[0] + m[1])
        return itemsize * floats
    return (2 if spec.method == "bf16" else itemsize) * sum(sizes)


def sent_per_replica(payload, n, how):
    """Bytes one replica sends per step by ring algorithms: an all-gather passes on every other
    replica's payload ((N-1) x), an all-reduce 2(N-1)/N of it."""
    return (n - 1) * payload if how == "gather" else 2 * (n - 1) / n * payload


def sent_bytes(spec, shapes, num_replicas, itemsize=4):
    """Bytes one replica sends per step for dense gradients of `shapes`: the compressed exchange,
    and what a plain all-reduce in the gradients' dtype would send."""
    plain = sent_per_replica(itemsize * sum(math.prod(s) for s in shapes), num_replicas,
                             "reduce")
    sent = sent_per_replica(payload_bytes(spec, shapes, itemsize), num_replicas, exchange(spec))
    return {"sent_bytes_per_step": float(sent), "plain_bytes_per_step": float(plain),
            "payload_bytes": float(payload_bytes(spec, shapes, itemsize)),
            "exchange": exchange(spec)}


def top_k(ratio, size):
    """How many of a gradient's `size` values topk:RATIO sends: at least one, at most all."""
    return max(1, min(size, math.ceil(ratio * size)))
