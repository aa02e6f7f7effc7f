"""A strategy is one registration: the launcher, TF_CONFIG checks, cloud specs, the comparison's
plan and the report ask its Kind, never its name. A new name registered with PSS's Kind (and
one with MWMS's) must be handled exactly as the original everywhere that asks."""
import dataclasses

import pytest

import strategies
from experiments.cloud.jobspec import JobSpec, run_command
from experiments.cloud.tfjob import tfjob
from experiments.cloud.vertex_job import vertex_custom_job
from experiments.comparison.plan import strategy_flags
from results.records import cells, metrics
from tf_config import TFConfigError, TaskRole, check_strategy_fits

TWINS = {"my_ps": "parameter_server", "my_allreduce": "multi_worker_mirrored",
         "my_replicas": "mirrored"}


@pytest.fixture
def twins(monkeypatch):
    registry = dict(strategies.REGISTRY)
    for new, old in TWINS.items():
        registry[new] = dataclasses.replace(strategies.REGISTRY[old], short=new)
    monkeypatch.setattr(strategies, "REGISTRY", registry)


def _role(cluster, task_type="worker"):
    return TaskRole(cluster=cluster, task_type=task_type, task_index=0)


@pytest.mark.parametrize("new", sorted(TWINS))
def test_a_registered_twin_is_handled_like_its_original(twins, new):
    old = TWINS[new]
    for n in (1, 2):
        assert strategies.needs_cluster(new, n) == strategies.needs_cluster(old, n)
        assert strategy_flags(new, n, 1, 1) == [f.replace(old, new) for f in
                                                strategy_flags(old, n, 1, 1)]
        record = {"strategy": new, "num_workers": n, "num_replicas_in_sync": n}
        assert cells.workers_of(record) == cells.workers_of({**record, "strategy": old})
        assert cells.single_process(new, n) == cells.single_process(old, n)
        assert metrics.per_worker_step_time(10.0, 5, new, n) == \
            metrics.per_worker_step_time(10.0, 5, old, n)
    spec = dict(num_workers=2, num_ps=1 if old == "parameter_server" else 0, num_replicas=2,
                run_args=[], image_uri="img")
    assert run_command(JobSpec(strategy=new, **spec))[1] == [
        a.replace(old, new) for a in run_command(JobSpec(strategy=old, **spec))[1]]
    pools = [p["replica_count"] for p in vertex_custom_job(JobSpec(strategy=new, **spec))
             ["worker_pool_specs"]]
    assert pools == [p["replica_count"] for p in vertex_custom_job(
        JobSpec(strategy=old, **spec))["worker_pool_specs"]]
    if old == "mirrored":
        with pytest.raises(ValueError, match="not 'my_replicas'"):
            tfjob(JobSpec(strategy=new, **spec))
    else:
        replicas = tfjob(JobSpec(strategy=new, **spec))["spec"]["tfReplicaSpecs"]
        assert {k: v["replicas"] for k, v in replicas.items()} == {
            k: v["replicas"] for k, v in tfjob(JobSpec(strategy=old, **spec))["spec"]
            ["tfReplicaSpecs"].items()}


def test_tf_config_checks_follow_the_kind(twins):
    ps_cluster = {"chief": ["h:1"], "worker": ["h:2"], "ps": ["h:3"]}
    check_strategy_fits("my_ps", _role(ps_cluster, "chief"))
    with pytest.raises(TFConfigError, match="strategy my_allreduce cannot use a cluster with "
                                            "'ps' tasks"):
        check_strategy_fits("my_allreduce", _role(ps_cluster))
    with pytest.raises(TFConfigError, match="--strategy=my_ps needs a chief, workers and ps"):
        check_strategy_fits("my_ps", None, tf_config_set=True)
    with pytest.raises(TFConfigError, match="strategy my_replicas runs in one process"):
        check_strategy_fits("my_replicas", _role({"worker": ["h:1", "h:2"]}))


def test_a_name_that_is_no_strategy_is_a_plain_process():
    plain = strategies.kind("engine_floor")
    assert not (plain.multi_worker or plain.parameter_servers or plain.pipelined
                or plain.local_replicas)
    assert not strategies.needs_cluster("engine_floor", 4)


def test_what_runs_in_one_process_is_unchanged_by_the_registry():
    """The report's single-process peers (results/records/cells.py): one device and local replicas
    at any N, MWMS and the plain loop at N=1; never PSS, pipelines, or a TPU (it runs elsewhere)."""
    assert cells.single_process("one_device", 1) and cells.single_process("mirrored", 4)
    assert cells.single_process("central_storage", 2)
    assert cells.single_process("multi_worker_mirrored", 1)
    assert not cells.single_process("multi_worker_mirrored", 2)
    assert cells.single_process("engine_floor", 1) and not cells.single_process("engine_floor", 2)
    for name in ("parameter_server", "model_parallel", "hybrid", "tpu"):
        assert not cells.single_process(name, 1)
