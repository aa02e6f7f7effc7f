"""Splitting a Keras model into S consecutive pipeline stages (model parallelism).

    stages = split(model, num_stages=2, cost="params")
    h = x
    for stage in stages:          # each stage a keras.Model sharing the original's layers
        h = stage.model(h, training=True)

A stage boundary must be a *cut*: a point in the model's topological order where exactly one
tensor flows from the layers before it to the layers after it (between two Sequential layers; in
a ResNet between residual blocks, never inside one, where the shortcut also crosses). The
segments between consecutive cuts are grouped into S stages so that the most expensive stage is
as cheap as possible (a linear partition). Cost is one of:

    params  the segment's parameter count: deterministic, balances memory per device (the reason
            to split a model that does not fit)
    time    the segment's measured forward + backward time on one micro-batch (backward from
            an output gradient, as in the pipeline; median of 5 calls of 10 after a warm-up):
            balances compute, what the GPipe bubble formula assumes

Each stage is `keras.Model(cut_in, cut_out)` over the original layers, so the stages share the
original model's variables: training the stages trains the model, and evaluation, checkpoints
and the weights checksum use the original unchanged.

Works for functional and Sequential models; a subclassed model has no graph to cut (StageError).
"""
import dataclasses
import statistics
import time

import keras
import numpy as np
import tensorflow as tf

from models import STAGE_COSTS as COSTS


class StageError(ValueError):
    """The model cannot be split as asked (one line, for the user)."""


@dataclasses.dataclass
class Stage:
    model: keras.Model  # cut_in -> cut_out, sharing the original model's layers
    layers: list  # names of the layers it runs, in order
    parameters: int  # parameter count (every weight, trainable or not)
    parameter_bytes: int
    output_shape: tuple  # the tensor it hands to the next stage, without the batch dimension
    output_bytes_per_example: int | None  # None: a dimension known only at run time
    activation_bytes_per_example: int | None  # every layer output it computes: held until
    # backward; None as above
    cost: float  # what the split balanced (parameters or seconds)


def _functional(model):
    if isinstance(model, keras.Sequential):
        model = getattr(model, "_functional", None)
    if model is None or not hasattr(model, "_nodes_by_depth"):
        raise StageError(f"model {getattr(model, 'name', model)!r} cannot be split into pipeline "
                         f"stages: it is subclassed (no layer graph); build it with the "
                         f"functional API or keras.Sequential")
    return model


def _nodes(model):
    """The model's layer calls (not its inputs) in a topological order."""
    order = []
    for depth in sorted(model._nodes_by_depth, reverse=True):
        for node in model._nodes_by_depth[depth]:
            if not isinstance(node.operation, keras.layers.InputLayer):
                order.append(node)
    return order


def _segments(model):
    """Runs of nodes between consecutive cuts, with the tensor entering each run."""
    nodes = _nodes(model)
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise StageError(f"model {model.name!r} has {len(model.inputs)} inputs and "
                         f"{len(model.outputs)} outputs; pipeline stages need one of each")
    consumers = {}  # id(tensor) -> index of the last node reading it
    for i, node in enumerate(nodes):
        for t in node.input_tensors:
            consumers[id(t)] = i
    for t in model.outputs:
        consumers[id(t)] = len(nodes)
    live = {id(model.inputs[0]): model.inputs[0]}
    segments, start, entering = [], 0, model.inputs[0]
    for i, node in enumerate(nodes):
        for t in node.output_tensors:
            live[id(t)] = t
        live = {k: t for k, t in live.items() if consumers.get(k, -1) > i}
        if len(live) == 1 and i < len(nodes) - 1:
            (crossing,) = live.values()
            segments.append((nodes[start:i + 1], entering, crossing))
            start, entering = i + 1, crossing
    segments.append((nodes[start:], entering, model.outputs[0]))
    return segments


def _weights(nodes):
    seen, out = set(), []
    for node in nodes:
        for w in node.operation.weights:
            if id(w) not in seen:
                seen.add(id(w))
                out.append(w)
    return out


def _size(shape):
    return int(np.prod([d for d in shape if d is not None] or [1]))


def _bytes_per_example(tensors):
    """Bytes of `tensors` per example (the batch dimension left out); None when a dimension is
    only known at run time (a variable-length sequence)."""
    total = 0
    for t in tensors:
        if any(d is None for d in t.shape[1:]):
            return None
        total += _size(t.shape[1:]) * tf.as_dtype(t.dtype).size
    return total


_REPEATS_PER_CALL = 10


def _segment_seconds(sub, x, wrap):
    """Median seconds of one forward + backward of `sub` on the micro-batch `x` as a pipeline
    runs it (the backward from a given output gradient, not from a sum whose constant gradient
    the graph optimizer may simplify), and its output, the next segment's input. Each timed call
    runs it _REPEATS_PER_CALL times: one call per run charged every small segment (an
    activation, a flatten) a whole call's dispatch, and the split balanced dispatch instead of
    compute."""
    floating = x.dtype.is_floating
    # training=False throughout: timing must not move BatchNormalization's moving statistics
    # (nor, under MWMS, all-reduce them); the cost is the same layers' but for those updates.
    y = sub(x, training=False)
    dy = tf.random.stateless_normal(tf.shape(y), seed=[1, 2], dtype=y.dtype)

    def fwd_bwd(x, dy):
        kept = tf.constant(0.0, y.dtype)
        for _ in tf.range(_REPEATS_PER_CALL):
            with tf.GradientTape() as tape:
                if floating:
                    tape.watch(x)
                out = sub(x, training=False)
            sources = ([x] if floating else []) + sub.trainable_variables
            grads = [g for g in tape.gradient(out, sources, output_gradients=dy)
                     if g is not None]
            # One element of each result keeps all of it alive (no sum over it all).
            for t in [out] + grads:
                t = t.values if isinstance(t, tf.IndexedSlices) else t
                kept += tf.cast(tf.reshape(t, [-1])[0], y.dtype)
        return kept

    fwd_bwd = wrap(fwd_bwd)
    for _ in range(2):  # tracing and first-run allocation are not the segment's cost
        fwd_bwd(x, dy)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        float(fwd_bwd(x, dy))
        times.append((time.perf_counter() - start) / _REPEATS_PER_CALL)
    return statistics.median(times), y


def _partition(costs, parts):
    """Cut `costs` (a sequence) into `parts` contiguous groups minimizing the largest group sum;
    returns the groups' start indices. Exact dynamic programme: sequences are short."""
    n = len(costs)
    prefix = np.concatenate([[0.0], np.cumsum(costs)])
    best = {(0, 0): (0.0, ())}
    for k in range(1, parts + 1):
        for end in range(k, n - (parts - k) + 1):
            options = []
            for start in range(k - 1, end):
                if (k - 1, start) in best:
                    worst, starts = best[(k - 1, start)]
                    options.append((max(worst, prefix[end] - prefix[start]), starts + (start,)))
            best[(k, end)] = min(options)
    return list(best[(parts, n)][1])


def split(model, num_stages, cost="params", sample=None, wrap=tf.function, agree=None):
    """The model's S = num_stages stages (list of Stage). sample: one micro-batch of real
    features, needed for cost="time" (each segment is timed on what the one before it gives).
    wrap(fn): the callable that runs a timed forward + backward fn(x) (under a distribution
    strategy: in its replica context); agree(costs): the costs every process of a cluster uses
    (e.g. their mean), so that all of them split the model alike."""
    if cost not in COSTS:
        raise StageError(f"stage cost {cost!r} is not valid; choose one of: {', '.join(COSTS)}")
    graph = _functional(model)
    segments = _segments(graph)
    if num_stages > len(segments):
        raise StageError(f"--num_stages={num_stages}: model {model.name!r} can be cut in "
                         f"{len(segments) - 1} place(s) only (where one tensor crosses from the "
                         f"layers before to the layers after), so at most {len(segments)} "
                         f"stage(s)")
    subs = [keras.Model(entering, leaving) for _, entering, leaving in segments]
    if cost == "params":
        costs = [float(sum(_size(w.shape) for w in _weights(nodes))) for nodes, _, _ in segments]
    else:
        if sample is None:
            raise StageError("stage cost 'time' needs a sample micro-batch to time")
        costs, x = [], tf.convert_to_tensor(sample)
        for sub in subs:
            seconds, x = _segment_seconds(sub, x, wrap)
            costs.append(seconds)
        if agree is not None:
            costs = [float(c) for c in agree(costs)]
    starts = _partition(costs, num_stages) + [len(segments)]
    stages = []
    for a, b in zip(starts[:-1], starts[1:]):
        nodes = [n for seg in segments[a:b] for n in seg[0]]
        entering, leaving = segments[a][1], segments[b - 1][2]
        weights = _weights(nodes)
        stages.append(Stage(
            model=subs[a] if b == a + 1 else keras.Model(entering, leaving),
            layers=[n.operation.name for n in nodes],
            parameters=sum(_size(w.shape) for w in weights),
            parameter_bytes=sum(_size(w.shape) * tf.as_dtype(w.dtype).size for w in weights),
            output_shape=tuple(leaving.shape[1:]),
            output_bytes_per_example=_bytes_per_example([leaving]),
            activation_bytes_per_example=_bytes_per_example(
                [t for n in nodes for t in n.output_tensors]),
            cost=float(sum(costs[a:b]))))
    return stages
