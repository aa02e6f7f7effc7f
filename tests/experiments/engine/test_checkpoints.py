"""Checkpoints restore what they saved, checked: a model or optimizer the checkpoint does not
fully match (tf.train.Checkpoint restores partially) is refused instead of training on fresh
values."""
import types

import keras
import pytest
import tensorflow as tf

from experiments.engine.checkpoints import Checkpoints, ResumeError, check_digest, state_digest


def _trainer(extra_layer=False, seed=0):
    keras.utils.set_random_seed(seed)
    layers = [keras.layers.Dense(4), keras.layers.Dense(2)] + \
        ([keras.layers.Dense(2)] if extra_layer else [])  # variables the checkpoint lacks
    model = keras.Sequential([keras.Input((5,)), *layers])
    optimizer = keras.optimizers.Adam(0.01)
    optimizer.build(model.trainable_variables)
    # one step, so the slots hold something to restore
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(tf.ones((2, 5))) ** 2)
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                  model.trainable_variables))
    return types.SimpleNamespace(model=model, optimizer=optimizer, steps_per_epoch=1,
                                 coordinator=None, zero=None)


def test_the_restored_state_is_the_saved_one(tmp_path):
    saved = _trainer(seed=0)
    checkpoints = Checkpoints(str(tmp_path), saved, True, "single")
    checkpoints.after_steps(0, 1)
    checkpoints.save([{"epoch": 1, "steps": 1}])
    fresh = _trainer(seed=1)  # other initial values, same structure
    assert state_digest(fresh.model, fresh.optimizer) != \
        state_digest(saved.model, saved.optimizer)
    again = Checkpoints(str(tmp_path), fresh, True, "single")
    epochs, steps = again.restore()
    assert steps == 1 and again.restored_digest == state_digest(saved.model, saved.optimizer)
    for a, b in zip(fresh.optimizer.variables, saved.optimizer.variables):
        assert (a.numpy() == b.numpy()).all()


def test_a_model_the_checkpoint_does_not_match_is_refused(tmp_path):
    checkpoints = Checkpoints(str(tmp_path), _trainer(), True, "single")
    checkpoints.after_steps(0, 1)
    checkpoints.save([{"epoch": 1, "steps": 1}])
    other = Checkpoints(str(tmp_path), _trainer(extra_layer=True), True, "single")
    with pytest.raises(RuntimeError, match="restored .* but the run that saved it had"):
        other.restore()


def test_the_dataset_is_noted_with_each_save_and_another_is_refused(tmp_path):
    checkpoints = Checkpoints(str(tmp_path), _trainer(), True, "single", dataset="synthetic")
    checkpoints.after_steps(0, 1)
    checkpoints.save([{"epoch": 1, "steps": 1}])
    check_digest(str(tmp_path), 1, "synthetic")  # the same data: resumed
    with pytest.raises(ResumeError, match=r"was written training --dataset=synthetic; resume "
                                          r"with --dataset=synthetic, not synthetic_cifar"):
        check_digest(str(tmp_path), 1, "synthetic_cifar")
