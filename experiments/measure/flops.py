"""Achieved compute: the model's floating-point operations per example, counted from its graph,
against what this machine's cores do on a plain matmul (the record's `compute`), so a report can
tell slow kernels from slow communication.

    python -m experiments.run --strategy=one_device --model=cnn    # record["compute"]

Counted: the forward pass of one example, traced as a graph and summed by TensorFlow's profiler
(the ops with registered FLOP statistics: MatMul, Conv2D, element-wise arithmetic, ...; a gather
counts nothing). TensorFlow registers none for Einsum, which Keras's attention and EinsumDense
layers use: `_einsum_flops` below counts it, 2 x the product of every index's size (one multiply
and one add per term of the contraction). Training is taken as 3 x the forward pass
(backward: a gradient for the inputs and one for the weights, each about one forward), the
usual approximation (Kaplan et al. 2020, section 2.1). Peak: the median FLOP/s of a float32
square matmul (MATMUL_N) at this process's threads, after a warm-up: what the kernels this
machine runs reach on dense work, not a vendor's datasheet figure.
"""
import time

import tensorflow as tf

MATMUL_N = 1024
TRAIN_OVER_FORWARD = 3


def _einsum_flops(graph, node):
    from tensorflow.python.framework import graph_util, ops

    equation = node.attr["equation"].s.decode()
    terms = equation.split("->")[0].split(",")
    if "." in equation or len(terms) != len(node.input):
        return ops.OpStats("flops", 0)  # an ellipsis: the sizes of its dimensions are unnamed
    sizes = {}
    for term, name in zip(terms, node.input):
        shape = graph_util.tensor_shape_from_node_def_name(graph, name)
        shape.assert_is_fully_defined()
        sizes.update(zip(term, shape.as_list()))
    product = 1
    for size in sizes.values():
        product *= size
    return ops.OpStats("flops", 2 * product)


def _register_einsum():
    from tensorflow.python.framework import ops

    try:
        ops.RegisterStatistics("Einsum", "flops")(_einsum_flops)
    except KeyError:  # registered already (this module imported twice, or TensorFlow did)
        pass


def forward_flops_per_example(model):
    """FLOPs of one example's forward pass through `model` (at its input's shape and dtype), or
    None when it cannot be traced with a fixed shape (a subclassed model without inputs, a
    dimension known only at run time) or counts nothing."""
    inputs = getattr(model, "inputs", None)
    if not inputs or len(inputs) != 1 or None in tuple(inputs[0].shape)[1:]:
        return None
    spec = tf.TensorSpec([1, *tuple(inputs[0].shape)[1:]], inputs[0].dtype)
    _register_einsum()
    try:
        # no control flow of its own to convert (autograph cannot read a lambda's source where
        # two share a line, and says so on the console)
        forward = tf.function(lambda x: model(x, training=False), autograph=False)
        graph = forward.get_concrete_function(spec).graph
        options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
        options["output"] = "none"  # no report on stdout
        # the profiler's own shape lookups are TF1 APIs: their deprecation notice is TF's
        # business, not a line in the user's run
        from tensorflow.python.util import deprecation

        with deprecation.silence():
            profile = tf.compat.v1.profiler.profile(graph=graph, options=options)
    except Exception as e:  # noqa: BLE001 - a figure beside the run's, never worth its record
        print(f"compute probe: the model's FLOPs could not be counted ({type(e).__name__}: "
              f"{e}); the record's `compute` is null", flush=True)
        return None
    return int(profile.total_float_ops) or None


def matmul_peak(n=MATMUL_N, repeats=10):
    """FLOP/s of an n x n float32 matmul on this process's threads (median over `repeats` after
    a warm-up; each timed call waits for its result)."""
    a = tf.random.uniform([n, n], seed=1)
    b = tf.random.uniform([n, n], seed=2)
    matmul = tf.function(lambda x, y: tf.reduce_sum(tf.matmul(x, y)), autograph=False)
    for _ in range(2):
        matmul(a, b).numpy()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        matmul(a, b).numpy()
        times.append(time.perf_counter() - start)
    times.sort()
    return 2 * n ** 3 / times[len(times) // 2]


def summary(forward_flops, examples_per_sec, peak_per_process, processes):
    """The record's `compute`: FLOPs per example (forward, training), the training FLOP/s the run
    achieved at its steady throughput, and the peak: one process's matmul FLOP/s x the processes
    that train at once (on one machine never more than its cores allow; see cores_cap)."""
    if not forward_flops:
        return None
    train = TRAIN_OVER_FORWARD * forward_flops
    achieved = train * examples_per_sec if examples_per_sec else None
    peak = peak_per_process * processes if peak_per_process else None
    return {"forward_flops_per_example": forward_flops, "train_flops_per_example": train,
            "achieved_flops_per_sec": achieved, "matmul_peak_flops_per_sec": peak_per_process,
            "peak_processes": processes, "peak_flops_per_sec": peak,
            "share_of_peak": achieved / peak if achieved and peak else None}
