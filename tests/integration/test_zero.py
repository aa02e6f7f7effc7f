"""ZeRO-1 on real 2-worker MWMS clusters (--zero=1; experiments/engine/zero.py): the sharded
update, resumed from each worker's shard, trains plain MWMS's weights with half the optimizer
state per worker, and its checkpoint resumes only as it was sharded."""
import re
import shutil

import pytest

from tests.helpers import TOLERANCE_FLOAT64, processes_mentioning, records_in, run_module

pytestmark = pytest.mark.integration

# float64, so the tolerance holds on any CPU (tests/helpers.py); the probes are not checked here
COMMON = ["--strategy=multi_worker_mirrored", "--model=mlp", "--learning_rate=0.001",
          "--train_examples=512", "--eval_examples=128", "--batch_size_per_replica=32",
          "--float_dtype=float64", "--nocomm_probe", "--nocompute_probe",
          "--cluster_timeout=120"]


def _run(results_dir, *args):
    proc = run_module("experiments.run", *COMMON, *args, f"--results_dir={results_dir}")
    sums = {k: float(v) for k, v in
            re.findall(r"\] (\w+:\d) weights checksum (\S+)", proc.stdout)}
    return proc, sums


def test_each_worker_resumes_its_own_shard_to_plain_mwms_weights_with_half_the_state(
        tmp_path):
    """Adam under ZeRO, 1 epoch, then resumed to 2: reduce-scatter (all-to-all), each worker's
    Keras optimizer on its half, all-gather, and every worker's moments back from its own shard
    file with the input going on where epoch 1 left it. The run ends where plain MWMS's
    uninterrupted 2 epochs end (the same updates summed in another order: float64 rounding
    apart); with a wrong sharded update, the moments of the chief's shard, or none, or the data
    order of a fresh pipeline, it would not. The sharded update calls the optimizer's own
    update_step whatever the optimizer (experiments/engine/zero.py): Adam, with two slots and a
    step count of its own, stands for momentum's one slot too. The record: each worker keeps
    1/2 of the optimizer's slots and sends what a ring all-reduce sends. A checkpoint is
    resumed only as it was sharded and whole: another N, no --zero, or a rank's shard of the
    model's step missing exits 2 in one line and writes nothing."""
    proc, plain = _run(tmp_path / "plain", "--num_workers=2", "--optimizer=adam", "--epochs=2",
                       f"--checkpoint_dir={tmp_path / 'ckpt0'}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert set(plain) == {"worker:0", "worker:1"} and len(set(plain.values())) == 1
    for epochs in (1, 2):
        proc, sums = _run(tmp_path / f"zero-{epochs}", "--num_workers=2", "--optimizer=adam",
                          f"--epochs={epochs}", "--zero=1",
                          f"--checkpoint_dir={tmp_path / 'ckpt1'}")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        # sharded, the workers still agree bit for bit (as plain MWMS's do)
        assert set(sums) == {"worker:0", "worker:1"} and len(set(sums.values())) == 1
    assert "resumed from" in proc.stdout
    assert abs(sums["worker:0"] - plain["worker:0"]) <= TOLERANCE_FLOAT64 * abs(plain["worker:0"])
    assert sorted(p.name for p in (tmp_path / "ckpt1" / "zero").iterdir()) == \
        ["rank0-of2", "rank1-of2"]
    slots = 2  # Adam: m and v for every value
    (record,) = records_in(tmp_path / "zero-2")
    z = record["zero"]
    assert (z["stage"], z["shards"]) == (1, 2) and z["shard_values"] == -(-z["values"] // 2)
    assert z["optimizer_state_bytes_per_worker"] == slots * 8 * z["shard_values"]
    assert z["unsharded_optimizer_state_bytes"] == slots * 8 * z["values"]
    assert z["plain_bytes_per_step"] <= z["sent_bytes_per_step"] <= \
        z["plain_bytes_per_step"] + 2 * 8  # one padded value at most
    (plain_record,) = records_in(tmp_path / "plain")
    assert plain_record["zero"] is None
    # the record's memory estimate per device counts half the slots and the shard's own copy
    # of half the parameters (float64: 8 bytes a value): Adam at N=2 saves half the
    # parameters' bytes
    (plain_mem,), (zero_mem,) = plain_record["memory_per_device"], record["memory_per_device"]
    params = 8 * z["values"]
    assert zero_mem["bytes"] - plain_mem["bytes"] == \
        -slots * params + slots * params // 2 + params // 2
    # a model checkpoint of step 16 whose rank-1 shard of 16 is lost (as if that worker died
    # before writing it; the barrier keeps the chief from saving the model then): only the
    # tasks can tell, once TensorFlow reads the model's step, and the launcher says their line
    # and stops the cluster
    broken = tmp_path / "broken"
    shutil.copytree(tmp_path / "ckpt1", broken)
    lost = list((broken / "zero" / "rank1-of2").glob("shard-16.*"))
    assert lost and all(p.unlink() is None for p in lost)
    for args, line in [
            (["--num_workers=3", "--zero=1", f"--checkpoint_dir={tmp_path / 'ckpt1'}"],
             "was written with --zero=1 over 2 workers; resume with --num_workers=2, not "
             "--zero=1 over 3"),
            (["--num_workers=2", f"--checkpoint_dir={tmp_path / 'ckpt1'}"],
             "was written with --zero=1 over 2 workers, each holding part of the optimizer "
             "state; resume with --zero=1 --num_workers=2"),
            (["--num_workers=2", "--zero=1", f"--checkpoint_dir={tmp_path / 'ckpt0'}"],
             "was written without --zero"),
            (["--num_workers=2", "--zero=1", f"--checkpoint_dir={broken}"],
             "the model of step 16 has no optimizer shard of rank 1")]:
        proc, _ = _run(tmp_path / "refused", "--optimizer=adam", "--epochs=3", *args)
        assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
        errors = [e for e in proc.stderr.splitlines() if e.startswith("error:")]
        assert len(errors) == 1 and line in errors[0], proc.stderr[-3000:]
        assert not (tmp_path / "refused").exists()  # not even the task logs
    assert not processes_mentioning(str(tmp_path))
