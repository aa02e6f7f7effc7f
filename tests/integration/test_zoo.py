"""The zoo's sparse case under the strategies that synchronize: the embedding's gradient is
tf.IndexedSlices everywhere, stays sparse through each strategy's synchronization, and the record
counts the rows sent (32 x 64 token ids per replica), not the 25.6 MB table."""
import pytest

from tests.helpers import TINY, records_in, run_module

pytestmark = pytest.mark.integration

ROWS = 32 * 64  # per-replica batch x sequence length: one row per token id
HEAD = (64 * 64 + 64 + 64 * 4 + 4) * 4  # the dense layers' gradients (float32)
SENT = ROWS * (64 * 4 + 4) + HEAD  # float32 rows + int32 indices, plus the head
DENSE = 100_000 * 64 * 4 + HEAD


@pytest.mark.parametrize("strategy", [
    ["--strategy=mirrored", "--num_replicas=2"],
    ["--strategy=multi_worker_mirrored", "--num_workers=2"],
    # one PSS worker: its pushes and pulls are each worker's own, whatever the count (the
    # bytes checked are per replica)
    ["--strategy=parameter_server", "--num_workers=1", "--num_ps=1"],
])
def test_embedding_gradients_are_sent_sparse(tmp_path, strategy):
    # the record's figures are the communication probe's; the compute probe is not checked
    proc = run_module("experiments.run", *strategy, "--model=embedding",
                      "--dataset=synthetic_tokens", *TINY, "--nocompute_probe", "--notensorboard",
                      f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (record,) = records_in(tmp_path)
    comm = record["communication"]
    assert comm["gradient_kinds"] == {"dense": 4, "indexed_slices": 1}
    assert comm["synchronized_as"]["indexed_slices"] == "indexed_slices"
    assert comm["gradient_bytes"] == SENT and comm["dense_gradient_bytes"] == DENSE
    if "parameter_server" in strategy[0]:  # pulls the rows it reads, not the table
        assert comm["pull_bytes"] == ROWS * 64 * 4 + HEAD
    assert record["final_eval_accuracy"] > 0.3  # 4 classes: chance is 0.25
