"""The zoo's attention models under every strategy (models/vit.py, models/gpt.py): each trains
well above chance (vit: 10 image classes; gpt: 64 next tokens), data parallel, on parameter
servers and cut into a pipeline between its blocks; the GPT on real text.

Each strategy runs once, with the model that puts the most of that strategy's code to work. The
ViT and the GPT share their attention blocks (models/transformer.py), and only the GPT has an
embedding, whose sparse gradients MWMS and the parameter servers carry otherwise than dense
ones: the GPT learns under MWMS and on parameter servers in the clusters that
tests/integration/test_clusters.py starts anyway (test_mwms_two_workers,
test_one_pss_worker_pinned_...), and in a pipeline below, on real text. The ViT learns on one
device; where a pipeline cuts it is tests/models/test_registry.py's, a ViT of two of its blocks
trains in a pipeline in tests/experiments/engine/test_gpipe.py (1F1B against GPipe), and the
ViT split over 2 devices in test_tensor_parallel.py, which also shows a pipeline and a split
computing one device's updates. Mirrored's replicas run the same replica step and all-reduce as
MWMS's workers, in one process (tests/experiments/test_run.py trains it)."""
import numpy as np
import pytest

from tests.helpers import NO_PROBES, records_in, run_module

pytestmark = pytest.mark.integration

SIZE = ["--eval_examples=512", "--batch_size_per_replica=32", "--optimizer=adam",
        "--learning_rate=0.002", *NO_PROBES]


def test_vit_trains_above_chance(tmp_path):
    """One epoch of 2048 examples (the ViT's accuracy stops rising after it: later epochs add
    run time, not margin) takes it above 2 x chance (0.1). Chance over 512 eval examples has a
    standard deviation of 0.013: 2 x chance is 7 of them."""
    proc = run_module("experiments.run", "--model=vit", "--dataset=synthetic",
                      "--strategy=one_device", "--epochs=1", "--train_examples=2048", *SIZE,
                      f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (record,) = records_in(tmp_path)
    assert record["final_eval_accuracy"] > 2 * 0.1, record["final_eval_accuracy"]


def test_gpt_refuses_a_dataset_whose_classes_are_not_its_tokens(tmp_path):
    proc = run_module("experiments.run", "--model=gpt", "--dataset=synthetic_tokens",
                      f"--results_dir={tmp_path / 'o'}", timeout=120)
    assert proc.returncode == 2
    assert "--model=gpt predicts the next token" in proc.stderr
    assert "use --dataset=synthetic_sequences" in proc.stderr
    assert not (tmp_path / "o").exists()


def test_a_split_that_does_not_divide_the_heads_is_refused():
    """Found where the task builds the model (TensorFlow is needed to build it), as bad input:
    a UserCodeError, which the task turns into exit 2 with its one line before any file is
    written (shown end to end, for another UserCodeError, by tests/experiments/engine/
    test_gpipe.py's test_a_subclassed_model_is_refused_with_one_line)."""
    from experiments.workload import user_model
    from experiments.workload.user_code import UserCodeError

    with pytest.raises(UserCodeError, match="^--model=vit: --tensor_parallel=3 does not divide "
                                            "the 4 attention heads of layer 'block0_attention'"):
        user_model.build("vit", (28, 28, 1), 10, tensor_parallel=3)


def test_gpt_learns_real_text_in_a_pipeline(tmp_path):
    """--dataset=python_text (the standard library's source), the GPT cut into 2 stages x 2
    micro-batches: it predicts the next character of modules it never trained on better than
    always guessing the most frequent one (a space, ~28% of them). 512 eval examples: a share's
    standard deviation is ~0.02, so the margin of 0.04 is two of them. The cut is after a
    residual sum, where one tensor crosses. (A pipeline computes one device's updates:
    tests/experiments/engine/test_gpipe.py, and test_tensor_parallel.py for the GPT.)"""
    from experiments.config import RunConfig
    from experiments.workload import text_corpus

    proc = run_module("experiments.run", "--model=gpt", "--dataset=python_text",
                      "--strategy=model_parallel", "--num_stages=2", "--microbatches=2",
                      "--epochs=2", "--train_examples=4096", *SIZE,
                      f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (record,) = records_in(tmp_path)
    stages = record["pipeline"]["stages"]
    assert len(stages) == 2 and stages[0]["last_layer"][-5:] in ("_add1", "_add2")
    # the run's eval set: split 2 at the default --seed
    _, labels = text_corpus.windows("eval", 32, 512, RunConfig().seed, 2)
    majority = np.bincount(labels).max() / len(labels)
    assert record["final_eval_accuracy"] > majority + 0.04, (record["final_eval_accuracy"],
                                                             majority)


def test_a_checkpoint_of_another_tensor_split_is_refused_in_one_line(tmp_path):
    """Its variables are the shards': resuming it unsplit (or split otherwise) would restore
    nothing of them. The resume is refused before anything is written; the same split resumes.
    Two steps an epoch: what is checked is the checkpoint's layout, not training."""
    flags = ["--model=vit", "--strategy=model_parallel", "--train_examples=64",
             "--eval_examples=32", "--batch_size_per_replica=32", *NO_PROBES,
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
