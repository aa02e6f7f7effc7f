"""--strategy=auto: the planner's best replaces the strategy and its counts; bad input is one
line (pure Python: no TensorFlow)."""
import dataclasses
import json
import os

import pytest

from experiments.config import ConfigError, RunConfig, auto, validate
from experiments.config import planned_run
from results.model import planner, specs

PROFILE = {"model": "mlp", "batch": 64, "compute_s": 0.002, "gradient_bytes": {"float32": 400000},
           "pull_bytes": 400000, "parameter_bytes": 400000, "optimizer_state_bytes": 400000}


def _files(tmp_path, cluster):
    (tmp_path / "p.json").write_text(json.dumps(PROFILE))
    (tmp_path / "c.json").write_text(json.dumps(cluster))
    return str(tmp_path / "p.json"), str(tmp_path / "c.json")


@pytest.mark.parametrize("cluster, strategy, pin", [
    ({"hosts": 1, "devices_per_host": 2, "intra_host_gbps": 100}, "mirrored", False),
    # 2 MWMS workers (one per host) of the launcher's threads (cores // 2): pinned on 2 cores
    # where each has one thread
    ({"hosts": 2, "devices_per_host": 2, "inter_host_gbps": 100}, "multi_worker_mirrored",
     os.cpu_count() < 4),
    # 1.6 ms of compute against 400 KB through a 0.01 Gbit/s link: one device
    ({"hosts": 4, "inter_host_gbps": 0.01}, "one_device", False),
])
def test_auto_runs_the_plans_best(tmp_path, cluster, strategy, pin):
    profile, spec = _files(tmp_path, cluster)
    cfg = RunConfig(strategy="auto", plan_profile=profile, plan_cluster=spec, model="mlp",
                    results_dir=str(tmp_path), num_ps=1)
    chosen, plan, flags, placed = auto.resolve(cfg, 2)
    best = planner.best(planner.plan(specs.load_profile(profile),
                                     specs.load_cluster(spec)))
    assert chosen.strategy == strategy == planned_run.settings(best.config)["strategy"]
    assert plan["chosen"]["configuration"] == best.config.name
    assert plan["runners_up"] and all(r["predicted_examples_per_sec"] <=
                                      plan["chosen"]["predicted_examples_per_sec"]
                                      for r in plan["runners_up"])
    assert f"--strategy={strategy}" in flags
    # the local cluster pinned as a comparison's would be on 2 cores (tf_config.cores)
    assert flags[-1] == ("--pin_workers" if pin else "--nopin_workers") and placed.pinned is pin
    assert chosen.num_ps == planned_run.settings(best.config)["num_ps"]  # the user's 1 replaced
    validate(chosen)  # what it trains is a valid run
    assert dataclasses.replace(chosen, strategy="auto") != cfg or strategy == "one_device"


def test_auto_says_what_is_missing_or_wrong(tmp_path):
    profile, spec = _files(tmp_path, {"hosts": 2})
    for cfg, message in (
            (RunConfig(strategy="auto"), "--strategy=auto needs a cluster to plan for"),
            (RunConfig(strategy="auto", plan_profile=profile, plan_cluster="/no.json"),
             "--plan_cluster=/no.json: cannot read it as JSON"),
            (RunConfig(strategy="auto", plan_profile=spec, plan_cluster=spec),
             "--plan_profile=")):
        with pytest.raises(ConfigError, match=message):
            auto.resolve(cfg, 2)
    tiny = _files(tmp_path, {"hosts": 2, "memory_per_device_mb": 0.1})
    with pytest.raises(ConfigError, match="no configuration of 'mlp' fits 0.1 MB per device"):
        auto.choose(*tiny)


@pytest.mark.parametrize("workers, strategy, available, pin", [
    (2, "multi_worker_mirrored", 2, "--pin_workers"),  # two one-thread workers, two cores
    (2, "multi_worker_mirrored", 1, "--nopin_workers"),  # --pin_cores=1: they share one
    (1, "parameter_server", 2, "--pin_workers"),  # a core left for its ps and chief
    (4, "parameter_server", 2, "--nopin_workers"),
])
def test_the_choice_is_pinned_as_a_comparison_pins_it(workers, strategy, available, pin):
    """The flags auto adds to a local run (and --adapt to a segment, and experiments.plan's
    command for this machine) pin its workers where a comparison on those cores pins the same
    cluster: the runs its profile came from."""
    from experiments.comparison.plan import strategy_flags
    values = planned_run.settings(planner.Config(strategy, workers, workers, 1, num_ps=1))
    assert auto.pin_flag(values, available, 1) == pin
    assert ("--pin_workers" in strategy_flags(strategy, workers, 1, 1, available)) == \
        (pin == "--pin_workers")
