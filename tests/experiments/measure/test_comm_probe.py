import types

import pytest

from experiments.measure import comm_probe


def test_a_probe_call_of_k_synchronizations_is_divided_by_k(monkeypatch):
    # The PSS probe schedules steps_per_execution pull+push rounds per call, as training does.
    # A fake clock: each call advances wall and CPU time by what it is given, so the figures are
    # exact whatever else the machine runs.
    clock = types.SimpleNamespace(wall=0.0, cpu=0.0)
    monkeypatch.setattr(comm_probe, "time", types.SimpleNamespace(
        perf_counter=lambda: clock.wall, process_time=lambda: clock.cpu))
    # the warm-up calls (tracing) are slow and must not count; then three timed calls
    lengths = iter([5.0] * comm_probe._WARMUP + [0.020, 0.048, 0.028])
    calls = []

    def call():
        calls.append(1)
        seconds = next(lengths)
        clock.wall += seconds
        clock.cpu += seconds / 2
    cpu = []
    spread = comm_probe.timed(call, repeats=3, per_call=4, cpu=cpu)
    assert len(calls) == 3 + comm_probe._WARMUP
    assert spread["n"] == 3
    assert spread["median"] == pytest.approx(0.028 / 4)
    assert (spread["min"], spread["max"]) == pytest.approx((0.020 / 4, 0.048 / 4))
    assert cpu[0]["median"] == pytest.approx(0.014 / 4) and cpu[0]["n"] == 3


def test_every_variable_gets_a_push_of_its_own_after_grappler():
    """Grappler merges identical computations before a function runs: a push made per variable
    by the same fill of the same shape became one tensor, sent to the ps once for all of them,
    so the PSS probe of a model with layers of one shape (wide_mlp: ~1.6 of the 2 x 40 MB it
    counts) was timed moving less than it counts. After the optimizations a step runs, every
    variable still gets a push of its own."""
    import tensorflow as tf
    from tensorflow.core.protobuf import config_pb2
    from tensorflow.python.grappler import tf_optimizer

    # two layers of one shape, as wide_mlp has, each with its bias; two tables pushed as rows
    variables = [tf.Variable(tf.zeros(shape)) for shape in ([64, 64], [64, 64], [64], [64])]
    tables = [tf.Variable(tf.zeros([100, 8])) for _ in range(2)]
    kinds = [("dense", None)] * 4 + [("indexed_slices", 5)] * 2
    graph = tf.function(lambda scale: comm_probe._pushpull(
        [*variables, *tables], kinds, "float32", scale)).get_concrete_function(
            tf.TensorSpec([], tf.float32)).graph
    updates = [op.name for op in graph.get_operations()
               if op.type in ("AssignAddVariableOp", "ResourceScatterAdd")]
    assert len(updates) == 6
    meta = tf.compat.v1.train.export_meta_graph(graph_def=graph.as_graph_def(), graph=graph)
    meta.collection_def["train_op"].node_list.value.extend(
        updates + [t.op.name for t in graph.outputs])
    optimized = tf_optimizer.OptimizeGraph(config_pb2.ConfigProto(), meta)
    # what each update adds: (resource, value) and (resource, indices, updates); control inputs
    # ("^name") come after the data inputs
    pushed = [[i for i in n.input if not i.startswith("^")][-1]
              for n in optimized.node if n.name in updates]
    assert len(pushed) == 6 and len(set(pushed)) == 6, pushed


def test_a_sparse_probe_moves_the_bytes_it_counts():
    """The probe's IndexedSlices (values and indices) are as large as `sizes` counts them, in
    each sync dtype: indices of 8 bytes against 4 counted left ~1.5% of a sparse probe
    uncounted."""
    import tensorflow as tf

    table = tf.Variable(tf.zeros([1000, 16]))
    for dtype in ("float32", "bfloat16"):
        counted = comm_probe.sizes([table], [("indexed_slices", 64)], dtype)
        probe = comm_probe.slices(table, 64, dtype, tf.constant(0.5))
        moved = sum(t.shape.num_elements() * t.dtype.size for t in (probe.values, probe.indices))
        assert moved == counted["gradient_bytes"] == counted["sparse_gradient_bytes"], dtype
        assert len(set(probe.indices.numpy().tolist())) == 64  # rows spread, none repeated
