"""End to end through `python -m experiments.run`, one process per strategy, tiny configs."""
import glob
import json
import os

import pytest

from experiments.config.cli import bool_flag
from tests.helpers import NO_PROBES, TINY, records_in, run_module

EPOCH_KEYS = {"epoch", "time_s", "examples_per_sec", "train_loss", "train_accuracy", "eval_loss",
              "eval_accuracy"}


@pytest.mark.parametrize("strategy, extra, replicas", [
    ("one_device", [], 1),
    ("mirrored", ["--num_replicas=2"], 2),
    ("mirrored", ["--num_replicas=2", "--model=cnn", "--sync_batchnorm", "--optimizer=adam",
                  "--lr_scaling=linear", "--learning_rate=0.001", "--warmup_epochs=1"], 2),
])
def test_run_writes_a_complete_record(tmp_path, strategy, extra, replicas):
    args = [f"--strategy={strategy}", "--model=mlp", *TINY, f"--results_dir={tmp_path}", *extra]
    proc = run_module("experiments.run", *args)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    (record,) = records_in(tmp_path)
    assert record["strategy"] == strategy and record["num_replicas_in_sync"] == replicas
    assert record["global_batch_size"] == 32 * replicas and record["batch_size_per_replica"] == 32
    assert [e["epoch"] for e in record["epochs"]] == [1, 2]
    for e in record["epochs"]:
        assert EPOCH_KEYS <= set(e) and e["time_s"] > 0 and e["examples_per_sec"] > 0
    assert record["steady_state"]["epochs_used"] == [2]
    assert record["final_eval_accuracy"] > 0.3  # chance is 0.1
    assert record["config"]["strategy"] == strategy and record["environment"]["tensorflow"]
    assert os.listdir(tmp_path / "tensorboard")  # scalars were written
    assert 50e6 < record["peak_memory_bytes"]["host_rss"] < 8e9  # TF alone is > 50 MB
    if replicas == 1:  # one replica: nothing to synchronize
        assert record["communication_fraction"] == 0.0
    else:  # the probe's median over the step's time, at most all of it
        communication = record["communication"]
        assert communication["probe_s"]["n"] == 20
        assert record["communication_fraction"] == communication["fraction"] > 0
        assert communication["fraction"] == pytest.approx(
            min(1.0, communication["probe_s"]["median"] / communication["step_time_s"]))
    assert record["startup"]["launch_to_first_step_s"] > 0
    # the model's FLOPs against this machine's matmul (experiments/measure/flops.py): training
    # counts 3x the forward; the share is the steady rate's FLOP/s over one process's matmul's
    compute = record["compute"]
    assert compute["train_flops_per_example"] == 3 * compute["forward_flops_per_example"] > 0
    assert compute["achieved_flops_per_sec"] == pytest.approx(
        compute["train_flops_per_example"] * record["steady_state"]["examples_per_sec"]["median"])
    assert compute["peak_processes"] == 1 and compute["peak_flops_per_sec"] == \
        compute["matmul_peak_flops_per_sec"] > 0
    assert compute["share_of_peak"] > 0 and compute["share_of_peak"] == pytest.approx(
        compute["achieved_flops_per_sec"] / compute["peak_flops_per_sec"])
    # what a two-stage pipeline of the model would move per example (the planner's pipelines)
    assert record["boundary_activation_bytes"] > 0
    # the step's own timestamps: one row per replica, each in order
    assert len(record["timeline"]["stamps"]) == replicas
    assert all(t0 <= t1 <= t2 for rows in record["timeline"]["stamps"].values()
               for t0, t1, t2 in rows)


def test_mirrored_reduces_to_one_on_a_cpu_and_16_bit_sync_halves_the_bytes(tmp_path):
    """One mirrored run for two of its reduction's settings: reduce_to_one, the CPU's own
    (nccl is refused below), asked for by name and recorded; the gradients synchronized in
    bfloat16, half float32's bytes (the communication probe's count). It still trains."""
    proc = run_module("experiments.run", "--strategy=mirrored", "--num_replicas=2", "--model=mlp",
                      *TINY, "--cross_device_ops=reduce_to_one", "--gradient_sync_dtype=bfloat16",
                      "--nocompute_probe", "--notensorboard", f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    (record,) = records_in(tmp_path)
    assert record["config"]["cross_device_ops"] == "reduce_to_one"
    params = 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10
    assert record["communication"]["dtype"] == "bfloat16"
    assert record["communication"]["gradient_bytes"] == 2 * params  # float32 would be 4 x
    assert record["final_eval_accuracy"] > 0.3


@pytest.mark.parametrize("args, fragment", [
    (["--gradient_sync_dtype=int8"], "float32, float16, bfloat16"),
    (["--profile_steps=5"], "FIRST,LAST"),
    (["--profile_steps=9,3"], "1 <= FIRST <= LAST"),
    (["--steps_per_execution=0"], "--steps_per_execution"),
    (["--strategy=bogus"], "one_device, mirrored, central_storage, multi_worker_mirrored, "
                           "parameter_server, model_parallel, hybrid, tpu"),
    (["--accumulation_steps=0"], "--accumulation_steps=0 must be > 0"),
    (["--accumulation_steps=4", "--train_examples=200"], "--accumulation_steps=4"),
    (["--model=vgg"], "mlp"),
    (["--dataset=imagenet"], "synthetic"),
    (["--epochs=0"], "--epochs"),
    (["--epochs=two"], "epochs"),
    (["--optimizer=rmsprop"], "sgd, momentum, adam"),
    (["--lr_scaling=cubic"], "none, linear, sqrt"),
    (["--strategy=one_device", "--num_replicas=2"], "--num_replicas"),
    (["--strategy=parameter_server", "--num_ps=0"], "--num_ps"),
    (["--strategy=parameter_server", "--num_ps=1", "--ps_shards=3"], "--ps_shards"),
    (["--strategy=parameter_server", "--num_ps=2", "--ps_shards=2"], "not supported with Keras 3"),
    (["--global_batch_size=63", "--strategy=mirrored", "--num_replicas=2"], "divisible"),
    (["--train_examples=10"], "--train_examples"),
    (["--dataset=mnist", "--train_examples=70000"], "--train_examples"),
    (["--model=mlp", "--sync_batchnorm"], "--sync_batchnorm"),
    (["--model=embedding", "--dataset=synthetic"], "--dataset=synthetic_tokens"),
    (["--dataset=synthetic_tokens", "--model=cnn"], "--model=embedding"),
    (["--collective=mpi"], "auto, ring, nccl"),
    (["--collective=ring"], "--collective=ring applies to --strategy=multi_worker_mirrored or "
                            "hybrid, not --strategy=one_device"),
    (["--strategy=multi_worker_mirrored", "--cross_device_ops=nccl"],
     "--cross_device_ops=nccl applies to --strategy=mirrored, not"),
    (["positional"], "unexpected arguments"),
    (["--pin_cores=999"], "--pin_cores=999 exceeds"),
    (["--num_stages=2"], "applies to --strategy=model_parallel or hybrid only"),
    (["--strategy=model_parallel"], "--num_stages >= 2"),
    (["--strategy=model_parallel", "--num_stages=2", "--microbatches=5"], "divisor"),
    (["--strategy=model_parallel", "--num_stages=2", "--accumulation_steps=2"],
     "--accumulation_steps=2 does not combine"),
    (["--strategy=hybrid", "--num_stages=2", "--stage_cost=flops"], "params, time"),
    (["--strategy=multi_worker_mirrored", "--num_workers=2", "--straggler_schedule=0:5,0:9"],
     "--straggler_schedule=0:5,0:9: give EPOCH:MS pairs"),
    (["--straggler_schedule=0:0,2:60"], "slows a worker of a cluster"),
    (["--strategy=parameter_server", "--num_workers=2", "--num_ps=1",
      "--straggler_schedule=0:0,2:60", "--straggler_delay_ms=5"], "already gives the delay"),
])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, args, fragment):
    out = tmp_path / "out"
    proc = run_module("experiments.run", *args, f"--results_dir={out}", timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and fragment in lines[0], proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("args, said", [
    (["--strategy=mirrored", "--num_replicas=2", "--cross_device_ops=nccl"],
     "--cross_device_ops=nccl sums the gradients between GPUs and TensorFlow sees none here; "
     "use --cross_device_ops=reduce_to_one (or auto) on a CPU"),
    (["--strategy=multi_worker_mirrored", "--num_workers=1", "--collective=nccl"],
     "--collective=nccl sums the gradients between GPUs and TensorFlow sees none here; use "
     "--collective=ring (or auto) on a CPU")])
def test_gpu_only_reductions_are_refused_on_a_cpu_in_one_line(tmp_path, args, said):
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has GPUs: the refusal needs a machine without")
    out = tmp_path / "out"
    proc = run_module("experiments.run", "--model=mlp", *args, f"--results_dir={out}",
                      timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert [line for line in proc.stderr.splitlines() if line.strip()] == [f"error: {said}"]
    assert not out.exists()


def test_malformed_tf_config_exits_2(tmp_path):
    proc = run_module("experiments.run", "--strategy=multi_worker_mirrored",
                      f"--results_dir={tmp_path / 'out'}", env={"TF_CONFIG": "{bad"}, timeout=120)
    assert proc.returncode == 2 and "TF_CONFIG is not valid JSON" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


_W2 = {"worker": ["127.0.0.1:2001", "127.0.0.1:2002"]}


@pytest.mark.parametrize("strategy, tf_config, fragment", [
    ("multi_worker_mirrored", "{bad", "not valid JSON"),
    ("multi_worker_mirrored", "[1, 2]", "JSON object"),
    ("multi_worker_mirrored", '{"task": {"type": "worker", "index": 0}}', "'cluster'"),
    ("multi_worker_mirrored", json.dumps({"cluster": _W2}), "'task'"),
    ("multi_worker_mirrored", json.dumps({"cluster": _W2, "task": {"type": "worker", "index": 5}}),
     "out of range"),
    ("multi_worker_mirrored", json.dumps({"cluster": _W2, "task": {"type": "boss", "index": 0}}),
     "task.type is 'boss'"),
    ("multi_worker_mirrored", json.dumps({"cluster": {"worker": ["h:1", "h:1"]},
                                          "task": {"type": "worker", "index": 0}}), "appears twice"),
    ("multi_worker_mirrored", json.dumps({"cluster": {"worker": ["h"]},
                                          "task": {"type": "worker", "index": 0}}), "'h'"),
    ("multi_worker_mirrored", json.dumps({"cluster": {**_W2, "ps": ["h:3"]},
                                          "task": {"type": "worker", "index": 0}}), "'ps'"),
    ("parameter_server", json.dumps({"cluster": _W2, "task": {"type": "worker", "index": 0}}),
     "needs cluster.chief"),
    ("parameter_server", json.dumps({"cluster": {"chief": ["h:1"]},
                                     "task": {"type": "chief", "index": 0}}), "single task"),
    ("mirrored", json.dumps({"cluster": _W2, "task": {"type": "worker", "index": 0}}),
     "runs in one process"),
    ("multi_worker_mirrored", json.dumps({"cluster": {"gpu": ["h:1"]},
                                          "task": {"type": "gpu", "index": 0}}), "'gpu'"),
    ("multi_worker_mirrored", json.dumps({"cluster": _W2, "task": {"type": "worker",
                                                                   "index": -2}}), "task.index"),
])
def test_bad_tf_config_exits_2_before_anything_starts(tmp_path, strategy, tf_config, fragment):
    out = tmp_path / "out"
    proc = run_module("experiments.run", f"--strategy={strategy}", f"--results_dir={out}",
                      env={"TF_CONFIG": tf_config}, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and fragment in lines[0] and "TF_CONFIG" in lines[0], proc.stderr
    assert not out.exists()


def test_the_engine_floor_and_3_steps_a_call_train_what_one_step_a_call_trains(tmp_path,
                                                                                monkeypatch):
    """One one_device run of one step per call is the reference of two others. 3 steps per
    call (16 steps/epoch: chunks 3,3,3,3,3,1) train exactly what it trains, and --profile_steps
    leaves a TensorBoard profile of the chosen steps. The engine floor trains the same model,
    data, order, optimizer and rate in the plainest loop, and writes a record beside it."""
    # Neither entry point may depend on the caller's environment for its CPU kernels.
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    common = ["--model=mlp", *TINY, *NO_PROBES, f"--results_dir={tmp_path}", "--threads=1"]
    floor = run_module("experiments.comparison.floor", *common, "--run_name=engine_floor/x")
    assert floor.returncode == 0, floor.stderr[-3000:]
    for k, extra in ((1, []), (3, ["--profile_steps=4,9"])):
        proc = run_module("experiments.run", "--strategy=one_device", *common,
                          f"--steps_per_execution={k}", f"--run_name=k{k}", *extra)
        assert proc.returncode == 0, proc.stderr[-3000:]
    by_name = {r["run_name"]: r for r in records_in(tmp_path)}
    floor_rec, ours, k3 = by_name["engine_floor/x"], by_name["k1"], by_name["k3"]
    for record in (ours, k3):
        assert record["strategy"] == "one_device"
        assert [e["steps"] for e in record["epochs"]] == [16, 16]
    # The same step on the same batch shapes runs the same kernels, whatever the CPU: only the
    # dispatch differs, so the weights are equal to the bit (measured); 1e-6 spares the test a
    # kernel that reduced in another order on another call.
    assert k3["weights_checksum"] == pytest.approx(ours["weights_checksum"], rel=1e-6)
    assert "profile of steps 4-9 written" in proc.stdout
    assert glob.glob(str(tmp_path / "tensorboard" / k3["run_id"] / "plugins" / "profile" / "*" /
                         "*.xplane.pb"))
    assert floor_rec["strategy"] == "engine_floor" and floor_rec["threads_per_task"] == 1
    # Same model, data, order, optimizer and rate: the same training, whatever the engine.
    for key in ("steps_per_epoch", "global_batch_size", "learning_rate"):
        assert floor_rec[key] == ours[key]
    assert abs(floor_rec["final_eval_accuracy"] - ours["final_eval_accuracy"]) < 0.05
    for record in (floor_rec, ours):  # a single process is the whole run: all tasks measured
        # The same (oneDNN) kernels on every CPU: without them an AVX2 machine ran the
        # distributed input path at half speed (experiments/engine/tf_settings.py).
        assert record["environment"]["onednn"] is True
        assert record["cpu"]["scope"] == "all tasks" and record["cpu"]["cores_used"] > 0
        assert record["cpu"]["examples_per_cpu_second"] > 0


def test_engine_floor_is_one_device_only(tmp_path):
    proc = run_module("experiments.comparison.floor", "--strategy=mirrored", "--num_replicas=2",
                      f"--results_dir={tmp_path}/out", timeout=120)
    assert proc.returncode == 2 and "--strategy=mirrored" in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("cluster, strategy, choice", [
    ({"hosts": 1, "devices_per_host": 2}, "mirrored", "mirrored N=2"),
    # two hosts: a local cluster of 2 MWMS workers, the choice handed to every task
    ({"hosts": 2, "inter_host_gbps": 100}, "multi_worker_mirrored", "MWMS N=2"),
])
def test_auto_trains_the_plans_choice_and_records_it(tmp_path, cluster, strategy, choice):
    # A tiny MLP's profile (tests/experiments/config/test_auto.py checks the choice itself).
    profile, spec = tmp_path / "profile.json", tmp_path / "cluster.json"
    profile.write_text(json.dumps({
        "model": "mlp", "batch": 32, "compute_s": 0.002, "gradient_bytes": {"float32": 400000},
        "pull_bytes": 400000, "parameter_bytes": 400000, "optimizer_state_bytes": 400000}))
    spec.write_text(json.dumps(cluster))
    # one epoch, no probes: what is checked is the choice and where it ran
    proc = run_module("experiments.run", "--strategy=auto", f"--plan_profile={profile}",
                      f"--plan_cluster={spec}", "--model=mlp", *TINY, "--epochs=1", *NO_PROBES,
                      "--notensorboard", f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert f"auto: {choice} (" in proc.stdout and "the predictions are the profile's" not in \
        proc.stdout
    (record,) = records_in(tmp_path)
    assert record["strategy"] == strategy and record["num_replicas_in_sync"] == 2
    plan = record["config"]["plan"]
    assert plan["chosen"]["configuration"] == choice and plan["runners_up"]
    assert plan["chosen"]["settings"]["strategy"] == strategy
    assert plan["profile"] == str(profile) and plan["configurations"] > 3
    # the cluster pinned as a comparison's on these cores (2 one-thread MWMS workers on 2),
    # said in the choice, recorded, and done: the chief ran on its own core
    from tf_config.cores import placement
    pin = placement(strategy, 2, 0, 0, len(os.sched_getaffinity(0))).pinned
    assert bool_flag("pin_workers", pin) in proc.stdout.split("auto: ")[1].splitlines()[0]
    assert record["config"]["pin_workers"] is pin
    if pin:  # each worker on its own cores: the launcher's threads for 2 tasks
        from tf_config.cores import default_threads
        assert record["environment"]["process_cpus"] == default_threads(2)


# The wide MLP's profile measured here (experiments/adaptive/profile_here.py, 2026-11-26): its
# weights, gradients and momentum are ~120 MB per replica; its parameter-balanced cut into two
# stages puts 58% of the parameters on the first (stage_weight_shares).
WIDE_PROFILE = "docs/examples/profile_wide_mlp_here.json"


@pytest.mark.parametrize("cap", [75, 66])
def test_a_memory_cap_picks_a_split_whose_busiest_device_fits(tmp_path, cap):
    """Issue 29's memory check: a cap no data-parallel configuration meets makes --strategy=auto
    train a pipeline whose every stage's peak (estimated: on a CPU TensorFlow keeps one
    allocator for all logical devices) is under it; a cap the busiest stage would exceed (66
    MB: equal halves would be 61 MB, the first stage holds 71) is refused before anything is
    written."""
    spec = tmp_path / "cluster.json"
    spec.write_text(json.dumps({"hosts": 1, "devices_per_host": 2, "intra_host_gbps": 100.0,
                                "memory_per_device_mb": cap}))
    out = tmp_path / "out"
    proc = run_module("experiments.run", "--strategy=auto", f"--plan_profile={WIDE_PROFILE}",
                      f"--plan_cluster={spec}", "--model=wide_mlp", "--epochs=1",
                      # two steps: the stages' peaks are estimated from the model and the batch
                      "--train_examples=128", "--eval_examples=64", "--nocomm_probe",
                      "--nocompute_probe", "--notensorboard", f"--results_dir={out}")
    if cap == 66:
        assert proc.returncode == 2 and not out.exists()
        assert f"no configuration of 'wide_mlp' fits {cap} MB per device" in \
            proc.stderr.strip().splitlines()[-1]
        return
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    (record,) = records_in(out)
    plan = record["config"]["plan"]
    assert record["strategy"] == "model_parallel" and record["pipeline"]["num_stages"] == 2
    assert plan["dropped"] >= 3  # one device and mirrored, whatever else
    stages = [d["bytes"] for d in record["memory_per_device"]]
    assert len(stages) == 2 and max(stages) < cap * 1e6
    # what the plan predicted for the busiest device is what the run's stages hold
    predicted = plan["chosen"]["predicted_memory_per_device_bytes"]
    assert abs(predicted / max(stages) - 1) < 0.05, (predicted, stages)
