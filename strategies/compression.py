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
    """(rows, cols) a tensor of `shape` is compressed as by PowerSGD, or None for a vector."""
    if len(shape) < 2:
        return None
    return int(shape[0]), int(math.prod(shape[1:]))


def sent_bytes(spec, shapes, num_replicas, itemsize=4):
    """Bytes one replica sends per step for dense gradients of `shapes` (ring algorithms): the
    compressed exchange, and what a plain all-reduce in the gradients' dtype would send."""
    n = num_replicas
    sizes = [math.prod(s) for s in shapes]
    plain = 2 * (n - 1) / n * itemsize * sum(sizes)
    if spec.method == "int8":  # values packed in int32 lanes (padded to 4) + float32 scales
        sent = (n - 1) * (4 * math.ceil(sum(sizes) / 4) + 4 * len(sizes))
    elif spec.method == "topk":  # (value, int32 index) pairs
        sent = (n - 1) * sum((itemsize + 4) * top_k(spec.ratio, size) for size in sizes)
    elif spec.method == "powersgd":
        floats = 0
        for s, size in zip(shapes, sizes):
            m = as_matrix(s)
            floats += size if m is None else min(spec.rank, *m) * (m[0] + m[1])
        sent = 2 * (n - 1) / n * itemsize * floats
    elif spec.method == "bf16":
        sent = plain / itemsize * 2
    else:
        sent = plain
    return {"sent_bytes_per_step": float(sent), "plain_bytes_per_step": float(plain)}


def top_k(ratio, size):
    """How many of a gradient's `size` values topk:RATIO sends: at least one, at most all."""
    return max(1, min(size, math.ceil(ratio * size)))
