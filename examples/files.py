"""Writes a saved Keras model and an .npz dataset, to try the two file inputs:

    python -m examples.files --out=runs/files
    python -m experiments.run --model=runs/files/mlp.keras --dataset=runs/files/data.npz \
        --train_examples=1024 --eval_examples=256                       # fresh weights
    python -m experiments.run --model=runs/files/mlp.keras --model_weights=saved ...

data.npz holds x_train (2048, 20) float32, y_train (2048,) int, x_test (512, 20), y_test (512,):
3 classes, prototypes plus noise. mlp.keras maps 20 features to 3 logits.
"""
import argparse
import os

import numpy as np


def write_npz(path, seed=0, features=20, classes=3):
    rng = np.random.default_rng(seed)
    prototypes = rng.normal(size=(classes, features))
    arrays = {}
    for split, n in (("train", 2048), ("test", 512)):
        y = rng.integers(0, classes, n)
        arrays[f"x_{split}"] = (prototypes[y] + rng.normal(size=(n, features))).astype(np.float32)
        arrays[f"y_{split}"] = y
    np.savez(path, **arrays)
    return path


def write_keras(path, features=20, classes=3):
    import keras

    inputs = keras.Input(shape=(features,))
    hidden = keras.layers.Dense(32, activation="relu")(inputs)
    keras.Model(inputs, keras.layers.Dense(classes)(hidden), name="mlp").save(path)
    return path


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/files")
    out = parser.parse_args().out
    os.makedirs(out, exist_ok=True)
    print(write_npz(os.path.join(out, "data.npz")))
    print(write_keras(os.path.join(out, "mlp.keras")))
