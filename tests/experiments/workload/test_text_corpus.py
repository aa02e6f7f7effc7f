"""--dataset=python_text's corpus (experiments/workload/text_corpus.py): real text, ASCII,
split into disjoint training and evaluation parts, windows deterministic from the seed."""
import numpy as np

from experiments.workload import text_corpus


def test_the_corpus_is_ascii_and_split_without_overlap():
    text = text_corpus.characters()
    assert len(text) > 1_000_000 and text.max() < text_corpus.VOCABULARY
    train, held = text_corpus.split("train"), text_corpus.split("eval")
    assert len(train) + len(held) == len(text)
    assert np.array_equal(np.concatenate([train, held]), text)
    assert b"def " in text[:100_000].tobytes()  # Python source, as said


def test_windows_are_deterministic_and_labelled_with_the_next_character():
    x, y = text_corpus.windows("train", 32, 64, seed=7, split_id=1)
    again, labels = text_corpus.windows("train", 32, 64, seed=7, split_id=1)
    other, _ = text_corpus.windows("train", 32, 64, seed=8, split_id=1)
    assert x.shape == (64, 32) and y.shape == (64,)
    assert np.array_equal(x, again) and np.array_equal(y, labels)
    assert not np.array_equal(x, other)
    train = text_corpus.split("train").tobytes()
    for row, label in zip(x[:8], y[:8]):  # each window and its label are consecutive text
        assert bytes(list(row) + [label]) in train


def test_a_python_without_its_library_source_is_refused_in_one_line(tmp_path, monkeypatch):
    import sysconfig

    import pytest

    from experiments.config import ConfigError, RunConfig, validate

    (tmp_path / "os.py").write_text("x = 1\n")  # a trimmed install: a module or two
    paths = sysconfig.get_paths()
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {**paths, "stdlib": str(tmp_path)})
    text_corpus.characters.cache_clear()
    try:
        with pytest.raises(ConfigError, match=r"--dataset=python_text reads the standard "
                                              r"library's source, but .* holds 6 characters"):
            validate(RunConfig(model="gpt", dataset="python_text",
                               results_dir=str(tmp_path / "r")))
    finally:
        text_corpus.characters.cache_clear()
