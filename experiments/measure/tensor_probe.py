"""What a tensor-parallel step's reductions cost when timed alone (models/tensor_parallel.py):
the record's `communication.tensor_probe_s`, part of its communication share.

For each split layer and micro-batch, twice (forward: the layer's input handed to its T devices
and their partial outputs summed; backward: the output's gradient handed out and the T input
gradients summed), one tensor of the layer's output shape is sent from the stage's first device
to each of the T and T such tensors are summed back on it. Between logical devices of one CPU
the tensors stay in host memory: what is timed is then the sums' memory traffic.
"""
import tensorflow as tf

from experiments.measure import comm_probe
from models import tensor_parallel


def measure(stages, micro_batch, microbatches, dtype, repeats=20):
    """Seconds of one step's reductions alone, as the spread of `repeats` timings; None without
    split layers."""
    layers = [layer for stage in stages for layer in tensor_parallel.split_layers(stage.model)]
    if not layers:
        return None
    plans = [(layer.devices, (micro_batch, *layer.output.shape[1:])) for layer in layers]

    @tf.function
    def reduce_all(scale):
        kept = []
        for i, (devices, shape) in enumerate(plans):
            for j in range(2 * microbatches):  # forward and backward of each micro-batch
                with tf.device(devices[0]):
                    given = comm_probe.distinct_fill(shape, scale, i * 2 * microbatches + j, dtype)
                parts = []
                for device in devices:
                    with tf.device(device):
                        parts.append(tf.identity(given) * 2)  # the shard's own tensor
                with tf.device(devices[0]):
                    kept.append(tf.reshape(tf.add_n(parts), [-1])[0])
        return tf.add_n(kept)

    return comm_probe.timed(lambda: float(reduce_all(tf.constant(1.0))), repeats)
