"""--strategy=central_storage: variables on one device, 2 replicas computing on the CPU split into
2 logical devices, in one process (a subprocess: logical devices exist only if set before the
runtime starts, which this pytest process has long done)."""
from tests.helpers import TINY, records_in, run_module


def test_central_storage_trains_two_replicas_in_one_process(tmp_path):
    proc = run_module("experiments.run", "--strategy=central_storage", "--num_replicas=2",
                      "--model=mlp", *TINY, "--threads=2", f"--results_dir={tmp_path}",
                      timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (record,) = records_in(tmp_path)
    assert record["strategy"] == "central_storage" and record["num_workers"] == 1
    assert record["num_replicas_in_sync"] == 2 and record["global_batch_size"] == 64
    assert record["cluster"]["this_task"] == "single"
    losses = [e["train_loss"] for e in record["epochs"]]
    assert losses[1] < losses[0], losses
    assert record["final_eval_accuracy"] > 0.3  # 10 classes: chance is 0.1
    assert record["communication"]["method"].startswith("all-reduce")
    assert "central_storage" in record["communication"]["method"]
    assert "single weights checksum" in proc.stdout
