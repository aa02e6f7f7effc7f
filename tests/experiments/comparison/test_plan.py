"""The comparison's run plan: which cells run, with which flags, and what counts as done."""
import dataclasses
import os

import pytest

from experiments.comparison.config import Comparison
from experiments.comparison.plan import plan, same_run


def _config(models, workers, train_examples, strategies, **settings):
    """The default comparison with these models, worker counts, sizes and strategies (and any
    other settings)."""
    return dataclasses.replace(Comparison(), models=models, workers=workers,
                               train_examples=train_examples, strategies=strategies, **settings)


def _flags(argv):
    """{name: value} of a cell's flags (a flag without a value: True, as a record has it)."""
    return dict((f[2:], True) if "=" not in f else f[2:].split("=", 1) for f in argv[1:])


def test_scaling_plan_has_floors_baseline_reference_and_each_strategy_per_n():
    runs = dict(plan(_config(["mlp"], [1, 2], [4096], ["mirrored", "parameter_server"]),
                     available_cores=2))
    assert list(runs) == ["engine_floor/mlp/4096/r0", "engine_floor_all/mlp/4096/r0",
                          "baseline/mlp/4096/r0", "hardware_reference/mlp/4096/r0",
                          "mirrored-n1/mlp/4096/r0", "parameter_server-n1/mlp/4096/r0",
                          "engine_floor_shared/mlp/4096/r0",
                          "mirrored-n2/mlp/4096/r0", "parameter_server-n2/mlp/4096/r0"]
    # no collectives cell: only the network experiment has one
    assert not any(name.startswith("collectives-") for name in runs)
    assert runs["engine_floor/mlp/4096/r0"][0] == "experiments.comparison.floor"
    # right before the 2-worker clusters: how two 1-thread workers share this machine's cores
    # (pinned as the workers are: test_workers_that_fit_the_cores_get_cores_of_their_own)
    assert runs["engine_floor_shared/mlp/4096/r0"] == [
        "experiments.comparison.sharing", "--model=mlp", "--train_examples=4096",
        "--dataset=synthetic", "--threads=1", "--processes=2", "--pin_loops"]
    # one process with local replicas only (no cluster to predict), or no floors: no calibration
    for kwargs in ({"strategies": ["mirrored"]}, {"floors": False}):
        names = dict(plan(_config(["mlp"], [1, 2], [4096], kwargs.get("strategies", [
            "parameter_server"]), floors=kwargs.get("floors", True))))
        assert not any(n.startswith("engine_floor_shared") for n in names)
    assert runs["baseline/mlp/4096/r0"][0] == "experiments.run"
    assert "--num_ps=1" in runs["parameter_server-n2/mlp/4096/r0"]


def test_central_storage_runs_like_mirrored_one_process_n_replicas_n_threads():
    runs = dict(plan(_config(["mlp"], [1, 2], [4096], ["central_storage", "multi_worker_mirrored"],
                             experiments=("scaling", "straggler", "network"),
                             threads_per_worker=2, bandwidths=(0.1,), straggler_delays=(0, 25))))
    assert runs["central_storage-n2/mlp/4096/r0"][1:] == [
        "--model=mlp", "--train_examples=4096", "--dataset=synthetic",
        "--strategy=central_storage", "--num_replicas=2", "--threads=4"]
    assert _flags(runs["central_storage-n1/mlp/4096/r0"])["num_replicas"] == "1"
    # One process: no cluster to slow down or to put on a shaped network.
    assert not [name for name in runs if name.startswith(("straggler-central", "network-central"))]
    assert "straggler-multi_worker_mirrored-n2-d25/mlp/4096/r0" in runs


@pytest.mark.parametrize("threads", [1, 3])
def test_every_strategy_at_n_gets_the_same_threads_per_worker(threads):
    # On an 8-core machine the launcher's default (cores // tasks) gave MWMS workers 4 threads,
    # PSS workers 2 (chief and ps counted) and the baseline 1: the plan sets them explicitly.
    runs = dict(plan(_config(["cnn"], [2], [4096], ["mirrored", "multi_worker_mirrored",
                                                     "parameter_server"],
                             threads_per_worker=threads)))
    assert _flags(runs["baseline/cnn/4096/r0"])["threads"] == str(threads)
    assert _flags(runs["multi_worker_mirrored-n2/cnn/4096/r0"])["threads_per_worker"] == \
        _flags(runs["parameter_server-n2/cnn/4096/r0"])["threads_per_worker"] == str(threads)
    assert _flags(runs["mirrored-n2/cnn/4096/r0"])["threads"] == str(2 * threads)


@pytest.mark.parametrize("threads, available, pinned_at", [(1, 2, {2}), (1, 4, {2, 3, 4}),
                                                         (2, 2, set()), (1, 1, set())])
def test_workers_that_fit_the_cores_get_cores_of_their_own(threads, available, pinned_at):
    """--pin_workers (and the calibration's --pin_loops) exactly where N >= 2 workers of
    `threads` threads fit the available cores, in every cell that launches such a cluster, and
    for one PSS worker where a core is left for its ps and chief; never for one process (one
    MWMS worker, mirrored's replicas, the floors)."""
    strategies = ["mirrored", "multi_worker_mirrored", "parameter_server"]
    # a list: the calibration's cells at each N share one name
    runs = plan(_config(["cnn"], [1, 2, 3, 4], [4096], strategies, threads_per_worker=threads,
                        experiments=("scaling", "straggler", "network", "reducers"),
                        straggler_delays=(0, 25), bandwidths=(0, 0.1), reducers=("int8",)),
                available_cores=available)
    for name, argv in runs:
        cell = name.split("/")[0]
        n = int(_flags(argv).get("num_workers") or _flags(argv).get("processes") or 1)
        local_cluster = "--num_workers=%d" % n in argv or cell.startswith("engine_floor_shared")
        lone_pss = n == 1 and "--strategy=parameter_server" in argv and threads < available
        expected = local_cluster and (n in pinned_at or lone_pss)
        flag = "--pin_loops" if cell.startswith("engine_floor_shared") else "--pin_workers"
        assert (flag in argv) == expected, (name, argv)
        assert "--pin_workers" not in argv or not cell.startswith(("mirrored", "engine_floor",
                                                                   "baseline", "hardware"))
    if pinned_at:  # every kind of cluster cell at N=2 is among them
        pinned = {name.split("/")[0] for name, argv in runs
                  if "--pin_workers" in argv or "--pin_loops" in argv}
        assert {"engine_floor_shared", "collectives-multi_worker_mirrored-n2-b0.2",
                "multi_worker_mirrored-n2", "parameter_server-n2",
                "straggler-multi_worker_mirrored-n2-d25", "network-parameter_server-n2-b0.1",
                "reducers-int8-n2-b0.1"} <= pinned


def test_pinned_plan_gives_each_cell_its_workers_cores():
    runs = dict(plan(_config(["cnn"], [1, 2], [4096], ["parameter_server"], pin_cores=True),
                     available_cores=8))
    pins = {name.split("/")[0]: _flags(argv)["pin_cores"] for name, argv in runs.items()}
    assert pins == {"engine_floor": "1", "engine_floor_all": "8", "baseline": "1",
                    "hardware_reference": "8", "parameter_server-n1": "1",
                    "engine_floor_shared": "2", "parameter_server-n2": "2"}
    assert not any("pin_cores" in f for argv in dict(plan(_config(["cnn"], [2], [4096], [
        "parameter_server"]))).values() for f in argv)
    # one PSS worker held to one core has none to leave its ps and chief: not called pinned;
    # two workers on their two cores still are
    assert "--pin_workers" not in runs["parameter_server-n1/cnn/4096/r0"]
    assert "--pin_workers" in runs["parameter_server-n2/cnn/4096/r0"]
    unpinned = dict(plan(_config(["cnn"], [1], [4096], ["parameter_server"]), available_cores=8))
    assert "--pin_workers" in unpinned["parameter_server-n1/cnn/4096/r0"]


def test_a_cell_is_done_only_with_the_same_flags(monkeypatch):
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "1")
    record = {"run_name": "mirrored-n2/cnn/4096/r0", "environment": {"onednn_opts": "1"},
              "config": {"strategy": "mirrored", "threads": 2, "epochs": 4,
                         "straggler_delay_ms": 50.0}}
    flags = ["--strategy=mirrored", "--threads=2", "--epochs=4", "--straggler_delay_ms=50"]
    assert same_run(record, "mirrored-n2/cnn/4096/r0", flags)
    assert not same_run(record, "mirrored-n2/cnn/4096/r1", flags)
    assert not same_run(record, "mirrored-n2/cnn/4096/r0", flags[:-1] + ["--epochs=5"])
    assert not same_run(record, "mirrored-n2/cnn/4096/r0", flags + ["--pin_cores=2"])
    # ... and with the same CPU kernels: a record from before the setting, or under another
    # value, ran other kernels and is run again.
    assert not same_run({**record, "environment": {}}, "mirrored-n2/cnn/4096/r0", flags)
    # boolean flags and the emulated network (recorded under `network`) resume too
    swept = {**record, "config": {**record["config"], "compute_probe": True,
                                  "comm_probe": False}, "network": {"emulated_gbps": 0.2}}
    assert same_run(swept, "mirrored-n2/cnn/4096/r0",
                    flags + ["--compute_probe", "--nocomm_probe", "--emulate_bandwidth_gbps=0.2"])
    assert not same_run(swept, "mirrored-n2/cnn/4096/r0", flags + ["--emulate_bandwidth_gbps=1"])
    assert not same_run(record, "mirrored-n2/cnn/4096/r0", flags + ["--compute_probe"])
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
    assert not same_run(record, "mirrored-n2/cnn/4096/r0", flags)


def test_straggler_plan_slows_the_last_worker_of_each_multi_worker_strategy():
    runs = dict(plan(_config(["mlp"], [1], [4096], ["mirrored", "multi_worker_mirrored",
                                                    "parameter_server"],
                             experiments=["straggler"], straggler_delays=[0, 50],
                             straggler_workers=3)))
    assert sorted(runs) == ["straggler-multi_worker_mirrored-n3-d0/mlp/4096/r0",
                            "straggler-multi_worker_mirrored-n3-d50/mlp/4096/r0",
                            "straggler-parameter_server-n3-d0/mlp/4096/r0",
                            "straggler-parameter_server-n3-d50/mlp/4096/r0"]
    slowed = runs["straggler-parameter_server-n3-d50/mlp/4096/r0"]
    assert "--straggler_task=worker:2" in slowed and "--straggler_delay_ms=50" in slowed
    assert "--num_workers=3" in slowed
    assert not any("straggler_task" in f for f in runs[
        "straggler-multi_worker_mirrored-n3-d0/mlp/4096/r0"])


def test_calibrated_size_fits_the_budget_on_slow_and_fast_machines():
    from experiments.comparison.plan import SIZE_QUANTUM, calibrated_size

    fast = calibrated_size(300, 10, 4, rate=4000, overhead_s=8, largest=16384)
    slow = calibrated_size(300, 10, 4, rate=1000, overhead_s=12, largest=16384)
    assert fast == 16384 and slow < fast and slow % SIZE_QUANTUM == 0
    for size, rate, overhead in ((fast, 4000, 8), (slow, 1000, 12)):
        assert 10 * (overhead * 1.5 + 4 * size / rate) <= 300
    assert calibrated_size(10, 10, 4, rate=1000, overhead_s=30, largest=16384) == SIZE_QUANTUM


def test_zoo_plan_runs_each_model_on_its_data_without_floors():
    from experiments.comparison.presets import ZOO_SIZES

    models = ["resnet", "wide_mlp", "embedding"]
    runs = dict(plan(_config(models, [2], (), ["mirrored", "multi_worker_mirrored",
                                               "parameter_server"],
                             model_examples=ZOO_SIZES, floors=False)))
    assert len(runs) == 15 and not any(n.startswith("engine_floor") for n in runs)
    assert _flags(runs["baseline/embedding/8192/r0"])["dataset"] == "synthetic_tokens"
    assert _flags(runs["parameter_server-n2/resnet/1536/r0"])["dataset"] == "synthetic_cifar"
    assert _flags(runs["hardware_reference/wide_mlp/3072/r0"])["dataset"] == "synthetic"


def test_zoo_dry_run_prints_the_plan_and_runs_nothing(tmp_path):
    from tests.helpers import run_module

    out = tmp_path / "zoo"
    proc = run_module("experiments.compare", "--preset=zoo", "--dry_run",
                      f"--results_dir={out}", timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == "compare: 15 runs planned (--dry_run: none made)"
    assert lines[0].startswith("baseline/resnet/1536/r0: python -m experiments.run "
                               "--model=resnet --train_examples=1536 --dataset=synthetic_cifar")
    assert not out.exists()


def test_compare_takes_your_model_and_refuses_a_missing_one(tmp_path):
    from tests.helpers import run_module

    ok = run_module("experiments.compare", "--models=examples.two_branch:build_model",
                    "--dataset=examples.two_branch:make_dataset", "--workers=2",
                    "--train_examples=2048", "--dry_run", f"--results_dir={tmp_path}", timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert "--dataset=examples.two_branch:make_dataset" in ok.stdout.splitlines()[0]
    bad = run_module("experiments.compare", "--models=no_such_module:build", "--dry_run",
                     timeout=60)
    assert bad.returncode == 2
    assert bad.stderr.strip().startswith("error: --model=no_such_module:build: module")


def test_resuming_keeps_the_size_the_comparison_started_with():
    from experiments.comparison.plan import size_started

    records = [{"model": "cnn", "config": {"train_examples": 8192}},
               {"model": "mlp", "config": {"train_examples": 5000}},
               {"model": "cnn", "config": {"train_examples": 12288}}]
    assert size_started(records, "cnn") == 12288  # records come sorted by time: the latest
    assert size_started(records, "resnet") is None
    assert size_started([], "cnn") is None


def test_network_plan_fits_on_the_real_loopback_and_shapes_the_two_worker_runs():
    runs = plan(_config(["cnn"], [1, 2], [4096], ["mirrored", "multi_worker_mirrored"],
                        experiments=("network",), bandwidths=[0.1, 0.0]))
    by_name = {name.split("/")[0]: argv for name, argv in runs}
    assert sorted(by_name) == ["collectives-multi_worker_mirrored-n2-b0.2",
                               "network-multi_worker_mirrored-n1",
                               "network-multi_worker_mirrored-n2-b0",
                               "network-multi_worker_mirrored-n2-b0.1"]  # no mirrored: no network
    assert "--emulate_bandwidth_gbps=0.1" in by_name["network-multi_worker_mirrored-n2-b0.1"]
    assert not any(a.startswith("--emulate") for a in by_name["network-multi_worker_mirrored-n2-b0"])
    assert "--num_workers=2" in by_name["network-multi_worker_mirrored-n2-b0.1"]
    # the all-reduce's calibration: a collectives cell under twice the fastest shaped bandwidth
    calibration = by_name["collectives-multi_worker_mirrored-n2-b0.2"]
    assert {"--emulate_bandwidth_gbps=0.2", "--num_workers=2"} <= set(calibration)
    pss = plan(_config(["cnn"], [1, 2], [4096], ["parameter_server"], experiments=("network",),
                       bandwidths=[0.1, 0.0]))
    assert not any(name.startswith("collectives-") for name, _ in pss)  # measured: in series


def test_accumulation_sweep_runs_every_cell_at_each_k_but_the_calibrations():
    runs = dict(plan(_config(["mlp"], [2], [4096], ["multi_worker_mirrored"],
                             accumulation_steps=(1, 4), experiments=("scaling", "network"),
                             bandwidths=(0.1,))))
    assert list(runs) == ["engine_floor/mlp/4096/r0", "engine_floor_all/mlp/4096/r0",
                          "baseline/mlp/4096/r0", "hardware_reference/mlp/4096/r0",
                          "engine_floor_shared/mlp/4096/r0",
                          "multi_worker_mirrored-n2/mlp/4096/r0",
                          "network-multi_worker_mirrored-n1/mlp/4096/r0",
                          "network-multi_worker_mirrored-n2-b0.1/mlp/4096/r0",
                          "collectives-multi_worker_mirrored-n2-b0.2/mlp/4096/r0",
                          "baseline/mlp/4096/k4/r0", "hardware_reference/mlp/4096/k4/r0",
                          "multi_worker_mirrored-n2/mlp/4096/k4/r0",
                          "network-multi_worker_mirrored-n1/mlp/4096/k4/r0",
                          "network-multi_worker_mirrored-n2-b0.1/mlp/4096/k4/r0"]
    assert _flags(runs["multi_worker_mirrored-n2/mlp/4096/k4/r0"])["accumulation_steps"] == "4"
    assert "accumulation_steps" not in _flags(runs["baseline/mlp/4096/r0"])  # K=1: as before


def test_accumulation_sweep_cli_dry_run_and_bad_input(tmp_path):
    from tests.helpers import run_module

    proc = run_module("experiments.compare", "--strategies=multi_worker_mirrored", "--workers=2",
                      "--models=mlp", "--train_examples=4096", "--accumulation_steps=1,2",
                      "--dry_run", f"--results_dir={tmp_path / 'o'}", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "multi_worker_mirrored-n2/mlp/4096/k2/r0: python -m experiments.run" in proc.stdout
    assert "--accumulation_steps=2" in proc.stdout
    bad = run_module("experiments.compare", "--accumulation_steps=0", "--dry_run",
                     f"--results_dir={tmp_path / 'o'}", timeout=120)
    assert bad.returncode == 2 and "--accumulation_steps=0" in bad.stderr
    assert not (tmp_path / "o").exists()


def test_parallelism_plan_runs_every_configuration_at_one_global_batch_and_core_budget():
    runs = dict(plan(_config(["cnn"], [2], [4096], [], experiments=("parallelism",),
                             floors=False, threads_per_worker=1, batch_size_per_replica=64)))
    assert list(runs) == [f"parallel-{c}/cnn/4096/r0" for c in (
        "one_device", "mwms-n2", "model_parallel-s2-m1", "model_parallel-s2-m4",
        "hybrid-n2-s2-m4")]
    flags = {name.split("/")[0]: _flags(argv) for name, argv in runs.items()}
    assert {f["global_batch_size"] for f in flags.values()} == {"128"}
    # One process gets both cores; each of the 2 workers one.
    assert flags["parallel-one_device"]["threads"] == "2"
    assert flags["parallel-model_parallel-s2-m4"]["threads"] == "2"
    assert flags["parallel-mwms-n2"]["threads_per_worker"] == "1"
    assert flags["parallel-hybrid-n2-s2-m4"]["threads_per_worker"] == "1"
    assert flags["parallel-model_parallel-s2-m1"]["microbatches"] == "1"
    assert flags["parallel-hybrid-n2-s2-m4"]["num_stages"] == "2"
    assert flags["parallel-hybrid-n2-s2-m4"]["strategy"] == "hybrid"


def test_transformers_plan_splits_the_blocks_and_shares_cells_with_parallelism():
    runs = dict(plan(_config(["vit"], [2], [2048], [], experiments=("transformers",),
                             floors=False, threads_per_worker=1, batch_size_per_replica=64)))
    flags = {name.split("/")[0]: _flags(argv) for name, argv in runs.items()}
    assert list(flags) == [f"parallel-{c}" for c in (
        "one_device", "mwms-n2", "model_parallel-s2-m4", "model_parallel-s2-m4-1f1b",
        "tensor-t2", "hybrid-n2-t2", "auto")]
    assert {f["global_batch_size"] for f in flags.values()} == {"128"}
    assert flags["parallel-model_parallel-s2-m4-1f1b"]["pipeline_schedule"] == "1f1b"
    assert flags["parallel-tensor-t2"]["tensor_parallel"] == "2"
    assert flags["parallel-hybrid-n2-t2"]["strategy"] == "hybrid"
    assert flags["parallel-auto"]["plan_cluster"].endswith("cluster_this_machine_1x2.json")
    # with the parallelism experiment too: one run per name, the same flags under each name
    both = plan(_config(["vit"], [2], [2048], [], experiments=("parallelism", "transformers"),
                        floors=False, threads_per_worker=1, batch_size_per_replica=64))
    names = [name for name, _ in both]
    assert len(names) == len(set(names)) == 5 + 4  # 3 of the 7 are parallelism's
    assert dict(both)["parallel-model_parallel-s2-m4/vit/2048/r0"] == \
        runs["parallel-model_parallel-s2-m4/vit/2048/r0"]


def test_parallelism_preset_dry_run(tmp_path):
    from tests.helpers import run_module

    out = tmp_path / "par"
    proc = run_module("experiments.compare", "--preset=parallelism", "--dry_run",
                      f"--results_dir={out}", timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == "compare: 10 runs planned (--dry_run: none made)"
    assert any("parallel-hybrid-n2-s2-m4/wide_mlp/3072/r0" in ln for ln in lines)
    assert not out.exists()


def test_a_flag_given_twice_resumes_by_its_last_value_and_sweeps_do_not_set_the_size():
    """A collectives cell (the network experiment's calibration) gets the comparison's
    --train_examples and then its own: absl keeps the last, and so must resuming; and a
    comparison resumed after one keeps its own size."""
    from experiments.comparison.plan import size_started
    runs = dict(plan(_config(["cnn"], [1, 2], [8192], ["multi_worker_mirrored"],
                             experiments=("network",), bandwidths=(0.1,))))
    name = "collectives-multi_worker_mirrored-n2-b0.2/cnn/8192/r0"
    argv = runs[name]
    assert [f for f in argv if f.startswith("--train_examples=")] == [
        "--train_examples=8192", "--train_examples=4096"]
    record = {"run_name": name, "model": "cnn",
              "network": {"emulated_gbps": 0.2, "method": "tc tbf"},
              "environment": {"onednn_opts": os.environ.get("TF_ENABLE_ONEDNN_OPTS")},
              "config": {**_flags(argv), "train_examples": "4096"}}
    assert same_run(record, name, argv[1:])
    earlier = {"run_name": "baseline/cnn/8192/r0", "model": "cnn",
               "config": {"train_examples": 8192}}
    assert size_started([earlier, record], "cnn") == 8192


def test_reducers_plan_runs_plain_mwms_and_each_reducer_at_each_bandwidth():
    from experiments.comparison import options

    resolve = lambda **kw: options.resolve(  # noqa: E731
        "reducers", strategies=["multi_worker_mirrored"], **kw)
    opts = resolve(reducers=["int8", "packs:4096"])
    # each model at its own bandwidths (wide_mlp's plain step would take 7 s at 0.1)
    assert {m: opts.bandwidths_of(m) for m in opts.models} == {
        "cnn": (0.1, 1.0, 0.0), "wide_mlp": (1.0, 5.0, 0.0), "embedding": (0.1, 1.0, 0.0)}
    assert opts.experiments == ("reducers",)
    given = resolve(bandwidths=["0.5", "0"])  # the command line's: every model's
    assert {given.bandwidths_of(m) for m in given.models} == {(0.5, 0.0)}
    runs = dict(plan(dataclasses.replace(opts, models=("cnn", "wide_mlp"), workers=(2,),
                                         train_examples=(4096,))))
    assert len(runs) == 18  # (plain, int8, packs) x 3 bandwidths x 2 models
    assert "reducers-int8-n2-b5/wide_mlp/4096/r0" in runs
    int8 = _flags(runs["reducers-int8-n2-b0.1/cnn/4096/r0"])
    assert (int8["strategy"], int8["num_workers"], int8["compression"],
            int8["emulate_bandwidth_gbps"]) == ("multi_worker_mirrored", "2", "int8", "0.1")
    assert _flags(runs["reducers-packs4096-n2-b0/cnn/4096/r0"])["bytes_per_pack"] == "4096"
    assert "emulate_bandwidth_gbps" not in _flags(runs["reducers-none-n2-b0/cnn/4096/r0"])
    for bad, said in (("packs:x", "packs:BYTES takes a positive number of bytes"),
                      ("topk:9", "--reducers: --compression='topk:9' is not valid"),
                      ("none", "'none' is not a reducer")):
        with pytest.raises(ValueError, match=said):
            resolve(reducers=[bad])


def test_the_size_calibration_times_the_comparisons_dataset(monkeypatch):
    # the embedding's plain loop refuses image data: before, `compare --models=embedding`
    # failed in its calibration (the floor ran without --dataset)
    from experiments.comparison import runner

    asked = []

    def fake_run_record(flags, module):
        asked.append((module, flags))
        return {"steady_state": {"examples_per_sec": {"median": 5000.0}},
                "epochs": [{"time_s": 1.0}, {"time_s": 0.5}]}, 3.0

    monkeypatch.setattr(runner, "run_record", fake_run_record)
    runner.calibrate("embedding", 3, 7, 300, 16384, 1, "synthetic_tokens")
    runner.calibrate("cnn", 3, 7, 300, 16384, 1)
    assert asked[0][0] == "experiments.comparison.floor"
    assert "--dataset=synthetic_tokens" in asked[0][1]
    assert not any(f.startswith("--dataset") for f in asked[1][1])  # the model's own


@pytest.mark.parametrize("available, pinned", [(2, True), (1, False)])
def test_the_presets_two_worker_cells_are_pinned_as_their_auto_cells_are(available, pinned):
    """The parallelism, transformer and adaptive presets' MWMS and PSS N=2 cells pin their
    workers by the rule the --strategy=auto / --adapt cells beside them follow
    (tf_config.cores.placement): one device, pipelines and hybrids never."""
    runs = dict(plan(_config(["cnn"], [2], [4096], ["multi_worker_mirrored"],
                             threads_per_worker=1,
                             experiments=("parallelism", "transformers", "adaptive")),
                     available_cores=available))
    two = {name.split("/")[0] for name in runs if name.split("/")[0].endswith(("-mwms-n2",
                                                                               "-pss-n2"))}
    assert len(two) == 7  # parallel-mwms-n2 and the three scenarios' MWMS and PSS
    for name, argv in runs.items():
        cell = name.split("/")[0]
        if cell in two:
            assert ("--pin_workers" in argv) is pinned, (name, argv)
        elif not cell.endswith("-auto"):
            assert "--pin_workers" not in argv, (name, argv)


def test_presets_are_comparisons_and_the_command_line_lays_its_values_over_one():
    from experiments.comparison import options
    from experiments.comparison.presets import PRESETS, ZOO_SIZES, register

    for name, preset in PRESETS.items():  # each passes the command line's checks
        assert options.resolve(name) == preset
    with pytest.raises(ValueError, match="registered already"):
        register("zoo", Comparison())
    # an empty list keeps the preset's; given sizes are every model's and end the calibration
    zoo = options.resolve("zoo", models=[], workers=[], threads_per_worker=2)
    assert (zoo.models, zoo.workers, zoo.threads_per_worker, zoo.results_dir) == (
        PRESETS["zoo"].models, (2,), 2, "runs/zoo")
    assert zoo.train_examples_of("resnet") == (ZOO_SIZES["resnet"],)
    sized = options.resolve("default", train_examples=["2048", "4096"])
    assert sized.train_examples_of("cnn") == (2048, 4096) and not sized.calibrate
    assert PRESETS["default"].calibrate
    with pytest.raises(TypeError, match="floors"):  # a preset's own setting
        options.resolve("default", floors=False)
