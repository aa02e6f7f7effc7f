"""The zoo's attention models under every strategy (models/vit.py, models/gpt.py): each trains
well above chance (vit: 10 image classes; gpt: 64 next tokens), data parallel, on parameter
servers and cut into a pipeline between its blocks; the GPT on real text."""
import numpy as np
import pytest

from tests.helpers import NO_PROBES, records_in, run_module

pytestmark = pytest.mark.integration

SIZE = ["--epochs=3", "--train_examples=2048", "--eval_examples=512",
        "--batch_size_per_replica=32", "--cluster_timeout=120", "--optimizer=adam",
        "--learning_rate=0.002", *NO_PROBES]
# Mirrored's replicas run the same replica step and all-reduce as MWMS's workers, in one process
# (tests/experiments/test_run.py trains it): left out here to keep CI's time (2 x ~18 s).
STRATEGIES = {
    "one_device": ["--strategy=one_device"],
    "multi_worker_mirrored": ["--strategy=multi_worker_mirrored", "--num_workers=2"],
    "parameter_server": ["--strategy=parameter_server", "--num_workers=2", "--num_ps=1"],
    "model_parallel": ["--strategy=model_parallel", "--num_stages=2", "--microbatches=2"],
}
# Tensor parallelism trains one device's weights (tests/experiments/engine/
# test_tensor_parallel.py) and data x tensor MWMS's (tests/integration/test_clusters.py).
CHANCE = {"vit": 0.1, "gpt": 1 / 64}
# How far above chance each gets in these 3 epochs of 2048 examples (2026-11-25, every strategy):
# the ViT 0.26-0.29 of 512 eval examples (chance 0.1; a transformer without a convolution's prior
# learns these images slowly: 0.45 after 3 epochs of 4096), the GPT its next token well above
# 5 x chance. Chance over 512 examples has a standard deviation of 0.013: 2 x chance is 7 of them.
ABOVE = {"vit": 2.0, "gpt": 5.0}


# The GPT on one device learns real text below (test_gpt_learns_real_text_...): its synthetic
# one-device run is left out to keep CI's time (~15 s).
@pytest.mark.parametrize("model, dataset, strategy", [
    (model, dataset, strategy)
    for model, dataset in (("vit", "synthetic"), ("gpt", "synthetic_sequences"))
    for strategy in STRATEGIES if (model, strategy) != ("gpt", "one_device")])
def test_transformer_trains_above_chance(tmp_path, model, dataset, strategy):
    proc = run_module("experiments.run", *STRATEGIES[strategy], f"--model={model}",
                      f"--dataset={dataset}", *SIZE, f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (record,) = records_in(tmp_path)
    assert record["final_eval_accuracy"] > ABOVE[model] * CHANCE[model], \
        record["final_eval_accuracy"]
    if strategy == "model_parallel":  # cut after a residual sum, where one tensor crosses
        stages = record["pipeline"]["stages"]
        assert stages[0]["last_layer"][-5:] in ("_add1", "_add2")



def test_gpt_refuses_a_dataset_whose_classes_are_not_its_tokens(tmp_path):
    proc = run_module("experiments.run", "--model=gpt", "--dataset=synthetic_tokens",
                      f"--results_dir={tmp_path / 'o'}", timeout=120)
    assert proc.returncode == 2
    assert "--model=gpt predicts the next token" in proc.stderr
    assert "use --dataset=synthetic_sequences" in proc.stderr
    assert not (tmp_path / "o").exists()


def test_a_split_that_does_not_divide_the_heads_is_refused(tmp_path):
    proc = run_module("experiments.run", "--strategy=model_parallel", "--tensor_parallel=3",
                      "--model=vit", f"--results_dir={tmp_path / 'o'}", timeout=120)
    assert proc.returncode == 2
    assert "--tensor_parallel=3 does not divide the 4 attention heads" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "o").exists()


def test_gpt_learns_real_text_beyond_its_most_frequent_character(tmp_path):
    """--dataset=python_text (the standard library's source): the GPT predicts the next
    character of modules it never trained on better than always guessing the most frequent one
    (a space, ~28% of them). 512 eval examples: a share's standard deviation is ~0.02, so the
    margin of 0.04 is two of them; 2026-11-26 it reached 0.357 against 0.283."""
    from experiments.config import RunConfig
    from experiments.workload import text_corpus

    proc = run_module("experiments.run", "--model=gpt", "--dataset=python_text",
                      "--strategy=one_device", *SIZE[:1], "--train_examples=4096",
                      *SIZE[2:], f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (record,) = records_in(tmp_path)
    # the run's eval set: split 2 at the default --seed
    _, labels = text_corpus.windows("eval", 32, 512, RunConfig().seed, 2)
    majority = np.bincount(labels).max() / len(labels)
    assert record["final_eval_accuracy"] > majority + 0.04, (record["final_eval_accuracy"],
                                                             majority)


def test_a_checkpoint_of_another_tensor_split_is_refused_in_one_line(tmp_path):
    """Its variables are the shards': resuming it unsplit (or split otherwise) would restore
    nothing of them. The resume is refused before anything is written; the same split resumes."""
    flags = ["--model=vit", "--strategy=model_parallel", "--train_examples=256",
             "--eval_examples=64", "--batch_size_per_replica=32", *NO_PROBES,
             f"--checkpoint_dir={tmp_path / 'ckpt'}"]
    proc = run_module("experiments.run", *flags, "--tensor_parallel=2", "--epochs=1",
                      f"--results_dir={tmp_path / 'a'}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    proc = run_module("experiments.run", *flags, "--num_stages=2", "--epochs=2",
                      f"--results_dir={tmp_path / 'b'}")
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "was written with --tensor_parallel=2 (its weights in 2 shard(s)); resume with " \
           "--tensor_parallel=2, not 1" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "b").exists()
    proc = run_module("experiments.run", *flags, "--tensor_parallel=2", "--epochs=2",
                      f"--results_dir={tmp_path / 'c'}")
    assert proc.returncode == 0 and "resumed from" in proc.stdout, proc.stderr[-2000:]
