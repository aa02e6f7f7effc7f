"""Peak memory per device of a run: the allocator's peak where the device is a GPU, otherwise an
estimate from tensor sizes (a CPU's logical devices share one process's memory, so nothing
measures one of them alone).

The estimate for a device holding layers L with a batch of B examples in flight:

    parameters x (1 + 1 for their gradients + the optimizer's slots per weight / Z
                  + 1/Z for ZeRO's copy of its shard when Z > 1)
    + B x (every output of L per example)        activations, held from forward to backward

(Z: the workers ZeRO-1 shards the optimizer state over, else 1.) One device, or a data-parallel
replica, holds the whole model and its per-replica batch (with
--accumulation_steps, one micro-batch at a time); a pipeline stage holds its own layers and the
micro-batches its schedule keeps in flight: every one of the step's under GPipe, at most S - s
under 1F1B (experiments/engine/gpipe.py). Temporaries and allocator overhead are not
counted, so the estimate is a floor: compare it across configurations, not with a device's size.
"""
import numpy as np
import tensorflow as tf

from models import stages as model_stages
from models import tensor_parallel
from results.model.specs import OPTIMIZER_SLOTS  # slot variables per weight

ESTIMATE = "estimate (tensor sizes)"
MEASURED = "measured (GPU allocator peak)"


def _estimate(stage, batch, optimizer, shards=1):
    if stage.activation_bytes_per_example is None:  # a size known only at run time
        return None
    return (stage.parameter_bytes * 2
            + stage.parameter_bytes * OPTIMIZER_SLOTS.get(optimizer, 0) // shards
            + (stage.parameter_bytes // shards if shards > 1 else 0)
            + stage.activation_bytes_per_example * batch)


def _gpu_peak(device):
    """The allocator's peak bytes of a GPU named like /device:GPU:i."""
    return tf.config.experimental.get_memory_info(device.split("device:")[-1])["peak"]


def per_device(stages, devices, batch, optimizer, shards=1):
    """[{device, bytes, kind}] for each of `stages` (models.stages.Stage) on `devices`, with
    `batch` examples in flight on each (or a list: each stage's) and the optimizer state over
    `shards` workers."""
    out = []
    batches = batch if isinstance(batch, list) else [batch] * len(stages)
    for stage, device, batch in zip(stages, devices, batches):
        if "GPU" in device.upper():
            out.append({"device": device, "bytes": _gpu_peak(device), "kind": MEASURED})
        else:
            out.append({"device": device, "bytes": _estimate(stage, batch, optimizer, shards),
                        "kind": ESTIMATE})
    return out


def _bytes(variables):
    return sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in variables)


def per_tensor_device(stages, batches, optimizer, weights_on_first=False):
    """Every device of a tensor-parallel run (models/tensor_parallel.py): [{stage, shard,
    device, bytes, kind}], with batches[s] examples in flight on stage s. Shard t of a stage
    holds its share of each split layer's weights (with `weights_on_first`, as under hybrid's
    mirrored variables, the stage's first device holds them all) and, per example, what its
    share of each split layer keeps for the backward: its partial output, an MLP's 1/T of the
    hidden units, and on the other devices the copy of the layer's input. The stage's first
    device also holds its unsplit layers and every layer's output (the stage's estimate, less
    the weights other devices hold). GPUs: the allocator's peak."""
    out = []
    per_weight = 2 + OPTIMIZER_SLOTS.get(optimizer, 0)
    for s, (stage, batch) in enumerate(zip(stages, batches)):
        layers = tensor_parallel.split_layers(stage.model)
        if not layers:
            continue
        shards = [sum(_bytes(layer.shard_variables()[t]) for layer in layers)
                  for t in range(len(layers[0].devices))]
        own = sum(tensor_parallel.shard_bytes_per_example(layer) for layer in layers)
        inputs = sum(tensor_parallel.output_bytes_per_example(layer) for layer in layers)
        whole = _estimate(stage, batch, optimizer)
        elsewhere = 0 if weights_on_first else per_weight * sum(shards[1:])
        for t, device in enumerate(layers[0].devices):
            if "GPU" in device.upper():
                out.append({"stage": s, "shard": t, "device": device,
                            "bytes": _gpu_peak(device), "kind": MEASURED})
                continue
            if t == 0:
                held = None if whole is None else whole - elsewhere + batch * own
            else:
                held = (0 if weights_on_first else per_weight * shards[t]) + \
                    batch * (own + inputs)
            out.append({"stage": s, "shard": t, "device": device, "bytes": held,
                        "kind": ESTIMATE})
    return out


def of_replica(model, batch, optimizer, shards=1):
    """One replica holding the whole `model` with `batch` examples in flight (its optimizer
    state over `shards` workers: ZeRO-1): [{device, bytes, kind}] on this process's first
    device; [] for a model without a layer graph (subclassed)."""
    try:
        (whole,) = model_stages.split(model, 1)
    except model_stages.StageError:
        return []
    gpus = tf.config.list_physical_devices("GPU")
    return per_device([whole], ["/device:GPU:0" if gpus else "/device:CPU:0"], batch, optimizer,
                      shards)


def _allocators():
    """{record key: TF device} of the allocators whose peaks a run keeps: each GPU's; without
    GPUs the CPU's (one allocator for the process, whatever logical devices split it)."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return {f"gpu:{i}": f"GPU:{i}" for i, _ in enumerate(gpus)}
    return {"cpu_allocator": "CPU:0"}


# TF keeps statistics only where the allocator tracks them: GPUs, and a CPU whose allocator
# does (the oneDNN build's, which the toolkit turns on; TF_ENABLE_ONEDNN_OPTS=0 may leave the
# plain one, whose statistics TF's API says it raises ValueError for)
_UNTRACKED = (ValueError, RuntimeError, tf.errors.OpError)


def reset_peaks():
    """Starts every allocator's peak afresh: before an epoch's steps, so what building and
    checking the model, or the last evaluation, allocated is not the training's peak."""
    for device in _allocators().values():
        try:
            tf.config.experimental.reset_memory_stats(device)
        except _UNTRACKED:
            pass


def peaks(previous=None):
    """{gpu:i or cpu_allocator: peak allocated bytes}, each at least `previous`'s (peaks kept
    across epochs); an allocator that keeps no statistics is left out. A CPU host's figure is
    TensorFlow's allocations of the whole process (tensors, not Python or the runtime): a
    pipeline's stages together."""
    out = dict(previous or {})
    for key, device in _allocators().items():
        try:
            peak = tf.config.experimental.get_memory_info(device)["peak"]
        except _UNTRACKED:
            continue
        out[key] = max(peak, out.get(key, 0))
    return out
