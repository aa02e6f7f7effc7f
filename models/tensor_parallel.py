"""Megatron-style tensor parallelism (Shoeybi et al. 2019, "Megatron-LM") for the zoo's
transformer blocks (models/transformer.py): each block's attention split by heads and its MLP by
hidden units across T devices, with the two reductions per block.

    python -m experiments.run --model=vit --strategy=model_parallel --num_stages=1 --tensor_parallel=2
    python -m experiments.run --model=gpt --dataset=synthetic_sequences --strategy=hybrid \
        --num_workers=2 --num_stages=1 --tensor_parallel=2

Attention (column- then row-parallel): device t holds the query, key and value projections of
heads [t H/T, (t+1) H/T) and the rows of the output projection that read them; it computes its
heads' attention and a partial output, and the T partial outputs are summed on the stage's first
device, which handed each shard the layer's input (where Megatron's ranks all-reduce, its "g",
and each already holds the input; backward, the output's gradient is handed out and the input's
gradients summed the same way). The MLP likewise: device t
holds columns [t F/T, (t+1) F/T) of the first Dense (and their bias: gelu is elementwise, so it
needs no exchange) and the same rows of the second; the partial outputs are summed. The output
biases are added once, after the sum. LayerNorms, residual sums, embeddings and the head are not
split: they run on the block's first device.

Each device's share of a layer runs forward *and backward* on that device: TF2's GradientTape
places a gradient op wherever its device scope says when `tape.gradient` runs, not with the op it
differentiates (checked on TF 2.21), so `on_device` gives each share a custom gradient that runs
under the share's device scope.

The split layers compute what Keras's MultiHeadAttention and two Dense layers compute, in
another order of summation: `load_from` copies an unsplit model's weights into them (every
strategy starts from the same --seed's weights), `full_weights` gives them back unsplit
(tests/models/test_tensor_parallel.py, tests/experiments/engine/test_tensor_parallel.py).
"""
import re

import keras
import numpy as np
import tensorflow as tf


class TensorParallelError(ValueError):
    """The model cannot be split as asked (one line, for the user)."""


def on_device(device, fn, x):
    """fn(x) computed on `device`, and its gradient (with respect to x and the variables fn
    reads) computed there too."""
    @tf.custom_gradient
    def run(x):
        with tf.device(device):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = fn(x)

        def grad(dy, variables=None):
            with tf.device(device):
                grads = tape.gradient(y, [x, *(variables or [])], output_gradients=dy)
            return grads[0], grads[1:]
        return y, grad
    return run(x)


class _Split(keras.layers.Layer):
    """What both split layers share: T shards and the devices they run on (set before the first
    step: experiments/engine/build.py gives each pipeline stage its own T devices)."""

    def __init__(self, shards, **kwargs):
        super().__init__(**kwargs)
        self.shards = int(shards)
        self.devices = None  # None until build.py places it: the first T devices of the host

    def shard_variables(self):
        """[[variables of shard t] for t in range(T)]: what lives on device t."""
        raise NotImplementedError

    def _devices(self):
        if self.devices is None:  # building and checking the model: any T of this host
            kind = "GPU" if len(tf.config.list_physical_devices("GPU")) >= self.shards \
                else "CPU"
            return [f"/device:{kind}:{t}" for t in range(self.shards)]
        return self.devices

    def _reduce(self, compute_shard, x, bias):
        partials = [on_device(device, lambda x, t=t: compute_shard(t, x), x)
                    for t, device in enumerate(self._devices())]
        with tf.device(self._devices()[0]):
            return tf.add_n(partials) + bias

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "shards": self.shards}


class TensorParallelAttention(_Split):
    """Self-attention split by heads over `shards` devices: Keras's MultiHeadAttention(heads,
    width // heads) applied as (x, x), causal like `use_causal_mask=True` when `causal`."""

    def __init__(self, heads, shards, causal=False, **kwargs):
        super().__init__(shards, **kwargs)
        if heads % shards:
            raise TensorParallelError(f"--tensor_parallel={shards} does not divide the "
                                      f"{heads} attention heads of layer {kwargs.get('name')!r}")
        self.heads, self.causal = int(heads), bool(causal)

    def build(self, input_shape):
        width = int(input_shape[-1])
        self.head_dim = width // self.heads
        per = self.heads // self.shards
        self.qkv, self.out = [], []
        for t in range(self.shards):
            self.qkv.append([self.add_weight(shape=shape, name=f"{kind}_{t}",
                                             initializer=init)
                             for kind in ("query", "key", "value")
                             for shape, init in (((width, per, self.head_dim), "glorot_uniform"),
                                                 ((per, self.head_dim), "zeros"))])
            self.out.append(self.add_weight(shape=(per, self.head_dim, width),
                                            name=f"output_{t}", initializer="glorot_uniform"))
        self.out_bias = self.add_weight(shape=(width,), name="output_bias",
                                        initializer="zeros")

    def shard_variables(self):
        return [[*self.qkv[t], self.out[t]] for t in range(self.shards)]

    def _shard(self, t, x):
        qk, qb, kk, kb, vk, vb = self.qkv[t]
        q, k, v = (keras.ops.einsum("abc,cde->abde", x, kernel) + bias
                   for kernel, bias in ((qk, qb), (kk, kb), (vk, vb)))
        attended = keras.ops.dot_product_attention(q, k, v, scale=1.0 / np.sqrt(self.head_dim),
                                                   is_causal=self.causal)
        return keras.ops.einsum("abcd,cde->abe", attended, self.out[t])

    def call(self, x):
        return self._reduce(self._shard, x, self.out_bias)

    def load_from(self, full):
        """Takes MultiHeadAttention's weights: query, key, value (kernel [width, heads, d] and
        bias [heads, d] each), output kernel [heads, d, width] and bias [width]."""
        per = self.heads // self.shards
        for t in range(self.shards):
            heads = slice(t * per, (t + 1) * per)
            parts = [full[0][:, heads], full[1][heads], full[2][:, heads], full[3][heads],
                     full[4][:, heads], full[5][heads]]
            for variable, value in zip(self.qkv[t], parts):
                variable.assign(value)
            self.out[t].assign(full[6][heads])
        self.out_bias.assign(full[7])

    def full_weights(self):
        """MultiHeadAttention's weights, in its order, from the shards."""
        cat = [np.concatenate([np.asarray(self.qkv[t][i]) for t in range(self.shards)],
                              axis=1 if i % 2 == 0 else 0) for i in range(6)]
        return cat + [np.concatenate([np.asarray(o) for o in self.out]),
                      np.asarray(self.out_bias)]

    def get_config(self):
        return {**super().get_config(), "heads": self.heads, "causal": self.causal}


class TensorParallelMLP(_Split):
    """Dense(hidden, gelu) then Dense(width), split by hidden units over `shards` devices."""

    def __init__(self, hidden, shards, **kwargs):
        super().__init__(shards, **kwargs)
        if hidden % shards:
            raise TensorParallelError(f"--tensor_parallel={shards} does not divide the "
                                      f"{hidden} hidden units of layer {kwargs.get('name')!r}")
        self.hidden = int(hidden)

    def build(self, input_shape):
        width, per = int(input_shape[-1]), self.hidden // self.shards
        self.up = [(self.add_weight(shape=(width, per), name=f"up_{t}",
                                    initializer="glorot_uniform"),
                    self.add_weight(shape=(per,), name=f"up_bias_{t}", initializer="zeros"))
                   for t in range(self.shards)]
        self.down = [self.add_weight(shape=(per, width), name=f"down_{t}",
                                     initializer="glorot_uniform") for t in range(self.shards)]
        self.down_bias = self.add_weight(shape=(width,), name="down_bias", initializer="zeros")

    def shard_variables(self):
        return [[*self.up[t], self.down[t]] for t in range(self.shards)]

    def _shard(self, t, x):
        kernel, bias = self.up[t]
        hidden = keras.activations.gelu(keras.ops.matmul(x, kernel) + bias)
        return keras.ops.matmul(hidden, self.down[t])

    def call(self, x):
        return self._reduce(self._shard, x, self.down_bias)

    def load_from(self, full):
        """Takes the two Dense layers' weights: kernel [width, hidden], bias [hidden], kernel
        [hidden, width], bias [width]."""
        per = self.hidden // self.shards
        for t in range(self.shards):
            units = slice(t * per, (t + 1) * per)
            self.up[t][0].assign(full[0][:, units])
            self.up[t][1].assign(full[1][units])
            self.down[t].assign(full[2][units])
        self.down_bias.assign(full[3])

    def full_weights(self):
        return [np.concatenate([np.asarray(k) for k, _ in self.up], axis=1),
                np.concatenate([np.asarray(b) for _, b in self.up]),
                np.concatenate([np.asarray(d) for d in self.down]), np.asarray(self.down_bias)]

    def get_config(self):
        return {**super().get_config(), "hidden": self.hidden}


SPLIT_LAYERS = (TensorParallelAttention, TensorParallelMLP)


def split_layers(model):
    """The model's tensor-parallel layers, in order."""
    return [layer for layer in model.layers if isinstance(layer, SPLIT_LAYERS)]


def _unsplit_sources(layer, plain):
    """The unsplit model's layers a split layer stands for: `<block>_attention` for itself, and
    `<block>_mlp1`, `<block>_mlp2` for `<block>_mlp`."""
    if isinstance(layer, TensorParallelAttention):
        return [plain.get_layer(layer.name)]
    return [plain.get_layer(f"{layer.name}1"), plain.get_layer(f"{layer.name}2")]


def load_from(model, plain):
    """Gives `model` (tensor-parallel) the weights of `plain`, the same architecture unsplit."""
    for layer in model.layers:
        if isinstance(layer, SPLIT_LAYERS):
            layer.load_from([w for src in _unsplit_sources(layer, plain)
                             for w in src.get_weights()])
        elif layer.weights:
            layer.set_weights(plain.get_layer(layer.name).get_weights())


def full_weights(model, plain):
    """`model`'s weights unsplit, in the order of `plain.weights` (the same architecture built
    without tensor parallelism)."""
    by_variable = {}
    for layer in model.layers:
        if isinstance(layer, SPLIT_LAYERS):
            values = iter(layer.full_weights())
            for src in _unsplit_sources(layer, plain):
                for w in src.weights:
                    by_variable[id(w)] = next(values)
        elif layer.weights:
            for w, value in zip(plain.get_layer(layer.name).weights, layer.get_weights()):
                by_variable[id(w)] = value
    return [by_variable[id(w)] for w in plain.weights]


def output_bytes_per_example(layer):
    """Bytes per example of one split layer's output: what each shard's partial sum holds."""
    return int(np.prod(layer.output.shape[1:])) * np.dtype(layer.compute_dtype).itemsize


def shard_bytes_per_example(layer):
    """Bytes per example one shard of a split layer keeps for its backward, counted as the
    unsplit model's estimate counts layer outputs (experiments/measure/memory.py): its partial
    output, and an MLP's 1/T of the hidden units (the first Dense's output, unsplit)."""
    held = output_bytes_per_example(layer)
    if isinstance(layer, TensorParallelMLP):
        positions = int(np.prod(layer.output.shape[1:-1]))
        held += positions * layer.hidden // layer.shards * np.dtype(layer.compute_dtype).itemsize
    return held


_BLOCK = re.compile(r"block\d+_(attention|mlp[12]?)$")  # models/transformer.py's names


def _reduced_layers(model):
    """(layer, its heads or hidden units) of every layer a T-way split reduces after: split
    layers, and in an unsplit model of the zoo's blocks (models/transformer.py) its
    `block<i>_attention` (MultiHeadAttention) and `block<i>_mlp2` (the Dense after
    `block<i>_mlp1`)."""
    names = {layer.name: layer for layer in model.layers if _BLOCK.match(layer.name)}
    out = []
    for name, layer in names.items():
        if isinstance(layer, TensorParallelAttention):
            out.append((layer, layer.heads))
        elif isinstance(layer, TensorParallelMLP):
            out.append((layer, layer.hidden))
        elif isinstance(layer, keras.layers.MultiHeadAttention):
            out.append((layer, layer.num_heads))
        elif name.endswith("_mlp2") and isinstance(names.get(f"{name[:-1]}1"),
                                                   keras.layers.Dense):
            out.append((layer, names[f"{name[:-1]}1"].units))
    return out


def describe(model):
    """What splitting `model`'s blocks would all-reduce (the cost model's and the planner's
    inputs, results/model/cost_model.py), split or not: {reduced_bytes_per_example (both directions,
    every reduction of a step), reductions (all-reduces per step of one micro-batch), shards
    (the T > 1 that divide every split layer)}; None for a model without such blocks (or one
    never called: a subclassed model has no layer outputs to size)."""
    try:
        layers = _reduced_layers(model)
        if layers:
            per_example = sum(2 * output_bytes_per_example(layer) for layer, _ in layers)
    except (AttributeError, ValueError):
        return None
    if not layers:
        return None
    divisor = int(np.gcd.reduce([size for _, size in layers]))
    return {"reduced_bytes_per_example": per_example,
            "reductions": 2 * len(layers),
            "shards": [t for t in range(2, divisor + 1) if divisor % t == 0]}
