import json

import pytest

from tf_config import spec

CLUSTER = {"worker": ["127.0.0.1:2001", "127.0.0.1:2002"]}
PSS_CLUSTER = {"chief": ["h0:2000"], "worker": ["h1:2001", "h2:2001"], "ps": ["h3:2002"]}


def _tf(cluster, kind, index, **extra):
    return json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}, **extra})


@pytest.mark.parametrize("text, fragment", [
    ("{bad", "not valid JSON"),
    ("[]", "JSON object"),
    ('{"task": {"type": "worker", "index": 0}}', "'cluster'"),
    (json.dumps({"cluster": CLUSTER}), "'task'"),
    (json.dumps({"cluster": {}, "task": {"type": "worker", "index": 0}}), "non-empty"),
    (_tf({"trainer": ["h:1"]}, "trainer", 0), "unknown task type 'trainer'"),
    (_tf(CLUSTER, "boss", 0), "task.type is 'boss'"),
    (_tf(CLUSTER, "worker", 2), "out of range"),
    (_tf(CLUSTER, "worker", -1), "task.index"),
    (_tf(CLUSTER, "worker", "one"), "task.index"),
    (_tf({"worker": ["127.0.0.1:2001", "127.0.0.1:2001"]}, "worker", 0), "appears twice"),
    (_tf({"worker": ["no-port"]}, "worker", 0), "no-port"),
    (_tf({"worker": ["h:99999"]}, "worker", 0), "h:99999"),
    (_tf({"worker": "h:1"}, "worker", 0), "must be a list"),
    (_tf({"chief": ["a:1", "b:1"], "worker": ["c:1"]}, "worker", 0), "at most 1"),
    (_tf({"chief": ["a:1"], "master": ["b:1"], "worker": ["c:1"]}, "worker", 0), "both"),
])
def test_malformed_tf_config_is_named(text, fragment):
    with pytest.raises(spec.TFConfigError, match=None) as err:
        spec.parse_tf_config(text)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_vertex_ai_tf_config():
    text = json.dumps({"cluster": PSS_CLUSTER, "task": {"type": "worker", "index": 1, "trial": ""},
                       "environment": "cloud", "job": {"worker_pool_specs": []}})
    role = spec.parse_tf_config(text)
    assert (role.task_type, role.task_index, role.is_chief) == ("worker", 1, False)
    assert (role.num_workers, role.num_ps) == (2, 1)
    assert spec.parse_tf_config(_tf(PSS_CLUSTER, "chief", 0)).is_chief


def test_master_and_kubeflow_evaluator():
    cluster = {"master": ["job-master-0.ns.svc:2222"], "worker": ["job-worker-0.ns.svc:2222"]}
    role = spec.parse_tf_config(_tf(cluster, "master", 0))
    assert role.is_chief and role.tf_cluster() == {"chief": ["job-master-0.ns.svc:2222"],
                                                   "worker": ["job-worker-0.ns.svc:2222"]}
    evaluator = spec.parse_tf_config(_tf(cluster, "evaluator", 0))  # TFJob leaves it out
    assert evaluator.task_type == "evaluator" and not evaluator.is_chief


def test_mwms_chief_is_worker_zero():
    assert spec.parse_tf_config(_tf(CLUSTER, "worker", 0)).is_chief
    assert not spec.parse_tf_config(_tf(CLUSTER, "worker", 1)).is_chief


def test_role_from_env_single_task_means_alone():
    assert spec.role_from_env({}) is None
    assert spec.role_from_env({"TF_CONFIG": _tf({"chief": ["h:1"]}, "chief", 0)}) is None
    assert spec.role_from_env({"TF_CONFIG": _tf(CLUSTER, "worker", 1)}).task_index == 1


@pytest.mark.parametrize("strategy, cluster, fragment", [
    ("multi_worker_mirrored", PSS_CLUSTER, "cannot use a cluster with 'ps'"),
    ("parameter_server", CLUSTER, "needs cluster.chief and cluster.ps"),
    ("parameter_server", {"chief": ["h:1"], "worker": ["h:2"]}, "cluster.ps"),
    ("mirrored", CLUSTER, "runs in one process"),
])
def test_strategy_must_fit_cluster(strategy, cluster, fragment):
    role = spec.parse_tf_config(_tf(cluster, sorted(cluster)[0], 0))
    with pytest.raises(spec.TFConfigError) as err:
        spec.check_strategy_fits(strategy, role)
    assert fragment in str(err.value)


def test_strategy_fits():
    spec.check_strategy_fits("parameter_server", spec.parse_tf_config(_tf(PSS_CLUSTER, "ps", 0)))
    spec.check_strategy_fits("multi_worker_mirrored", spec.parse_tf_config(_tf(CLUSTER, "worker", 0)))


def test_local_cluster_ports_are_distinct_and_roundtrip():
    cluster = spec.local_cluster(2, num_ps=1, chief=True)
    addresses = [a for v in cluster.values() for a in v]
    assert sorted(cluster) == ["chief", "ps", "worker"] and len(set(addresses)) == 4
    role = spec.parse_tf_config(spec.tf_config_json(cluster, "ps", 0))
    assert role.cluster == cluster
    with pytest.raises(spec.TFConfigError):
        spec.local_cluster(0)


def test_one_task_tf_config_cannot_run_pss():
    """role_from_env turns a one-task TF_CONFIG into None (run alone): fine for MWMS, not PSS."""
    spec.check_strategy_fits("multi_worker_mirrored", None, tf_config_set=True)
    spec.check_strategy_fits("parameter_server", None, tf_config_set=False)  # no TF_CONFIG
    with pytest.raises(spec.TFConfigError, match="does not fit: it describes a single task"):
        spec.check_strategy_fits("parameter_server", None, tf_config_set=True)


def test_pinned_workers_get_their_own_cores_round_robin():
    from tf_config.cores import worker_cpus
    assert [worker_cpus(i, 1, {0, 1}) for i in range(4)] == [[0], [1], [0], [1]]
    assert [worker_cpus(i, 2, {4, 5, 6, 7}) for i in range(2)] == [[4, 5], [6, 7]]
    assert worker_cpus(0, 3, {0, 1}) == [0, 1]  # more threads than cores: every core once


def test_a_pinned_clusters_other_tasks_get_the_cores_its_workers_leave(monkeypatch):
    from tf_config import cores
    from tf_config.events import PIN_CPUS_ENV, RUN_CPUS_ENV
    monkeypatch.setattr(cores.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})

    def spare(workers, threads):  # the chief's and the ps' environment alike
        where = cores.placement("parameter_server", workers, 1, threads, pin=True)
        assert where.env("chief", 0) == where.env("ps", 0)
        return where.env("ps", 0)

    assert spare(1, 1) == {PIN_CPUS_ENV: "1,2,3", RUN_CPUS_ENV: "4"}
    assert spare(1, 2) == {PIN_CPUS_ENV: "2,3", RUN_CPUS_ENV: "4"}
    assert spare(2, 2) == {}  # the workers take every core: the others unpinned
    assert spare(5, 1) == {}  # round robin over every core
    where = cores.placement("multi_worker_mirrored", 3, 0, 1, pin=True)
    assert [where.env("worker", i)[PIN_CPUS_ENV] for i in range(3)] == ["0", "1", "2"]
    assert where.env("worker", 0)[RUN_CPUS_ENV] == "4"
    # a run told --nopin_workers (or --pin_cores=2: the first two CPUs) places its tasks so
    assert not cores.placement("multi_worker_mirrored", 2, 0, 1, pin=False).env("worker", 0)
    assert cores.placement("multi_worker_mirrored", 2, 0, 1, cores.usable_cpus(2)).worker_cpus \
        == ((0,), (1,))


@pytest.mark.parametrize("strategy, workers, ps, available, threads, pinned", [
    ("multi_worker_mirrored", 2, 0, 2, 1, True),
    ("multi_worker_mirrored", 2, 0, 2, 2, False),  # 4 threads of work on 2 cores
    ("multi_worker_mirrored", 4, 0, 2, 1, False),  # more workers than cores
    ("multi_worker_mirrored", 1, 0, 2, 1, False),  # one process
    ("parameter_server", 1, 1, 2, 1, True),  # a core left for its ps and chief
    ("parameter_server", 1, 1, 1, 1, False),  # none left
    ("parameter_server", 2, 1, 2, 1, True),
    ("mirrored", 2, 0, 2, 1, False),  # local replicas: one process
    ("one_device", 1, 0, 2, 1, False),
    ("hybrid", 2, 0, 8, 1, False),  # a pipeline's stages place themselves
    ("multi_worker_mirrored", 2, 0, 0, 1, False),  # cores not known
])
def test_one_rule_pins_every_local_cluster(strategy, workers, ps, available, threads, pinned):
    """tf_config.cores.placement: the comparison's cells, --strategy=auto's choice and
    profile, --adapt's segments and the plan's command for this machine ask it."""
    from tf_config.cores import placement
    where = placement(strategy, workers, ps, threads, available)
    assert where.pinned is pinned and where.threads == threads
    assert len(where.worker_cpus) == (workers if pinned else 0)


def test_the_rule_takes_the_launchers_threads_when_none_are_given(monkeypatch):
    from tf_config import cores
    monkeypatch.setattr(cores.os, "cpu_count", lambda: 8)
    # the launcher's default: 8 cores // 2 tasks = 4 threads each, 8 of work: pinned
    assert cores.placement("multi_worker_mirrored", 2, 0, 0, 8).pinned
    # PSS: 2 workers + ps + chief = 4 tasks, 2 threads each: 4 of work on 8 cores
    pss = cores.placement("parameter_server", 2, 1, 0, 8)
    assert pss.pinned and pss.threads == 2 and pss.spare_cpus == (4, 5, 6, 7)
    # 8 threads on 6 cores
    assert not cores.placement("multi_worker_mirrored", 2, 0, 0, 6).pinned
    # a plan for another machine counts the launcher's threads on its cores
    assert cores.placement("multi_worker_mirrored", 2, 0, 0, 2, machine_cores=2).pinned
