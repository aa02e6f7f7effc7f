"""A real text corpus that needs no download: the source of the running Python's standard
library (the top-level modules of `sysconfig.get_paths()["stdlib"]`, in name order), as ASCII
characters; `--dataset=python_text` reads windows of it (experiments/workload/inputs.py).

    python -m experiments.run --model=gpt --dataset=python_text --strategy=one_device

TFDS cannot download here and no package of our registries ships a text corpus, but every Python
ships its library's source: written by people, with the structure of natural text and code
(words, indentation, repeated identifiers). The first 90% of the characters train, the last 10%
(other modules) evaluate. The text is the interpreter's own: another Python version reads a
slightly different corpus (`describe`, in the record's `corpus`, says which: 3.11.7 here,
4,698,388 characters).
"""
import functools
import glob
import hashlib
import os
import platform
import sysconfig

import numpy as np

VOCABULARY = 128  # ASCII; any other byte is read as "?"
EVAL_SHARE = 0.1


MIN_CHARACTERS = 100_000  # a stdlib of a few modules (a trimmed install) is no corpus


@functools.lru_cache(maxsize=1)
def characters():
    """The whole corpus as uint8 ASCII codes. ValueError (one line) when this Python ships too
    little of its library's source."""
    where = sysconfig.get_paths()["stdlib"]
    chunks = []
    for path in sorted(glob.glob(os.path.join(where, "*.py"))):
        with open(path, "rb") as f:
            chunks.append(f.read())
    codes = np.frombuffer(b"".join(chunks), np.uint8).copy()
    if len(codes) < MIN_CHARACTERS:
        raise ValueError(f"--dataset=python_text reads the standard library's source, but "
                         f"{where} holds {len(codes)} characters of it (fewer than "
                         f"{MIN_CHARACTERS}); use another --dataset")
    codes[codes >= VOCABULARY] = ord("?")
    return codes


def split(name):
    """The training ("train") or evaluation ("eval") part of the corpus."""
    text = characters()
    cut = int(len(text) * (1 - EVAL_SHARE))
    return text[:cut] if name == "train" else text[cut:]


def windows(name, length, count, seed, split_id):
    """(count x length character codes, the character after each) at random offsets of the
    split, deterministic from (seed, split_id)."""
    text = split(name)
    starts = np.random.default_rng([seed, split_id]).integers(0, len(text) - length, count)
    rows = text[starts[:, None] + np.arange(length + 1)].astype(np.int32)
    return rows[:, :length], rows[:, length]


def describe():
    """Where the corpus comes from: Python version, characters, digest."""
    text = characters()
    return {"python": platform.python_version(), "characters": int(len(text)),
            "sha256": hashlib.sha256(text.tobytes()).hexdigest()[:16]}
