"""The adaptive mode's decision (experiments/adaptive/decide.py) on made-up epochs: drift, the
network it implies, the switch and when a switch does not pay."""
import dataclasses
import io
import json
import os

import pytest

from experiments.adaptive import decide
from results.model import planner, specs

# The default comparison's measured cnn profile (64 per replica, 1 thread) on this machine seen
# as two one-core workers on one shaped loopback
PROFILE = specs.WorkloadProfile(
    model="cnn", batch=64, compute_s=0.0209, gradient_bytes={"float32": 1686568},
    pull_bytes=1686568, parameter_bytes=1686568, optimizer_state_bytes=1686568,
    activation_bytes=22514176)
CLUSTER = specs.ClusterSpec(hosts=2, devices_per_host=1, inter_host_gbps=10.0,
                            intra_host_gbps=10.0, shared_medium=True, num_ps=1)
MWMS = planner.Config("multi_worker_mirrored", 2, 2, 1)
ONE = planner.Config("one_device", 1, 1, 1)
G = 128


def rate(config, gbps):
    return decide.predicted_rate(PROFILE, decide.with_network(CLUSTER, gbps), config, G)


def test_every_candidate_trains_the_same_global_batch():
    configs = decide.candidates(PROFILE, CLUSTER, G)
    assert MWMS in configs and ONE in configs
    assert all(G % c.replicas == 0 and c.accumulation == 1 and
               c.sync_dtype == "float32" and c.compression == "none" for c in configs)
    # one device computes the whole global batch: twice the profile's per-replica compute
    one = planner.predict(decide.at_batch(PROFILE, G), CLUSTER, ONE)
    assert one.prediction.step_s == pytest.approx(2 * PROFILE.compute_s)
    odd = decide.candidates(PROFILE, CLUSTER, 127)  # no 2 replicas split 127 examples
    assert ONE in odd and MWMS not in odd and all(c.replicas == 1 for c in odd)


def test_the_network_is_inferred_back_from_a_rate():
    for gbps in (0.05, 0.5, 5.0):
        assert decide.infer_gbps(PROFILE, CLUSTER, MWMS, G, rate(MWMS, gbps)) == \
            pytest.approx(gbps, rel=1e-3)
    assert decide.infer_gbps(PROFILE, CLUSTER, ONE, G, 1000.0) is None  # no network in it


def test_a_slowed_network_switches_to_the_configuration_that_does_not_need_it():
    # measured 10% below the model at 10 Gbit/s, then at 0.05 Gbit/s
    steady = [0.9 * rate(MWMS, 10.0), 0.9 * rate(MWMS, 10.0), 0.9 * rate(MWMS, 0.05)]
    verdict = decide.check(PROFILE, CLUSTER, MWMS, G, steady, examples_left=6144, cost_s=5.0)
    assert verdict.action == "switch" and verdict.to == ONE
    assert verdict.inferred_gbps == pytest.approx(0.05, rel=1e-3)  # the 10% bias taken out
    assert verdict.to_rate == pytest.approx(0.9 * rate(ONE, 0.05))
    assert verdict.predicted_gain_s == pytest.approx(
        6144 * (1 / steady[-1] - 1 / verdict.to_rate))
    assert json.loads(json.dumps(verdict.to_json()))["to"] == ONE.name


@pytest.mark.parametrize("steady, left, cost, action, why", [
    ([3000.0], 6144, 5.0, "watch", "fewer than 2"),
    ([3000.0, 3100.0, 2800.0], 6144, 5.0, "stay", "within 15%"),
    # the gain over what is left does not pay for the switch (+ the margin)
    (None, 128, 5.0, "stay", "not more than the switch"),
])
def test_no_switch_without_drift_or_without_gain(steady, left, cost, action, why):
    steady = steady or [rate(MWMS, 10.0), rate(MWMS, 0.05)]
    verdict = decide.check(PROFILE, CLUSTER, MWMS, G, steady, left, cost)
    assert verdict.action == action and why in verdict.why and verdict.to is None


def test_never_back_to_a_configuration_left_at_the_same_network():
    # one_device was left at 0.06 Gbit/s; the network now reads 0.05: not back to it
    steady = [rate(MWMS, 10.0), rate(MWMS, 0.05)]
    left = [(ONE, 0.06)]
    verdict = decide.check(PROFILE, CLUSTER, MWMS, G, steady, 6144, 1.0, left=left)
    assert verdict.to != ONE
    # ... but after the network moved more than RETURN_FACTOR since
    verdict = decide.check(PROFILE, CLUSTER, MWMS, G, steady, 6144, 1.0, left=[(ONE, 1.0)])
    assert verdict.action == "switch" and verdict.to == ONE


def test_a_profile_measured_here_before_is_reused(tmp_path, monkeypatch):
    from experiments.adaptive import profile_here
    from experiments.config import RunConfig

    cfg = RunConfig(model="cnn", batch_size_per_replica=32, results_dir=str(tmp_path))
    path = profile_here.path_for(cfg)
    assert path.startswith(str(tmp_path / "profile-cnn-b32-")) and path.endswith("-here.json")
    # what else the profile trained is in its name: another optimizer is another profile
    assert profile_here.path_for(dataclasses.replace(cfg, optimizer="adam")) != path
    assert profile_here.path_for(dataclasses.replace(cfg, epochs=9)) == path
    # a PSS worker held to one core with its ps and chief (--pin_cores=1) is another profile
    # than one with a core of its own
    if len(os.sched_getaffinity(0)) > 1:
        assert profile_here.path_for(dataclasses.replace(cfg, pin_cores=1)) != path
    # a profile with this machine's sharing is another profile: one without it is not reused
    # for a cluster on this machine's cores, which calibrates each K the planner tries
    from results.model.specs import ClusterSpec
    here = ClusterSpec(hosts=2, devices_per_host=2, machine_cores=2)
    assert profile_here.sharing_processes(ClusterSpec(hosts=2)) == []
    assert profile_here.sharing_processes(here) == [2, 4]
    assert profile_here.path_for(cfg, ClusterSpec(hosts=2)) == path
    assert profile_here.path_for(cfg, here) != path
    # ... and so is one whose one-device run trains another global batch
    assert profile_here.path_for(dataclasses.replace(cfg, global_batch_size=128), here) != \
        profile_here.path_for(cfg, here)
    # ... and one whose sharing loops ran unpinned (before they were pinned as a comparison's)
    pinned = profile_here.path_for(cfg, here)
    placed = profile_here._placements
    monkeypatch.setattr(profile_here, "_placements", lambda cfg, cluster: {
        run: dataclasses.replace(where, pinned=where.pinned and not run.startswith("sharing-"))
        for run, where in placed(cfg, cluster).items()})
    if len(os.sched_getaffinity(0)) >= 2:  # (K=2 loops are pinned only where 2 cores are)
        assert profile_here.path_for(cfg, here) != pinned
    assert profile_here.path_for(cfg) == path  # no sharing: the same profile as before
    open(path, "w").write("{}")
    said = []
    assert profile_here.measure(cfg, ["run"], out=said.append) == path  # no run started
    assert said == [f"auto: using the profile measured here before: {path}"]


def _epoch(wait, sync):
    """An MWMS epoch's timeline: worker:1 waits `wait` for worker:0 ... and both sync."""
    return {"timeline": {"lockstep": True, "per_worker": {
        "worker:0": {"compute_s": 0.02, "wait_s": 0.0, "sync_s": sync, "step_s": 0.03},
        "worker:1": {"compute_s": 0.02, "wait_s": wait, "sync_s": sync, "step_s": 0.03}}}}


PSS = planner.Config("parameter_server", 2, 2, 1, num_ps=1)


def _pss_epoch(step0, step1):
    return {"timeline": {"lockstep": False, "per_worker": {
        "worker:0": {"compute_s": 0.02, "sync_s": 0.005, "step_s": step0},
        "worker:1": {"compute_s": 0.02, "sync_s": 0.005, "step_s": step1}}}}


def test_a_straggler_is_not_read_as_a_slower_network():
    reference = _epoch(0.0, 0.005)
    # worker:0 became slow: worker:1 waits 50 ms for it, the synchronization is unchanged
    assert decide.straggler_of(reference, _epoch(0.05, 0.005)) == \
        decide.Straggler("worker:0", 0.05)
    # the network slowed: both synchronize longer, nobody waits more
    assert decide.straggler_of(reference, _epoch(0.001, 0.25)) is None
    # under PSS: the worker whose step grew while the others' did not
    assert decide.straggler_of(_pss_epoch(0.03, 0.03), _pss_epoch(0.031, 0.09)) == \
        decide.Straggler("worker:1", pytest.approx(0.059))
    assert decide.straggler_of(_pss_epoch(0.03, 0.03), _pss_epoch(0.033, 0.034)) is None
    # a slower network slows every PSS worker, unequally (measured here: resnet at 0.02 Gbit/s,
    # 549 and 569 ms, then 2267 and 1672 ms): no straggler, the network
    assert decide.straggler_of(_pss_epoch(0.549, 0.569), _pss_epoch(2.267, 1.672)) is None
    assert decide.straggler_of(_epoch(0.0, 0.005), {"timeline": {"per_worker": {
        "worker:0": {"step_s": 0.03}}}}) is None  # one worker: nobody to wait for


def test_a_straggler_makes_the_run_leave_its_host_and_never_come_back():
    slow = decide.Straggler("worker:1", 0.06)
    # MWMS on both hosts, then every step 60 ms longer
    before = rate(MWMS, 10.0)
    after = G / (G / before + 0.06)
    verdict = decide.check(PROFILE, CLUSTER, MWMS, G, [before, after], 6144, 1.0,
                           straggler=slow)
    assert verdict.action == "switch" and verdict.straggler == "worker:1"
    assert verdict.straggler_s == 0.06 and verdict.inferred_gbps is None
    assert "worker:1 adds 60 ms a step" in verdict.why
    # the candidates on both hosts were priced with it; the choice leaves it out or tolerates it
    straggled = dataclasses.replace(CLUSTER, straggler_s=0.06)
    assert verdict.to_rate == pytest.approx(
        decide.predicted_rate(PROFILE, straggled, verdict.to, G), rel=1e-9)
    assert verdict.to_rate > after
    # a configuration left for a straggler is never chosen again, whatever the network: MWMS
    # at 3 Gbit/s would leave for PSS, unless the run had left PSS for a straggler
    drifted = [rate(MWMS, 10.0), rate(MWMS, 3.0)]
    assert decide.check(PROFILE, CLUSTER, MWMS, G, drifted, 10 ** 6, 1.0).to == PSS
    banned = decide.check(PROFILE, CLUSTER, MWMS, G, drifted, 10 ** 6, 1.0, left=[(PSS, None)])
    assert banned.to != PSS
    # too few examples left to pay for a switch
    late = decide.check(PROFILE, CLUSTER, MWMS, G, [before, after], 256, 5.0, straggler=slow)
    assert late.action == "stay" and late.to is None and "not more than the switch" in late.why


def test_a_straggler_found_again_adds_to_the_one_the_cluster_has():
    # after a switch the segment's cluster carries the 60 ms found before; this configuration's
    # reference epoch waited for it already, and the last epoch for 40 ms more
    known = dataclasses.replace(CLUSTER, straggler_s=0.06)
    before = rate(MWMS, 10.0)
    verdict = decide.check(PROFILE, known, MWMS, G, [before, G / (G / before + 0.04)], 6144,
                           1.0, straggler=decide.Straggler("worker:1", 0.04))
    assert verdict.straggler_s == pytest.approx(0.1)
    # under PSS, a worker already behind in the reference epoch that did not grow is no new
    # straggler (nor one of 0 s that would wipe the known one)
    assert decide.straggler_of(_pss_epoch(0.03, 0.09), _pss_epoch(0.031, 0.092)) is None


def test_a_segment_is_pinned_as_a_comparison_pins_its_cluster():
    """--adapt's segments run as a comparison's cells do on the same cores (auto.pin_flag):
    MWMS N=2 of one thread each on two cores pinned, one device not; the last flag wins over
    the user's command."""
    from experiments.adaptive import supervisor

    def flags(config, available):
        return supervisor._segment_flags(config, G, "/ckpt", available, 1)

    assert "--pin_workers" in flags(MWMS, 2) and "--nopin_workers" not in flags(MWMS, 2)
    assert "--nopin_workers" in flags(MWMS, 1)  # --pin_cores=1: they share it
    assert "--nopin_workers" in flags(ONE, 2)
    assert flags(MWMS, 2)[-2:] == [f"--global_batch_size={G}", "--checkpoint_dir=/ckpt"]


def test_the_next_segment_starts_from_what_the_switches_inferred(tmp_path):
    from experiments.adaptive import segment, supervisor

    journal = {"switches": [{"verdict": {"inferred_gbps": 0.05, "straggler_s": None}},
                            {"verdict": {"inferred_gbps": None, "straggler_s": 0.12}}]}
    # the network from the first switch survives the second (a straggler's, which infers none)
    assert supervisor.inferred(journal, "inferred_gbps") == 0.05
    assert supervisor.inferred(journal, "straggler_s") == 0.12
    assert supervisor.inferred({"switches": []}, "straggler_s") is None
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"hosts": 2, "inter_host_gbps": 10.0}))
    env = {"profile": "tests/data/profile-cnn-14336-b64-k1-float32.json",
           "cluster": str(cluster), "current": decide.config_json(PSS), "global_batch": G,
           "network_gbps": 0.05, "straggler_s": 0.12}
    adapter = segment.Adapter(env, True, False, 2048)
    assert adapter.cluster.straggler_s == 0.12 and adapter.cluster.inter_host_gbps == 0.05


def test_after_a_switch_predictions_start_from_the_network_it_inferred(tmp_path):
    from experiments.adaptive import segment

    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"hosts": 2, "inter_host_gbps": 10.0}))
    env = {"profile": "tests/data/profile-cnn-14336-b64-k1-float32.json",
           "cluster": str(cluster), "current": decide.config_json(MWMS), "global_batch": G}
    assert segment.Adapter(env, True, True, 2048).cluster.inter_host_gbps == 10.0
    after = segment.Adapter({**env, "network_gbps": 0.05}, True, True, 2048)
    # else the slow network of its first epochs would be taken for the model's error
    assert after.cluster.inter_host_gbps == after.cluster.intra_host_gbps == 0.05


def test_a_cluster_on_this_machine_profiles_its_cores_as_one_device_runs(tmp_path, monkeypatch):
    """For a machine_cores cluster the profile adds one device at the machine's threads and the
    run's global batch, and the sharing calibration; each command says its own strategy after
    the user's --strategy=auto (absl keeps the last), or the calibration refuses it."""
    from experiments.adaptive import profile_here, supervisor
    from experiments.config import RunConfig
    from results.model.specs import ClusterSpec

    commands = []

    def fake(command, **_):
        commands.append(command)
        return (1, None, ("", "")) if "experiments.comparison.sharing" in command else \
            (0, None, ("", ""))

    monkeypatch.setattr(supervisor, "run_child", fake)
    monkeypatch.setattr(profile_here.glob, "glob", lambda _: ["r.json"])
    monkeypatch.setattr(profile_here, "open", lambda *_: io.StringIO("{}"), raising=False)
    cfg = RunConfig(model="cnn", batch_size_per_replica=32, global_batch_size=64,
                    results_dir=str(tmp_path))
    with pytest.raises(profile_here.ProfilingFailed, match="--processes=2"):
        profile_here.measure(cfg, ["run", "--strategy=auto", "--model=cnn", "--nopin_workers",
                                    "--batch_size_per_replica=32"], out=lambda _: 0,
                             cluster=ClusterSpec(hosts=2, machine_cores=2))

    def last(command, name):
        return [a for a in command if a.startswith(f"--{name}=")][-1]

    assert [c[2] for c in commands] == ["experiments.run"] * 4 + \
        ["experiments.comparison.sharing"]
    assert [last(c, "strategy") for c in commands] == [
        "--strategy=one_device", "--strategy=multi_worker_mirrored",
        "--strategy=parameter_server", "--strategy=one_device", "--strategy=one_device"]
    assert [last(c, "threads") for c in commands[3:]] == ["--threads=2", "--threads=1"]
    # one device trains the global batch; the others a replica's
    assert [last(c, "batch_size_per_replica") for c in commands[2:4]] == \
        ["--batch_size_per_replica=32", "--batch_size_per_replica=64"]
    # the PSS run's one worker on one core where one is left for its ps and chief, whatever
    # the user's command said (the last flag wins)
    pin = "--pin_workers" if len(os.sched_getaffinity(0)) > 1 else "--nopin_workers"
    assert [a for a in commands[2] if a.endswith("pin_workers")][-1] == pin
    # the sharing calibration's two loops pinned as a comparison's (and auto's cluster) are
    loops = "--pin_loops" if len(os.sched_getaffinity(0)) >= 2 else "--nopin_loops"
    assert [a for a in commands[4] if a.endswith("pin_loops")][-1] == loops
    # each run writes where the profile looks for it, none in another's directory
    assert len({last(c, "results_dir") for c in commands}) == 5
