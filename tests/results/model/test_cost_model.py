"""The one cost model (results/model/cost_model.py) by hand: hierarchical all-reduce, sparse
all-gather, parameter servers with their pull and fan-in, the shared medium, memory, and the
profile and cluster files a user writes."""
import dataclasses
import json
import os

import pytest

from results.model import cost_model, specs
from results.model.specs import ClusterSpec, WorkloadProfile

G = 1_000_000
GBPS8 = 8.0  # 1e9 bytes/s


def _profile(**kw):
    return WorkloadProfile(**{"model": "m", "batch": 64, "compute_s": 0.1,
                              "gradient_bytes": {"float32": G}, **kw})


def test_flat_ring_by_hand():
    one_per_host = ClusterSpec(hosts=4, inter_host_gbps=GBPS8, inter_host_latency_us=100)
    # 2 (N-1)/N G/B + 2 (N-1) a
    assert cost_model.allreduce_s(G, one_per_host) == pytest.approx(2 * 3 / 4 * 1e-3 + 6e-4)
    assert cost_model.allreduce_s(G, ClusterSpec(hosts=1)) == 0.0


def test_hierarchical_ring_within_then_across_hosts():
    c = ClusterSpec(hosts=2, devices_per_host=4, intra_host_gbps=80.0, intra_host_latency_us=0,
                    inter_host_gbps=GBPS8, inter_host_latency_us=0)
    within = 2 * 3 / 4 * G / 1e10
    across = 2 * 1 / 2 * G / 1e9  # the whole gradient through each host's link
    assert cost_model.allreduce_s(G, c) == pytest.approx(within + across)
    # 8 workers on one flat ring over the slow links would pay more
    flat = cost_model.allreduce_s(G, ClusterSpec(hosts=8, inter_host_gbps=GBPS8,
                                                 inter_host_latency_us=0))
    assert flat > cost_model.allreduce_s(G, c)


def test_sparse_gradients_are_all_gathered():
    """A ring all-gather: N-1 steps, each a worker's rows and one message's latency."""
    c = ClusterSpec(hosts=4, inter_host_gbps=GBPS8, inter_host_latency_us=100)
    assert cost_model.allreduce_s(G, c, kind="sparse") == pytest.approx(3 * (G / 1e9 + 1e-4))


def test_a_split_sparse_gradient_gathers_its_rows_and_reduces_its_dense_rest():
    """An embedding's step: G/10 of rows all-gathered, the rest all-reduced in a ring beside
    them, in the projection and in the bytes it counts; an unsplit sparse profile stays rows."""
    c = ClusterSpec(hosts=4, inter_host_gbps=GBPS8, inter_host_latency_us=0)
    split = _profile(gradient_kind="sparse", sparse_gradient_bytes=G // 10, sparse_tensors=1,
                     tensors=3)
    rows, rest = G // 10, G - G // 10
    assert split.sparse_split() == (rows, rest)
    assert split.sparse_split("bfloat16") == (rows // 2, rest // 2)
    p = cost_model.predict(split, c, "multi_worker_mirrored")
    assert p.communication_s == pytest.approx(3 * rows / 1e9 + 2 * 3 / 4 * rest / 1e9)
    assert cost_model.bytes_moved(split, "multi_worker_mirrored", 4) == \
        pytest.approx(3 * rows + 2 * 3 / 4 * rest)
    whole = _profile(gradient_kind="sparse")
    assert whole.sparse_split() == (G, 0)
    assert cost_model.predict(whole, c, "multi_worker_mirrored").communication_s == \
        pytest.approx(3 * G / 1e9)


def test_parameter_servers_push_gradients_and_pull_variables():
    c = ClusterSpec(hosts=8, num_ps=2, inter_host_gbps=GBPS8, inter_host_latency_us=100)
    # push G/2 (16-bit) and pull G (float32 variables); a ps link serves 8/2 = 4 workers
    assert cost_model.parameter_server_s(G / 2, G, c) == pytest.approx(1.5e-3 * 4 + 2e-4)
    # 4 devices per host: the host's link carries its 4 workers' traffic even with 8 ps
    dense = ClusterSpec(hosts=2, devices_per_host=4, num_ps=8, inter_host_gbps=GBPS8,
                        inter_host_latency_us=0)
    assert cost_model.parameter_server_s(G, G, dense) == pytest.approx(2e-3 * 4)
    beside = ClusterSpec(hosts=2, devices_per_host=4, num_ps=8, inter_host_gbps=GBPS8,
                         inter_host_latency_us=0, ps_placement="with_workers")
    assert cost_model.parameter_server_s(G, G, beside) == pytest.approx(2e-3 * 4 / 2)


def test_shared_medium_is_the_emulated_network():
    c = ClusterSpec(hosts=2, inter_host_gbps=0.08, shared_medium=True)  # 1e7 bytes/s
    assert cost_model.allreduce_s(G, c) == pytest.approx(2 * G / 1e7)
    p = cost_model.predict(_profile(pull_bytes=G), c, "parameter_server")
    # a worker step pushes and pulls G (0.2 s); both share the bucket: 5 steps/s in all
    assert p.communication_s == pytest.approx(0.2)
    assert p.examples_per_sec == pytest.approx(320) and p.bound == "the shared link"


def test_predict_scales_compute_not_overhead_and_checks_memory():
    profile = _profile(overhead_s={"multi_worker_mirrored": 0.01}, parameter_bytes=G,
                       optimizer_state_bytes=G, activation_bytes=3 * G)
    c = ClusterSpec(hosts=8, device_speedup=10.0, inter_host_gbps=GBPS8,
                    inter_host_latency_us=0, memory_per_device_mb=4.5)
    p = cost_model.predict(profile, c, "multi_worker_mirrored")
    comm = 2 * 7 / 8 * G / 1e9
    assert (p.compute_s, p.overhead_s) == (pytest.approx(0.01), 0.01)
    assert p.examples_per_sec == pytest.approx(8 * 64 / (0.01 + 0.01 + comm))
    # against one device computing alone (0.01 s a step): the report's one baseline
    assert p.speedup == pytest.approx(p.examples_per_sec / (64 / 0.01))
    assert p.memory_per_device_bytes == 6 * G and not p.fits_memory  # 6 MB > 4.5 MB
    pss = cost_model.predict(profile, c, "parameter_server")
    assert pss.memory_per_device_bytes == 5 * G and not pss.fits_memory  # no optimizer state
    assert cost_model.predict(profile, c, "multi_worker_mirrored", "bfloat16").communication_s \
        == pytest.approx(comm / 2)


def test_profile_and_cluster_files(tmp_path):
    profile = tmp_path / "profile.json"
    profile.write_text(_profile(pull_bytes=G).to_json())
    assert specs.load_profile(str(profile)).gradient("float32") == G
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"hosts": 4, "devices_per_host": 8, "inter_host_gbps": 100}))
    assert specs.load_cluster(str(cluster)).workers == 32
    cluster.write_text(json.dumps({"hosts": 4, "nics": 2}))
    with pytest.raises(specs.SpecError, match="unknown field.s. nics; valid: "):
        specs.load_cluster(str(cluster))
    cluster.write_text(json.dumps({"hosts": 0}))
    with pytest.raises(specs.SpecError, match="cluster.json: cluster hosts=0 must be >= 1"):
        specs.load_cluster(str(cluster))
    cluster.write_text(json.dumps({"ps_placement": "rack"}))
    with pytest.raises(specs.SpecError, match="ps_placement='rack' is not valid; choose"):
        specs.load_cluster(str(cluster))
    cluster.write_text(json.dumps({"hosts": "4"}))
    with pytest.raises(specs.SpecError, match="cluster.json: cluster hosts must be a whole number"):
        specs.load_cluster(str(cluster))
    listed = [line[2:].split(":")[0] for line in ClusterSpec.reference() if line[0] == "-"]
    assert listed == [f.name for f in dataclasses.fields(ClusterSpec)]  # the docs' field list
    profile.write_text(json.dumps({"model": "m", "batch": 64}))
    with pytest.raises(specs.SpecError, match="profile.json: missing the required field.s. "
                                              "compute_s, gradient_bytes$"):
        specs.load_profile(str(profile))



@pytest.mark.parametrize("fields, said", [
    ({"stage_weight_shares": {"2": 1.5}}, "stage_weight_shares {'2': 1.5} is not"),
    ({"cpu_s_per_example": {"parameter_server": -0.001}},
     "cpu_s_per_example {'parameter_server': -0.001} is not a strategy with a value > 0"),
    ({"one_process": {"2": {"batch": 128}}}, "one_process {'2': {'batch': 128}} is not a core"),
    ({"one_process": {"x": {"batch": 1, "step_s": 1}}}, "one_process {'x'"),
    ({"sharing": {"2": {"slowdown": 0}}}, "sharing {'2': {'slowdown': 0}} is not a process"),
    ({"sharing": {"2": {"slowdown": 1.2, "busy_cores": -1}}}, "sharing .* is not a process"),
    ({"sharing": {"two": {"slowdown": 1.2}}}, "sharing {'two'"),
    ({"sharing": [1.2]}, "sharing must be an object, not \\[1.2\\]"),
    ({"ps_cpu_s_per_step": -0.01}, "ps_cpu_s_per_step=-0.01 must be >= 0 \\(the ps's CPU"),
    ({"ps_cpu_s_per_step": "16 ms"}, "ps_cpu_s_per_step must be a number, not '16 ms'"),
    ({"ps_cpu_s_per_step": False}, "ps_cpu_s_per_step must be a number, not False"),
    ({"ps_threads": 1.5}, "ps_threads must be a whole number, not 1.5"),
    ({"batch": 0}, "batch=0 must be >= 1 \\(examples per replica per step"),
    ({"gradient_bytes": {}}, "gradient_bytes must not be empty"),
    ({"gradient_bytes": {"int8": 1}}, "gradient_bytes {'int8': 1} is not a sync dtype"),
    ({"gradient_kind": "rows"}, "gradient_kind='rows' is not valid; choose one of: dense, sparse"),
    ({"overlap": {"parameter_server": 1.5}}, "overlap {'parameter_server': 1.5} is not a "),
    ({"sync_floor_s": {"parameter_server": -0.004}},
     "sync_floor_s {'parameter_server': -0.004} is not a strategy with seconds >= 0"),
    ({"sync_floor_s": {"parameter_server": "4 ms"}}, "sync_floor_s {'parameter_server': '4 ms'}"),
    ({"sync_floor_s": {"parameter_server": False}}, "sync_floor_s {'parameter_server': False}"),
])
def test_a_hand_written_profiles_machine_figures_are_checked(tmp_path, fields, said):
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({**json.loads(_profile().to_json()), **fields}))
    with pytest.raises(specs.SpecError, match=f"--profile=.*profile.json: {said}"):
        specs.load_profile(str(profile))
    good = {"sharing": {"2": {"slowdown": 1.2, "busy_cores": None}},
            "one_process": {"2": {"batch": 128, "step_s": 0.02}},
            "cpu_s_per_example": {"one_device": 0.001},
            "sync_floor_s": {"parameter_server": 0.004}}
    profile.write_text(json.dumps({**json.loads(_profile().to_json()), **good}))
    assert specs.load_profile(str(profile)).sharing["2"]["slowdown"] == 1.2


def test_the_profiles_measured_overlap_hides_that_share_of_synchronization():
    cluster = ClusterSpec(hosts=4, inter_host_gbps=10.0, inter_host_latency_us=50.0)
    plain = cost_model.predict(_profile(), cluster, "parameter_server")
    hidden = cost_model.predict(_profile(overlap={"parameter_server": 0.25}), cluster,
                                "parameter_server")
    assert hidden.communication_s == pytest.approx(0.75 * plain.communication_s)
    assert hidden.step_s == pytest.approx(plain.step_s - 0.25 * plain.communication_s)
    # another strategy's overlap is not this one's; an explicit overlap wins
    assert cost_model.predict(_profile(overlap={"parameter_server": 0.25}), cluster,
                              "multi_worker_mirrored").communication_s == pytest.approx(
        cost_model.predict(_profile(), cluster, "multi_worker_mirrored").communication_s)
    assert cost_model.predict(_profile(overlap={"parameter_server": 0.25}), cluster,
                              "parameter_server", overlap=0.0).step_s == pytest.approx(
        plain.step_s)


def test_overlap_hides_no_more_than_the_steps_compute():
    """A PSS profile whose N=1 run hid all of its synchronization (overlap 1, as the default
    comparison measured on 2026-11-27) still pays its ps link once that link's traffic takes
    longer than the compute beside it: 64 workers on one ps at 10 Gbit/s move 64 x 2 MB a
    step, 102 ms, against 100 ms of compute. Before, such a projection kept 100% efficiency."""
    profile = _profile(pull_bytes=G, overlap={"parameter_server": 1.0})
    few = cost_model.predict(profile, ClusterSpec(hosts=4, inter_host_gbps=10.0),
                             "parameter_server")
    assert few.communication_s == 0.0 and few.efficiency == pytest.approx(1.0)
    many = ClusterSpec(hosts=64, inter_host_gbps=10.0, inter_host_latency_us=50.0)
    comm = cost_model.parameter_server_s(G, G, many)
    assert comm > 0.1  # the link's traffic outlasts the compute it could hide behind
    p = cost_model.predict(profile, many, "parameter_server")
    assert p.step_s == pytest.approx(comm)  # the step is the link's time, no shorter
    assert p.communication_s == pytest.approx(comm - 0.1)
    assert p.examples_per_sec == pytest.approx(64 * 64 / comm) and p.efficiency < 1.0
    # a partial overlap still hides its share while that share fits beside the compute
    half = cost_model.predict(_profile(pull_bytes=G, overlap={"parameter_server": 0.5}), many,
                              "parameter_server")
    assert half.communication_s == pytest.approx(comm / 2)


def test_the_parameter_servers_own_work_bounds_pss():
    """A ps applies the update of every worker's push in turn: with 16 ms of ps CPU per step of
    64 (one ps thread, measured at N=1) one ps serves 4000 examples/s however fast the network,
    K ps or ps_cores scale it, local aggregation updates once per host, an accumulated step of
    4 micro-batches is one update; MWMS has no ps."""
    profile = _profile(pull_bytes=G, ps_cpu_s_per_step=0.016, ps_threads=1)
    fast = dict(inter_host_gbps=1000.0, inter_host_latency_us=0.0)
    one = cost_model.predict(profile, ClusterSpec(hosts=64, **fast), "parameter_server")
    assert one.examples_per_sec == pytest.approx(4000)
    assert one.bound == "the parameter servers' CPU"
    assert one.step_s == pytest.approx(64 * 64 / 4000)  # a worker's step at the bound's rate
    assert one.communication_share == pytest.approx(one.communication_s / one.step_s)
    assert cost_model.predict(profile, ClusterSpec(hosts=64, num_ps=4, **fast),
                              "parameter_server").examples_per_sec == pytest.approx(16000)
    assert cost_model.predict(profile, ClusterSpec(hosts=64, ps_cores=2, **fast),
                              "parameter_server").examples_per_sec == pytest.approx(8000)
    per_host = ClusterSpec(hosts=8, devices_per_host=8, ps_local_aggregation=True, **fast)
    assert cost_model.ps_served(profile, per_host) == pytest.approx(32000)
    from results.model.planner import accumulated
    assert cost_model.ps_served(accumulated(profile, 4), ClusterSpec()) == pytest.approx(16000)
    # below the bound the step decides: two workers compute 1280 examples/s
    two = cost_model.predict(profile, ClusterSpec(hosts=2, **fast), "parameter_server")
    assert two.examples_per_sec == pytest.approx(2 * 64 / 0.1, rel=1e-3) and not two.bound
    mwms = cost_model.predict(profile, ClusterSpec(hosts=64, **fast), "multi_worker_mirrored")
    assert mwms.examples_per_sec > 4 * 4000 and not mwms.bound
    # unmeasured (a hand-written profile without it): no bound
    assert cost_model.ps_served(_profile(), ClusterSpec()) is None
    with pytest.raises(specs.SpecError, match="ps_cores=-1"):
        ClusterSpec(ps_cores=-1).check()


def test_parameter_servers_with_local_aggregation_push_once_per_host():
    """tf_cnn_benchmarks' distributed_replicated: a host's 8 devices ring-reduce over the
    intra-host link, then the host pushes G and pulls P once (fan-in H/K, not its 8 devices)."""
    spec = dict(hosts=8, devices_per_host=8, intra_host_gbps=80.0, intra_host_latency_us=0.0,
                inter_host_gbps=GBPS8, inter_host_latency_us=0.0, num_ps=4)
    each = cost_model.parameter_server_s(G, G, ClusterSpec(**spec))
    once = cost_model.parameter_server_s(G, G, ClusterSpec(**spec, ps_local_aggregation=True))
    assert each == pytest.approx(2 * G / 1e9 * 16)  # fan-in max(8 devices, 64 workers / 4 ps)
    ring = 2 * 7 / 8 * G / 10e9
    assert once == pytest.approx(ring + 2 * G / 1e9 * 2)  # fan-in 8 hosts / 4 ps


def test_the_published_cases_are_consistent_and_predictable():
    """docs/examples/published/cases.json (experiments.bench.validate_published): every case's
    efficiency is its throughputs' ratio, and its profile and cluster load and predict."""
    from experiments.bench.validate_published import predictions
    from tests.helpers import ROOT
    with open(os.path.join(ROOT, "docs", "examples", "published", "cases.json")) as f:
        cases = json.load(f)["cases"]
    assert len({c["cluster"]["name"] for c in cases}) >= 3  # three published setups
    for case, p in predictions(cases):
        pub = case["published"]
        assert pub["efficiency"] == pytest.approx(
            pub["images_per_sec"] / (pub["gpus"] * pub["one_gpu_images_per_sec"]))
        assert p.workers == pub["gpus"] and 0 < p.efficiency <= 1
        # the reference is the published single GPU: compute at its batch and throughput
        assert case["profile"]["batch"] / p.compute_s == pytest.approx(
            pub["one_gpu_images_per_sec"])


def test_a_reducer_exchanges_its_payload_and_adds_its_compute_and_state():
    """int8 on 4 hosts: its payload all-gathered ((N-1) C over the link), the compression's
    compute scaled with the device; powersgd's factors all-reduced like a gradient."""
    reducers = {"int8": {"payload_bytes": G / 4, "exchange": "gather", "compress_s": 0.004,
                         "state_bytes": G},
                "powersgd:4": {"payload_bytes": G / 10, "exchange": "reduce",
                               "compress_s": 0.002, "state_bytes": G}}
    profile = _profile(parameter_bytes=G, reducers=reducers)
    cluster = ClusterSpec(hosts=4, inter_host_gbps=GBPS8, inter_host_latency_us=0.0,
                          device_speedup=2.0)
    plain = cost_model.predict(profile, cluster, "multi_worker_mirrored")
    int8 = cost_model.predict(profile, cluster, "multi_worker_mirrored", compression="int8")
    assert plain.communication_s == pytest.approx(2 * 3 / 4 * G / 1e9)
    assert int8.communication_s == pytest.approx(3 * G / 4 / 1e9 + 0.004 / 2)
    assert int8.memory_per_device_bytes == plain.memory_per_device_bytes + G
    low_rank = cost_model.predict(profile, cluster, "multi_worker_mirrored",
                                  compression="powersgd:4")
    assert low_rank.communication_s == pytest.approx(2 * 3 / 4 * G / 10 / 1e9 + 0.001)
    with pytest.raises(specs.SpecError, match="compression 'topk:0.01' under "
                                                   "multi_worker_mirrored: the profile measured "
                                                   "int8, powersgd:4"):
        cost_model.predict(profile, cluster, "multi_worker_mirrored", compression="topk:0.01")
    with pytest.raises(specs.SpecError, match="all-reduce strategies and dense gradients"):
        cost_model.predict(profile, cluster, "parameter_server", compression="int8")


def test_tensor_parallelism_divides_compute_and_adds_its_exchanges():
    """Megatron's split as the toolkit runs it: compute / T plus R exchanges per micro-batch,
    each a tensor handed out from the stage's first device to the T - 1 others and their
    partial sums gathered back (2 (T-1) x its bytes and 2 latencies); with 2 stages, GPipe's
    bubble over both. The weights split over S x T devices, the activations over S only."""
    profile = specs.WorkloadProfile(
        model="vit", batch=32, compute_s=0.1, gradient_bytes={"float32": 1_000_000},
        parameter_bytes=1_000_000, activation_bytes=3_000_000,
        boundary_activation_bytes=12_544, tensor_reduced_bytes=200_704, tensor_reductions=16,
        tensor_shards=[2, 4])
    cluster = specs.ClusterSpec(devices_per_host=4, intra_host_gbps=100.0,
                                intra_host_latency_us=5.0)
    each = 200_704 * 32 / 16  # one exchange's bytes

    def hub(shards, count, size):
        return count * (2 * (shards - 1) * size * 8 / 100e9 + 2 * 5e-6)
    alone = cost_model.predict(profile, cluster, "model_parallel", stages=1, tensor_parallel=2)
    assert alone.compute_s == pytest.approx(0.05)
    assert alone.communication_s == pytest.approx(hub(2, 16, each))
    assert alone.step_s == pytest.approx(0.05 + hub(2, 16, each))
    assert alone.workers == 2
    assert alone.memory_per_device_bytes == 2 * 1_000_000 // 2 + 3_000_000
    four = cost_model.predict(profile, cluster, "model_parallel", stages=1, tensor_parallel=4)
    assert four.step_s == pytest.approx(0.025 + hub(4, 16, each))
    both = cost_model.predict(profile, cluster, "model_parallel", stages=2, microbatches=4,
                              tensor_parallel=2)
    slots = 5 / 4 / 2  # (M + S - 1) / M / S
    transfers = 2 * (32 / 4 * 12_544 * 8 / 100e9 + 5e-6)
    assert both.compute_s == pytest.approx(0.05 * slots)
    assert both.communication_s == pytest.approx(hub(2, 64, each / 4) * slots + transfers)
    assert both.workers == 4
    assert both.memory_per_device_bytes == 2 * 1_000_000 // 4 + 3_000_000 // 2
    for bad, message in ((dict(strategy="model_parallel", tensor_parallel=3),
                          "tensor_parallel=3 does not divide"),
                         (dict(strategy="multi_worker_mirrored", tensor_parallel=2),
                          "splits the model within a pipeline's devices")):
        with pytest.raises(specs.SpecError, match=message):
            cost_model.predict(profile, cluster, **bad)
    with pytest.raises(specs.SpecError, match="has no tensor_reduced_bytes"):
        cost_model.predict(dataclasses.replace(profile, tensor_reduced_bytes=0), cluster,
                           "model_parallel", tensor_parallel=2)


def test_1f1b_holds_its_first_stages_share_of_the_activations():
    assert cost_model.activation_share("gpipe", 2, 8) == 1.0
    assert cost_model.activation_share("1f1b", 2, 8) == 2 / 8
    assert cost_model.activation_share("1f1b", 4, 2) == 1.0  # M <= S: all of them, as GPipe


def test_a_straggler_holds_lockstep_steps_back_and_only_its_own_pss_steps():
    profile = _profile(pull_bytes=G)
    fast = ClusterSpec(hosts=4, inter_host_gbps=GBPS8, inter_host_latency_us=0)
    slow = dataclasses.replace(fast, straggler_s=0.3)
    for strategy in ("multi_worker_mirrored", "parameter_server"):
        assert cost_model.predict(profile, fast, strategy).straggler_s == 0.0
    mwms, mwms_slow = (cost_model.predict(profile, c, "multi_worker_mirrored")
                       for c in (fast, slow))
    # every worker waits for it every step
    assert mwms_slow.step_s == pytest.approx(mwms.step_s + 0.3)
    assert mwms_slow.examples_per_sec == pytest.approx(4 * 64 / (mwms.step_s + 0.3))
    assert mwms_slow.bound == "a straggler" and mwms_slow.straggler_s == 0.3
    pss, pss_slow = (cost_model.predict(profile, c, "parameter_server") for c in (fast, slow))
    # 3 workers at their own pace, the slow host's one 0.3 s slower per step
    t = pss.step_s
    assert pss_slow.step_s == pytest.approx(t)
    assert pss_slow.examples_per_sec == pytest.approx(3 * 64 / t + 64 / (t + 0.3))
    assert pss_slow.examples_per_sec > mwms_slow.examples_per_sec
    with pytest.raises(specs.SpecError, match="straggler_s=-1"):
        ClusterSpec(straggler_s=-1).check()


def test_a_pipelines_busiest_device_holds_its_largest_stages_share_of_the_weights():
    profile = _profile(parameter_bytes=G, optimizer_state_bytes=G, activation_bytes=G)
    even = cost_model.memory_per_device(profile, "model_parallel", stages=2)
    assert even == (3 * G) // 2 + G // 2  # weights, gradients and state halved, activations too
    # the toolkit's cut of this model puts 58% of the parameters on one stage
    uneven = dataclasses.replace(profile, stage_weight_shares={"2": 0.58})
    assert cost_model.memory_per_device(uneven, "model_parallel", stages=2) == \
        pytest.approx(3 * G * 0.58 + G / 2, abs=1)
    # a split the profile has no share for stays equal
    assert cost_model.memory_per_device(uneven, "model_parallel", stages=4) == \
        cost_model.memory_per_device(profile, "model_parallel", stages=4)


def test_a_cluster_on_one_machine_shares_its_cores_and_a_real_one_does_not():
    profile = _profile(pull_bytes=G, cpu_s_per_example={"parameter_server": 0.004,
                                                        "multi_worker_mirrored": 0.0005},
                       sharing={"2": {"slowdown": 1.25, "busy_cores": 1.8}})
    real = ClusterSpec(hosts=2, inter_host_gbps=GBPS8, inter_host_latency_us=0)
    local = dataclasses.replace(real, machine_cores=2)
    mwms, mwms_here = (cost_model.predict(profile, c, "multi_worker_mirrored")
                       for c in (real, local))
    # two workers in lockstep on one machine compute at the calibration's slowdown; the
    # synchronization does not change, and the cores (1.8 / 0.5 ms = 3600/s) do not bind
    assert mwms_here.compute_s == pytest.approx(1.25 * mwms.compute_s)
    assert mwms_here.step_s == pytest.approx(mwms.step_s + 0.25 * mwms.compute_s)
    assert mwms_here.bound == "" and mwms.bound == ""
    # PSS's tasks cost 4 ms of CPU an example: 1.8 busy cores deliver 450 examples/s at most
    pss, pss_here = (cost_model.predict(profile, c, "parameter_server") for c in (real, local))
    assert pss.examples_per_sec > 450
    assert pss_here.examples_per_sec == pytest.approx(1.8 / 0.004)
    assert pss_here.bound == "this machine's cores"
    # no more cores than the machine has, whatever the calibration kept busy
    small = dataclasses.replace(local, machine_cores=1)
    assert cost_model.predict(profile, small, "parameter_server").examples_per_sec == \
        pytest.approx(1 / 0.004)
    # one worker, and a profile without the figures: nothing to share, no cap
    one = dataclasses.replace(local, hosts=1)
    for strategy in ("multi_worker_mirrored", "parameter_server"):
        alone = cost_model.predict(profile, one, strategy)
        assert (alone.step_s, alone.examples_per_sec, alone.bound) == pytest.approx(
            (cost_model.predict(profile, dataclasses.replace(real, hosts=1), strategy).step_s,
             64 / alone.step_s, "")), strategy
    bare = _profile(pull_bytes=G)
    here, away = (cost_model.predict(bare, c, "parameter_server") for c in (local, real))
    assert (here.step_s, here.examples_per_sec, here.bound) == \
        (away.step_s, away.examples_per_sec, away.bound)
    with pytest.raises(specs.SpecError, match="machine_cores=-1"):
        ClusterSpec(machine_cores=-1).check()


def test_this_machines_own_runs_are_predicted_by_the_same_model_with_what_was_measured_here():
    """The local check (results/model/scaling_model.py) and the network experiment go through
    predict: the synchronization measured here replaces the links' (and is hidden by the
    profile's overlap), a worker step's CPU meets the machine's cap, a fit point's local term
    joins the step."""
    profile = _profile(overhead_s={"multi_worker_mirrored": 0.01},
                       overlap={"multi_worker_mirrored": 0.5},
                       cpu_s_per_example={"multi_worker_mirrored": 0.001},
                       sharing={"2": {"slowdown": 1.5, "busy_cores": 2.0}})
    here = cost_model.Here(sync_s=0.04)
    p = cost_model.predict(profile, cost_model.this_machine(2, 4), "multi_worker_mirrored",
                           here=here)
    # compute x the slowdown at K=2, the overhead, half the measured 40 ms (the overlap)
    assert p.step_s == pytest.approx(0.15 + 0.01 + 0.02)
    assert p.communication_s == pytest.approx(0.02) and p.bound == ""
    # 2 busy cores / 64 CPU-ms a step = 2000 examples/s does not bind (711/s); at 224 CPU-ms a
    # step it does: 2 x 64 / 0.224 = 571
    busy = dataclasses.replace(profile, cpu_s_per_example={"multi_worker_mirrored": 0.0035})
    capped = cost_model.predict(busy, cost_model.this_machine(2, 4), "multi_worker_mirrored",
                                here=here)
    assert capped.examples_per_sec == pytest.approx(2 * 64 / 0.224)
    assert capped.bound == "this machine's cores"
    # cores not known: no sharing and no cap, the links still free
    unknown = cost_model.predict(busy, cost_model.this_machine(2, 0), "multi_worker_mirrored",
                                 here=here)
    assert unknown.step_s == pytest.approx(0.1 + 0.01 + 0.02) and unknown.bound == ""
    # under a shaper: its shared medium in series with the measured loopback and local terms
    shaped = cost_model.predict(profile, cost_model.this_machine(2, 0, GBPS8),
                                "multi_worker_mirrored", overlap=0.0,
                                here=cost_model.Here(sync_s=0.04, local_s=0.03))
    assert shaped.communication_s == pytest.approx(2 * G / 1e9 + 0.04)
    assert shaped.step_s == pytest.approx(0.1 + 0.01 + 2 * G / 1e9 + 0.04 + 0.03)
    # a projection takes none of it
    away = cost_model.predict(profile, ClusterSpec(hosts=2, inter_host_gbps=GBPS8),
                              "multi_worker_mirrored")
    assert away.step_s == pytest.approx(
        0.1 + 0.01 + 0.5 * cost_model.allreduce_s(G, ClusterSpec(hosts=2, inter_host_gbps=GBPS8)))
