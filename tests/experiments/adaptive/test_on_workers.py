"""--strategy=auto on a platform's TF_CONFIG cluster (experiments/adaptive/on_workers.py): the
cluster spec the tasks fix, what they can run, and each task's cut-down TF_CONFIG."""
import json

import pytest

from experiments.adaptive import on_workers
from experiments.config import planned_run
from results.model import planner, specs
from tf_config import rendezvous
from tf_config.spec import TaskRole

CLUSTER = {"chief": ["c:1"], "worker": ["w0:1", "w1:1", "w2:1"], "ps": ["p0:1", "p1:1"]}


def _role(task_type="chief", index=0, cluster=CLUSTER):
    return TaskRole(cluster, task_type, index)


def _links(*gbps):
    return [rendezvous.Link(f"worker:{i}", 50.0 + i, g) for i, g in enumerate(gbps)]


def test_the_cluster_spec_is_tf_configs_with_the_links_measured():
    spec = on_workers.cluster_spec(_role(), _links(9.0, 10.0, 1.0))
    assert (spec.hosts, spec.devices_per_host, spec.num_ps) == (4, 1, 2)
    assert spec.inter_host_gbps == 9.0 and spec.inter_host_latency_us == 51.0  # medians
    assert spec.machine_cores == 0  # each task a machine of its own
    given = specs.ClusterSpec(hosts=64, devices_per_host=4, memory_per_device_mb=16000,
                              inter_host_gbps=100.0, ps_cores=8,
                              ps_placement="with_workers")
    mixed = on_workers.cluster_spec(_role(), _links(9.0), given)
    assert (mixed.hosts, mixed.devices_per_host, mixed.memory_per_device_mb,
            mixed.inter_host_gbps) == (4, 4, 16000, 9.0)
    # what the given spec says of its parameter servers stays (TF_CONFIG says how many)
    assert (mixed.ps_cores, mixed.ps_placement, mixed.num_ps) == (8, "with_workers", 2)
    assert on_workers.others(_role()) == ["worker:0", "worker:1", "worker:2", "ps:0", "ps:1"]


def _config(strategy, workers, hosts, num_ps=0):
    return planner.Config(strategy, workers, hosts, 1, num_ps)


@pytest.mark.parametrize("config, why", [
    (_config("one_device", 1, 1), ""),
    (_config("multi_worker_mirrored", 4, 4), ""),
    (_config("multi_worker_mirrored", 8, 8), "4 task(s)"),
    (_config("parameter_server", 3, 3, 2), ""),
    (_config("parameter_server", 4, 4, 1), "3 worker(s) and 2 ps"),
    (_config("parameter_server", 2, 2, 4), "3 worker(s) and 2 ps"),
])
def test_only_what_the_tasks_can_run_is_planned(config, why):
    said = on_workers.runnable(_role())(config)
    assert (said == "") if not why else (why in said)


def test_without_a_chief_task_nothing_coordinates_pss():
    workers_only = {"worker": ["w0:1", "w1:1"]}
    role = _role("worker", 0, workers_only)
    assert on_workers.runnable(role)(_config("multi_worker_mirrored", 2, 2)) == ""
    assert "no chief" in on_workers.runnable(role)(_config("parameter_server", 1, 1, 1))


def _settings(strategy, workers=1, ps=0):
    return {**planned_run.TOPOLOGY, **planned_run.TRAINING, "strategy": strategy,
            "num_workers": workers, "num_ps": ps}


def test_each_task_trains_under_tf_config_cut_to_the_choice_or_is_left_out():
    mwms = _settings("multi_worker_mirrored", 2)
    chief = json.loads(on_workers.tf_config_for(_role(), mwms))
    assert chief == {"cluster": {"chief": ["c:1"], "worker": ["w0:1"]},
                     "task": {"type": "chief", "index": 0}}
    assert json.loads(on_workers.tf_config_for(_role("worker", 0), mwms))["task"] == \
        {"type": "worker", "index": 0}
    for left_out in (_role("worker", 1), _role("ps", 0)):
        assert on_workers.tf_config_for(left_out, mwms) == on_workers.NOT_USED
    pss = _settings("parameter_server", 2, 1)
    assert json.loads(on_workers.tf_config_for(_role("ps", 0), pss))["cluster"] == \
        {"chief": ["c:1"], "worker": ["w0:1", "w1:1"], "ps": ["p0:1"]}
    assert on_workers.tf_config_for(_role("ps", 1), pss) == on_workers.NOT_USED
    alone = _settings("one_device")
    assert on_workers.tf_config_for(_role(), alone) is None  # the chief, with no cluster
    assert on_workers.tf_config_for(_role("worker", 2), alone) == on_workers.NOT_USED
