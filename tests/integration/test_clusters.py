"""Real local clusters on loopback through `python -m experiments.run` (the launcher path)."""
import os
import re

import pytest

from tests.helpers import (NO_PROBES, TINY, TOLERANCE_FLOAT64, processes_mentioning,
                           records_in, run_module)

pytestmark = pytest.mark.integration


def _checksums(output):
    return dict(re.findall(r"\] (\w+:\d) weights checksum (\S+)", output))


# The zoo's GPT (models/gpt.py) is what the clusters of the two smoke tests below train
# (test_mwms_two_workers, test_one_pss_worker_pinned_...): each run also shows it learning well
# above chance under that strategy, which tests/integration/test_transformers.py asks of the
# attention models and leaves to these runs (the GPT puts the most of those strategies' code to
# work: attention blocks and an embedding's sparse gradients). One epoch of 1024 examples takes
# its next token far above 5 x chance (64 tokens); dense models under MWMS are
# test_mwms_accumulation_...'s.
GPT = ["--model=gpt", "--dataset=synthetic_sequences", "--epochs=1", "--train_examples=1024",
       "--eval_examples=512", "--batch_size_per_replica=32", "--optimizer=adam",
       "--learning_rate=0.002", "--cluster_timeout=120"]
GPT_ABOVE = 5 / 64  # chance over 512 eval examples has a standard deviation of 0.0055


def test_mwms_two_workers(tmp_path):
    proc = run_module("experiments.run", "--strategy=multi_worker_mirrored", "--num_workers=2",
                      *GPT, "--steps_per_execution=2", "--pin_workers", "--nocompute_probe",
                      f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (record,) = records_in(tmp_path)  # only the chief wrote
    # The probe all-reduces 2 per call, as training steps share a dispatch; 20 timings.
    assert record["communication"]["steps_per_call"] == 2
    assert record["communication"]["probe_s"]["n"] == 20
    assert record["strategy"] == "multi_worker_mirrored" and record["num_workers"] == 2
    assert record["num_replicas_in_sync"] == 2 and record["global_batch_size"] == 64
    assert record["cluster"]["this_task"] == "worker:0" and record["threads_per_task"] == 1
    assert record["final_eval_accuracy"] > GPT_ABOVE, record["final_eval_accuracy"]
    # --pin_workers: the chief (worker:0) ran on its own core, and its record still says the
    # CPUs the whole run had (the scaling model's machine cores), not that one
    assert record["config"]["pin_workers"]
    assert record["environment"]["usable_cpus"] == len(os.sched_getaffinity(0))
    assert record["environment"]["process_cpus"] == 1
    sums = _checksums(proc.stdout)
    assert set(sums) == {"worker:0", "worker:1"} and sums["worker:0"] == sums["worker:1"]
    # TensorFlow's start-up chatter of each task stays off the console (shown with --verbose).
    assert "cuInit" not in proc.stdout and "absl::InitializeLog" not in proc.stdout
    assert not processes_mentioning(str(tmp_path))


def test_pss_two_workers_one_ps(tmp_path):
    proc = run_module("experiments.run", "--strategy=parameter_server", "--num_workers=2",
                      "--num_ps=1", "--model=mlp", *TINY, "--steps_per_execution=3",
                      f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (record,) = records_in(tmp_path)
    assert record["strategy"] == "parameter_server"
    assert (record["num_workers"], record["num_ps"]) == (2, 1)
    assert record["cluster"]["this_task"] == "chief:0"
    assert sorted(record["cluster"]["roles"]) == ["chief", "ps", "worker"]
    # The chief coordinates; the workers compute: the CPU count covers every task's process,
    # task by task (named from each process's TF_CONFIG), adding up to the whole; how many
    # cores that is depends on what else the machine runs
    assert record["cpu"]["scope"] == "all tasks"
    by_task = record["cpu"]["cores_by_task"]
    assert set(by_task) == {"launcher", "chief:0", "ps:0", "worker:0", "worker:1"}
    assert sum(by_task.values()) == pytest.approx(record["cpu"]["cores_used"])
    assert by_task["worker:0"] > 0 and by_task["worker:1"] > 0
    # Epochs are defined by steps: the same examples per epoch as a single device.
    assert record["steps_per_epoch"] * record["global_batch_size"] == 512
    # 3 steps per scheduled call (16 = 5 x 3 + 1 per epoch): every step still counted once.
    assert sum(record["steps_by_worker"].values()) == 2 * record["steps_per_epoch"]
    assert [e["steps"] for e in record["epochs"]] == [16, 16]
    assert record["communication"]["method"].startswith("ps pull+push")
    # The probe pulls and pushes as training does: 3 rounds share one dispatch.
    assert record["communication"]["steps_per_call"] == 3
    assert 0 < record["communication_fraction"] <= 1
    assert record["final_eval_accuracy"] > 0.3
    assert not processes_mentioning(str(tmp_path))


def test_one_pss_worker_pinned_leaves_its_ps_and_chief_the_other_cores(tmp_path):
    """--pin_workers with one PSS worker of one thread (unpinned, its two inter-op threads ran
    independent kernels on a second core): the chief runs on the cores the worker leaves (the
    ps is pinned by the same environment; it writes nothing to check), and the chief's record
    still says the CPUs the whole run had. The GPT it trains learns on the parameter servers
    (one worker: what a transformer needs of them, its variables and sparse updates there, is
    the same for one worker as for two; two workers' scheduling is
    test_pss_two_workers_one_ps's)."""
    usable = len(os.sched_getaffinity(0))
    proc = run_module("experiments.run", "--strategy=parameter_server", "--num_workers=1",
                      "--num_ps=1", "--threads_per_worker=1", "--pin_workers", *GPT,
                      *NO_PROBES, f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (record,) = records_in(tmp_path)
    assert record["strategy"] == "parameter_server"
    assert record["final_eval_accuracy"] > GPT_ABOVE, record["final_eval_accuracy"]
    assert record["environment"]["usable_cpus"] == usable
    assert record["environment"]["process_cpus"] == max(1, usable - 1)  # the chief: the rest
    assert record["cpu"]["cores_by_task"]["worker:0"] <= 1.05  # CPU time over wall time
    assert not processes_mentioning(str(tmp_path))


def test_mwms_accumulation_gives_the_weights_of_the_large_batch(tmp_path):
    """Plain SGD on 2 workers, in float64 (the tolerance holds on any CPU: tests/helpers.py):
    K=2 micro-batches of 16 per replica end with the weights of one batch of 32 per replica (one
    all-reduce per step either way); K=1 at 16 does not. One epoch of 8 steps, without the
    probes: the weights are checked, not the communication."""
    common = ["--strategy=multi_worker_mirrored", "--num_workers=2", "--model=mlp",
              "--optimizer=sgd", "--epochs=1", "--train_examples=512", "--eval_examples=64",
              "--cluster_timeout=120", "--float_dtype=float64", *NO_PROBES]
    out = {}
    for name, args in (("accumulated", ["--batch_size_per_replica=16", "--accumulation_steps=2"]),
                       ("large", ["--batch_size_per_replica=32"]),
                       ("small", ["--batch_size_per_replica=16"])):
        proc = run_module("experiments.run", *common, *args, f"--results_dir={tmp_path / name}")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        sums = _checksums(proc.stdout)
        # Every replica applied the same all-reduced update with the same kernels (one machine,
        # one binary, one environment): equal to the bit on any CPU.
        assert sums["worker:0"] == sums["worker:1"]
        (out[name],) = records_in(tmp_path / name)
    acc, large, small = out["accumulated"], out["large"], out["small"]
    assert (acc["accumulation_steps"], acc["batch_size_per_replica"]) == (2, 16)
    assert acc["global_batch_size"] == large["global_batch_size"] == 64  # a step's examples
    assert acc["steps_per_epoch"] == large["steps_per_epoch"] == 8
    # The checksum (sum of |w|) moves by at most the sum of the weights' differences: relative
    # to it, below the per-weight bound TOLERANCE_FLOAT64.
    assert acc["weights_checksum"] == pytest.approx(large["weights_checksum"],
                                                    rel=TOLERANCE_FLOAT64)
    assert abs(small["weights_checksum"] / large["weights_checksum"] - 1) > 2e-5


def _initial_checksum(**fields):
    """The weights checksum a run of these RunConfig fields starts from (the model built from
    --seed, as the run builds it)."""
    import tensorflow as tf

    from experiments.config import RunConfig
    from experiments.engine.build import build_model
    from experiments.engine.training import weights_checksum
    from experiments.workload.datasets import get_info

    cfg = RunConfig(**fields)
    return weights_checksum(build_model(cfg, get_info(cfg.dataset), tf.distribute.get_strategy()))


def test_hybrid_splits_inside_two_mwms_workers_reach_the_mwms_weights(tmp_path):
    """--strategy=hybrid: 2 MWMS workers, each running the GPT as 2 pipeline stages x 2
    micro-batches, each stage's blocks split over 2 devices (4 logical devices a worker). Plain
    SGD from the same seed, in float64 (the tolerance holds on any CPU: tests/helpers.py): the
    weights of MWMS with whole replicas (sum of |w| over every weight: the same however they are
    staged or sharded; the pipeline and the split change where and in which order the step is
    computed, not what it computes), equal on both workers, while training moves them far
    beyond the tolerance (the test can fail). Stages balanced by measured time agree across
    workers; the record says what the pipeline sends and what the split sums (4 blocks: 8 split
    layers, each summing a 32 x 64 float64 output forward and its input's gradient backward,
    per example).

    Both axes in one cluster, against one reference. Each computes one device's weights in
    tests/experiments/engine/test_tensor_parallel.py (a split alone, and both axes) and
    test_gpipe.py (the CNN's pipeline); a split alone under hybrid (--num_stages=1) runs this
    code with one stage, and the MWMS around it is the same."""
    common = ["--num_workers=2", "--model=gpt", "--dataset=synthetic_sequences",
              "--optimizer=sgd", "--epochs=1", "--train_examples=128", "--eval_examples=64",
              "--batch_size_per_replica=16", "--cluster_timeout=120", "--float_dtype=float64"]
    hybrid = tmp_path / "hybrid"
    # with the communication probe (what the pipeline sends), without the compute probe
    proc = run_module("experiments.run", "--strategy=hybrid", "--num_stages=2",
                      "--microbatches=2", "--tensor_parallel=2", "--stage_cost=time", *common,
                      "--nocompute_probe", f"--results_dir={hybrid}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    sums = _checksums(proc.stdout)
    assert set(sums) == {"worker:0", "worker:1"} and sums["worker:0"] == sums["worker:1"]
    assert "Failed to send RPC" not in proc.stdout  # a worker outliving its chief is quiet
    (record,) = records_in(hybrid)
    pipe = record["pipeline"]
    assert record["strategy"] == "hybrid" and record["num_replicas_in_sync"] == 2
    assert (pipe["num_stages"], pipe["microbatches"], pipe["micro_batch"]) == (2, 2, 8)
    assert 0.0 <= pipe["bubble"]["measured"] < 1.0 and pipe["balanced_by"] == "time"
    assert record["communication"]["method"].startswith("all-reduce")
    assert record["communication"]["activation_bytes"] == pipe["activation_bytes_per_step"] > 0
    tensor = record["tensor_parallel"]
    assert tensor["shards"] == 2 and tensor["split_layers"] == 8
    assert tensor["reduced_bytes_per_example"] == 8 * 2 * 32 * 64 * 8
    assert tensor["reduced_bytes_per_step"] == 16 * tensor["reduced_bytes_per_example"]
    assert [(d["stage"], d["shard"]) for d in record["memory_per_device"]] == [
        (0, 0), (0, 1), (1, 0), (1, 1)]
    mwms = tmp_path / "mwms"
    proc = run_module("experiments.run", "--strategy=multi_worker_mirrored", *common,
                      *NO_PROBES, f"--results_dir={mwms}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (plain,) = records_in(mwms)
    assert record["weights_checksum"] == pytest.approx(plain["weights_checksum"],
                                                       rel=TOLERANCE_FLOAT64)
    initial = _initial_checksum(model="gpt", dataset="synthetic_sequences",
                                float_dtype="float64", results_dir=str(tmp_path / "unused"))
    assert abs(plain["weights_checksum"] / initial - 1) > 1e3 * TOLERANCE_FLOAT64
    # the reference's timeline (experiments/engine/step_clock.py): every worker's stamps in
    # order (input, gradients, update), and compute, waiting and synchronization each measured
    for rows in plain["timeline"]["stamps"].values():
        assert rows and all(t0 <= t1 <= t2 for t0, t1, t2 in rows)
    for p in plain["epochs"][-1]["timeline"]["per_worker"].values():
        assert p["compute_s"] > 0 and p["sync_s"] > 0 and p["wait_s"] >= 0
    assert not processes_mentioning(str(tmp_path))
