"""The planner: configurations enumerated on a cluster, predicted by the one cost model, dropped
by memory with the reason, ranked; the commands of the best are valid run flags."""
import dataclasses

import pytest

from experiments.config import RunConfig, validate
from experiments.config import planned_run
from results.model import cost_model, planner, specs
from strategies import kind

PROFILE = specs.WorkloadProfile(
    model="cnn", batch=64, compute_s=0.02, gradient_bytes={"float32": 40_000_000},
    pull_bytes=40_000_000, parameter_bytes=40_000_000, optimizer_state_bytes=40_000_000,
    activation_bytes=10_000_000, overhead_s={"multi_worker_mirrored": 0.001,
                                             "parameter_server": 0.002})
CLUSTER = specs.ClusterSpec(hosts=4, devices_per_host=2, inter_host_gbps=10.0)
PIPELINED = dataclasses.replace(PROFILE, boundary_activation_bytes=50_000)


def _by_name(planned):
    return {p.config.name: p for p in planned}


def test_predictions_use_whole_hosts_and_are_ranked():
    planned = planner.plan(PROFILE, CLUSTER)
    for p in planned:
        c = p.config
        assert c.hosts * c.devices_per_host == c.workers, c  # no idle device, none extra
        if kind(c.strategy).parameter_servers:
            assert c.devices_per_host == 1 and c.hosts <= CLUSTER.hosts
    # the 8-device all-reduce: 4 hosts' rings of 2 then across the 4 hosts, as specified
    mwms = _by_name(planned)["MWMS N=8 (4x2)"].prediction
    ring = 2 * 1 / 2 * 40e6 * 8 / 100e9 + 2 * 5e-6 + 2 * 3 / 4 * 40e6 * 8 / 10e9 + 2 * 3 * 50e-6
    assert mwms.communication_s == pytest.approx(ring)
    assert mwms.step_s == pytest.approx(0.02 + 0.001 + ring)
    # ranked fastest first among those that fit
    rates = [p.prediction.examples_per_sec for p in planned if not p.dropped]
    assert rates == sorted(rates, reverse=True)


def test_device_counts_that_do_not_fill_whole_hosts_are_not_planned():
    three = dataclasses.replace(CLUSTER, devices_per_host=3)  # 12 devices
    ns = {c.workers for c in planner.configurations(PROFILE, three)
          if c.strategy == "multi_worker_mirrored"}
    assert ns == {2, 12}  # 2 on one host; 4 and 8 would leave devices of a host idle


def test_device_counts_and_layout_fill_a_host_first():
    counts = planner.device_counts(CLUSTER)
    assert counts == [2, 4, 8]
    layouts = {(c.strategy, c.workers, c.hosts, c.devices_per_host)
               for c in planner.configurations(PROFILE, CLUSTER)}
    assert {("multi_worker_mirrored", 2, 1, 2), ("multi_worker_mirrored", 4, 2, 2),
            ("multi_worker_mirrored", 8, 4, 2), ("one_device", 1, 1, 1),
            ("parameter_server", 4, 4, 1)} <= layouts
    # a PSS worker per host: never more workers than hosts
    assert ("parameter_server", 8, 4, 2) not in layouts
    assert all(c.num_ps <= c.workers for c in planner.configurations(PROFILE, CLUSTER))


def test_accumulation_amortizes_the_synchronization_on_a_slow_network():
    slow = dataclasses.replace(CLUSTER, inter_host_gbps=1.0)
    planned = _by_name(planner.plan(PROFILE, slow))
    one, four = planned["MWMS N=8 (4x2)"], planned["MWMS N=8 (4x2) accum=4"]
    assert four.global_batch == 4 * one.global_batch
    assert four.prediction.communication_share < one.prediction.communication_share
    assert four.prediction.examples_per_sec > one.prediction.examples_per_sec
    half = planned["MWMS N=8 (4x2) bfloat16"]
    assert half.prediction.communication_s == pytest.approx(one.prediction.communication_s / 2,
                                                            rel=0.05)


def test_what_does_not_fit_is_dropped_with_the_reason_and_never_best():
    # MWMS holds the optimizer state on each device, PSS leaves it on the parameter servers
    mwms = cost_model.memory_per_device(PROFILE, "multi_worker_mirrored")
    pss = cost_model.memory_per_device(PROFILE, "parameter_server")
    cap_mb = (mwms + pss) / 2 / 1e6
    planned = planner.plan(PROFILE, dataclasses.replace(CLUSTER, memory_per_device_mb=cap_mb))
    dropped = [p for p in planned if p.dropped]
    # ZeRO-1 keeps 1/N of the optimizer state: under the cap from N = 2 on
    assert dropped and all(p.config.strategy != "parameter_server" and not p.config.zero
                           for p in dropped)
    assert all(f"over the {cap_mb:g} MB cap" in p.dropped for p in dropped)
    best = planner.best(planned)
    assert (best.config.strategy == "parameter_server" or best.config.zero) and not best.dropped
    # an impossible cap: nothing fits, no best
    assert planner.best(planner.plan(PROFILE, dataclasses.replace(
        CLUSTER, memory_per_device_mb=1))) is None


def test_zero_shards_the_optimizer_state_and_moves_the_parameters_bytes():
    """ZeRO-1 on N hosts of one device: 1/N of the optimizer state each, plus its copy of 1/N
    of the parameters; reduce-scatter + all-gather move a ring all-reduce's bytes of the
    parameters, after the backward (no overlap); plain MWMS wins the tie; not offered on hosts
    of several devices (a ZeRO worker holds one replica); refused outside MWMS."""
    single = dataclasses.replace(CLUSTER, hosts=8, devices_per_host=1)
    planned = _by_name(planner.plan(PROFILE, single))
    plain, sharded = planned["MWMS N=8"], planned["MWMS N=8 ZeRO-1"]
    state = PROFILE.optimizer_state_bytes
    assert plain.prediction.memory_per_device_bytes - \
        sharded.prediction.memory_per_device_bytes == \
        state - state // 8 - PROFILE.parameter_bytes // 8  # its copy of its shard
    assert sharded.prediction.communication_s == pytest.approx(
        cost_model.allreduce_s(PROFILE.parameter_bytes, single))
    assert not sharded.changes and sharded.global_batch == plain.global_batch
    assert planned_run.settings(sharded.config)["zero"] == 1
    assert "--zero=1" in planned_run.run_flags(sharded.config, planned_run.CommandTarget("cnn", 64))
    order = [p.config.name for p in planner.plan(PROFILE, single)]
    assert order.index("MWMS N=8") < order.index("MWMS N=8 ZeRO-1")
    assert not [p for p in planner.plan(PROFILE, CLUSTER) if p.config.zero]  # 2 per host
    with pytest.raises(specs.SpecError, match="ZeRO-1 under parameter_server"):
        cost_model.predict(PROFILE, CLUSTER, "parameter_server", zero=1)


def test_the_best_trains_what_the_profile_trained():
    best = planner.best(planner.plan(PROFILE, CLUSTER))
    assert best.config.accumulation == 1 and best.config.sync_dtype == "float32"


@pytest.mark.parametrize("name", ["1 device", "mirrored N=2", "MWMS N=8 (4x2) accum=2 bfloat16",
                                  "PSS N=4 ps=2", "pipeline N=2 S=2 M=4",
                                  "hybrid N=8 (4x2) S=2 M=8"])
def test_the_printed_run_flags_are_valid_runs(name, tmp_path):
    config = _by_name(planner.plan(PIPELINED, CLUSTER))[name].config
    workload = planned_run.CommandTarget("embedding", 32, "synthetic_tokens")
    values = dict(f[2:].split("=", 1) for f in planned_run.run_flags(config, workload))
    assert (values["model"], values["dataset"], values["batch_size_per_replica"]) == (
        "embedding", "synthetic_tokens", "32")
    fields = {f.name: f.type for f in dataclasses.fields(RunConfig)}
    cfg = RunConfig(results_dir=str(tmp_path), **{k: fields[k](v) for k, v in values.items()})
    validate(cfg)
    strategy, workers, replicas, _ = planner.tasks(config)
    assert cfg.strategy == strategy
    assert cfg.num_workers == workers
    assert workers * replicas * config.stages == config.workers
    if kind(strategy).local_replicas:  # MWMS and PSS workers take their host's devices
        assert cfg.num_replicas == replicas


def test_a_command_for_one_machine_pins_as_its_target_says():
    """experiments.plan for a cluster on one machine (machine_cores) gives CommandTarget the
    rule a comparison pins by (experiments/config/auto.py pinned): the printed command pins
    where it says, and only then."""
    config = _by_name(planner.plan(PIPELINED, CLUSTER))["PSS N=4 ps=2"].config
    asked = []

    def pinned(values):
        asked.append(values)
        return values["num_workers"] == 4

    flags = planned_run.run_flags(config, planned_run.CommandTarget("cnn", 64, pinned=pinned))
    assert "--pin_workers" in flags and asked == [planned_run.settings(config)]
    assert "--pin_workers" not in planned_run.run_flags(
        config, planned_run.CommandTarget("cnn", 64, pinned=lambda values: False))
    assert "--pin_workers" not in planned_run.run_flags(config,
                                                        planned_run.CommandTarget("cnn", 64))


def test_pipelines_are_planned_only_when_the_profile_says_what_crosses_a_boundary():
    assert not any(c.stages > 1 for c in planner.configurations(PROFILE, CLUSTER))
    planned = _by_name(planner.plan(PIPELINED, CLUSTER))
    pipe, hybrid = planned["pipeline N=2 S=2 M=4"], planned["hybrid N=8 (4x2) S=2 M=4"]
    # GPipe's bubble: S=2, M=4 computes 5 slots of compute / 8, plus the boundary both ways
    transfer = 2 * (64 / 4 * 50_000 * 8 / (CLUSTER.intra_host_gbps * 1e9)
                    + CLUSTER.intra_host_latency_us * 1e-6)
    assert pipe.prediction.step_s == pytest.approx(0.02 / 2 * 5 / 4 + transfer)
    # more micro-batches, a smaller bubble
    assert planned["pipeline N=2 S=2 M=8"].prediction.compute_s < pipe.prediction.compute_s
    # a device holds half the model; hybrid all-reduces the whole gradient across the 4 hosts
    assert pipe.prediction.memory_per_device_bytes == cost_model.memory_per_device(
        PROFILE, "multi_worker_mirrored") // 2
    ring = cost_model.allreduce_s(40_000_000, dataclasses.replace(CLUSTER, devices_per_host=1))
    assert hybrid.prediction.communication_s == pytest.approx(transfer + ring)
    assert hybrid.global_batch == 4 * 64


def test_measured_reducers_are_planned_under_all_reduce_as_changes():
    """A slow network: top-k's tenth of the bytes (all-gathered: 7 x 4 MB through a host's link
    at N=8, against the ring's 1.5 x 40 MB) wins, is listed with what it changes, and is never
    the best (which trains what the profile trained); its flags are a valid run."""
    profile = dataclasses.replace(PROFILE, reducers={"topk:0.05": {
        "payload_bytes": 4_000_000, "exchange": "gather", "compress_s": 0.002,
        "state_bytes": 40_000_000}})
    slow = dataclasses.replace(CLUSTER, inter_host_gbps=1.0)
    planned = planner.plan(profile, slow)
    names = _by_name(planned)
    topk = names["MWMS N=8 (4x2) topk:0.05"]
    assert topk.changes == "gradients compressed (topk:0.05, error feedback)"
    assert topk.prediction.examples_per_sec > names["MWMS N=8 (4x2)"].prediction.examples_per_sec
    assert not any(p.config.compression != "none" for p in planned
                   if kind(p.config.strategy).parameter_servers)
    assert planner.best(planned).config.compression == "none"
    flags = planned_run.run_flags(topk.config, planned_run.CommandTarget("cnn", 64))
    assert "--compression=topk:0.05" in flags


TRANSFORMER = dataclasses.replace(PIPELINED, model="gpt", tensor_reduced_bytes=131_072,
                                  tensor_reductions=16, tensor_shards=[2, 4])


def test_tensor_splits_are_planned_within_a_host_and_run_as_valid_flags():
    one_host = specs.ClusterSpec(hosts=2, devices_per_host=4, intra_host_gbps=100.0)
    planned = _by_name(planner.plan(TRANSFORMER, one_host))
    # tensor parallel alone, with a pipeline, and one split per host under hybrid
    for name in ("pipeline N=2 S=1 M=1 T=2", "pipeline N=4 S=1 M=1 T=4",
                 "pipeline N=4 S=2 M=4 T=2", "hybrid N=4 (2x2) S=1 M=1 T=2"):
        assert name in planned, sorted(planned)
    assert not any("T=" in n for n in _by_name(planner.plan(PIPELINED, one_host)))
    assert not any(c.stages * c.tensor_parallel > 4 for c in
                   (p.config for p in planned.values()))
    split = planned["hybrid N=4 (2x2) S=1 M=1 T=2"]
    assert split.global_batch == 2 * TRANSFORMER.batch  # one replica per host
    flags = planned_run.run_flags(split.config, planned_run.CommandTarget("gpt", 64,
                                                                  "synthetic_sequences"))
    assert "--tensor_parallel=2" in flags and "--strategy=hybrid" in flags
    validate(RunConfig(**{f.split("=")[0][2:]: _typed(f) for f in flags}))


def _typed(flag):
    key, value = flag[2:].split("=")
    return int(value) if value.isdigit() else value


def test_a_memory_cap_that_only_a_four_way_split_meets_picks_one():
    """A device holds 1/(S T) of the weights and 1/S of the activations: a cap at 30% of one
    device's need rules out one device, mirrored pairs, every 2-device split and T = 4 alone;
    a 4-device split with stages (S x T = 4) fits."""
    need = cost_model.memory_per_device(TRANSFORMER, "one_device")
    cluster = specs.ClusterSpec(hosts=1, devices_per_host=4, intra_host_gbps=100.0,
                                memory_per_device_mb=0.3 * need / 1e6)
    planned = planner.plan(TRANSFORMER, cluster)
    best = planner.best(planned)
    assert best.config.stages * best.config.tensor_parallel == 4 and best.config.stages > 1
    assert _by_name(planned)["pipeline N=4 S=1 M=1 T=4"].dropped
    assert best.prediction.memory_per_device_bytes <= 0.3 * need


def test_1f1b_takes_gpipes_time_holds_less_and_wins_where_only_it_fits():
    """S=2, M=8: the first stage holds 2 of 8 micro-batches' activations under 1F1B, all 8
    under GPipe; the time is the same. A cap between the two keeps 1F1B only."""
    cluster = specs.ClusterSpec(hosts=1, devices_per_host=2, intra_host_gbps=100.0)
    planned = _by_name(planner.plan(PIPELINED, cluster))
    gpipe, f1b = planned["pipeline N=2 S=2 M=8"], planned["pipeline N=2 S=2 M=8 1F1B"]
    assert f1b.prediction.step_s == gpipe.prediction.step_s
    weights = 2 * PIPELINED.parameter_bytes + PIPELINED.optimizer_state_bytes
    assert gpipe.prediction.memory_per_device_bytes == (weights + 10_000_000) // 2
    assert f1b.prediction.memory_per_device_bytes == (weights + 10_000_000 * 2 / 8) // 2
    assert "pipeline N=2 S=2 M=1 1F1B" not in planned  # M <= S: nothing held fewer
    cap = (gpipe.prediction.memory_per_device_bytes + f1b.prediction.memory_per_device_bytes) / 2
    capped = planner.plan(PIPELINED, dataclasses.replace(cluster, memory_per_device_mb=cap / 1e6))
    fits = {p.config.name for p in capped if not p.dropped}
    assert "pipeline N=2 S=2 M=8 1F1B" in fits and "pipeline N=2 S=2 M=8" not in fits
    flags = planned_run.run_flags(f1b.config, planned_run.CommandTarget("cnn", 64))
    assert "--pipeline_schedule=1f1b" in flags and "--microbatches=8" in flags


def test_a_straggler_is_left_out_by_configurations_on_fewer_hosts():
    slow = dataclasses.replace(CLUSTER, straggler_s=0.5)
    plain, straggled = _by_name(planner.plan(PROFILE, CLUSTER)), \
        _by_name(planner.plan(PROFILE, slow))
    for name, p in straggled.items():
        waits = p.config.hosts == CLUSTER.hosts  # only a configuration on every host has it
        assert (p.prediction.straggler_s == 0.5) == waits, name
        if not waits:
            assert p.prediction.examples_per_sec == \
                pytest.approx(plain[name].prediction.examples_per_sec), name
    # a 0.5 s straggler: every all-reduce over the 4 hosts is slower than one on 2 of them
    assert straggled["MWMS N=8 (4x2)"].prediction.examples_per_sec < \
        straggled["MWMS N=4 (2x2)"].prediction.examples_per_sec
    # on a one-host cluster it is the only host: one device waits for it too
    one = specs.ClusterSpec(hosts=1, devices_per_host=2, straggler_s=0.5)
    single = _by_name(planner.plan(PROFILE, one))["1 device"].prediction
    assert single.step_s == pytest.approx(0.02 + 0.5) and single.straggler_s == 0.5


def test_on_this_machines_cores_one_device_has_them_all_and_workers_share_them():
    """A cluster on one machine of 2 cores: one device (one process, its default threads) runs
    at the profile's step measured with 2 threads; the 2 workers slow each other by the sharing
    calibration. On a real cluster neither figure applies."""
    here = dataclasses.replace(PROFILE, gradient_bytes={"float32": 400_000},
                               pull_bytes=400_000,
                               one_process={"2": {"batch": 128, "step_s": 0.025}},
                               sharing={"2": {"slowdown": 1.3, "busy_cores": 2.0}})
    real = specs.ClusterSpec(hosts=2, inter_host_gbps=10.0, shared_medium=True)
    local = dataclasses.replace(real, machine_cores=2)
    away, home = _by_name(planner.plan(here, real)), _by_name(planner.plan(here, local))
    assert away["1 device"].prediction.step_s == pytest.approx(0.02)
    # measured with both cores at twice the profile's batch: 0.025 s for 128, 0.0125 for 64
    assert home["1 device"].prediction.step_s == pytest.approx(0.0125)
    assert home["MWMS N=2"].prediction.compute_s == pytest.approx(0.02 * 1.3)
    # the ranking turns: two shared cores no longer beat one process on both
    assert planner.best(planner.plan(here, real)).config.name == "MWMS N=2"
    assert planner.best(planner.plan(here, local)).config.name == "1 device"
