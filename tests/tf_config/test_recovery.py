"""The launcher's restart policy and its journal (tf_config.recovery), without processes."""
import json

from tf_config import recovery


def _decide(policy, name="worker:1", code=-9, pss=False, at_step=12, chief_done=False,
            peer_lost=False):
    return policy.decide(name, name.split(":")[0], code, pss, at_step, chief_done=chief_done,
                         peer_lost=peer_lost)


def test_an_error_exit_fails_whatever_the_budget():
    policy = recovery.RestartPolicy(max_restarts=3, cluster_restarts=True)
    d = _decide(policy, code=1)
    assert d.action == recovery.FAIL and d.reason == "task worker:1 exited with code 1"
    assert policy.spent == 0


def test_an_error_caused_by_a_lost_peer_counts_as_lost():
    # A PSS chief whose fetch hit a restarted worker ("... was probably restarted"), exit 1.
    with_ckpt = recovery.RestartPolicy(max_restarts=3, cluster_restarts=True)
    d = _decide(with_ckpt, name="chief:0", code=1, pss=True, at_step=1, peer_lost=True)
    assert d.action == recovery.RESTART_CLUSTER
    assert d.reason.startswith("chief:0 lost at step 1 (exited with code 1 after losing a peer)")
    without = recovery.RestartPolicy(max_restarts=3, cluster_restarts=False)
    d = _decide(without, name="chief:0", code=1, pss=True, peer_lost=True)
    assert d.action == recovery.FAIL and "after losing a peer; --checkpoint_dir" in d.reason


def test_a_lost_pss_worker_is_restarted_alone_even_without_checkpoints():
    policy = recovery.RestartPolicy(max_restarts=2, cluster_restarts=False)
    d = _decide(policy, pss=True, at_step=0)
    assert d.action == recovery.RESTART_TASK
    assert d.reason.startswith("worker:1 lost before the first step (killed by signal 9)")
    assert "(restart 1/2)" in d.reason


def test_other_losses_restart_the_cluster_only_with_checkpoints():
    without = recovery.RestartPolicy(max_restarts=3, cluster_restarts=False)
    for name, pss in (("worker:1", False), ("ps:0", True), ("chief:0", True)):
        d = _decide(without, name=name, pss=pss)
        assert d.action == recovery.FAIL and "--checkpoint_dir turns on" in d.reason
    with_ckpt = recovery.RestartPolicy(max_restarts=3, cluster_restarts=True)
    d = _decide(with_ckpt, name="ps:0", pss=True, at_step=212)
    assert d.action == recovery.RESTART_CLUSTER
    assert d.reason.startswith("ps:0 lost at step 212 (killed by signal 9); restarting the whole")


def test_preemption_restarts_the_cluster():
    policy = recovery.RestartPolicy(max_restarts=1, cluster_restarts=True)
    d = _decide(policy, code=75)
    assert d.action == recovery.RESTART_CLUSTER and "worker:1 preempted at step 12" in d.reason


def test_the_budget_is_shared_and_its_end_names_the_restarts():
    policy = recovery.RestartPolicy(max_restarts=2, cluster_restarts=True)
    assert _decide(policy, name="worker:0", pss=True).action == recovery.RESTART_TASK
    assert _decide(policy, name="ps:0", pss=True).action == recovery.RESTART_CLUSTER
    d = _decide(policy, name="worker:0", pss=True)
    assert d.action == recovery.FAIL
    assert d.reason == ("task worker:0 was killed by signal 9; the restart budget is spent "
                        "(--max_restarts=2: restarted ps:0 x1, worker:0 x1)")


def test_a_loss_after_the_chief_finished_is_only_noted():
    policy = recovery.RestartPolicy(max_restarts=0)
    assert _decide(policy, chief_done=True).action == recovery.IGNORE
    assert _decide(policy, code=2, chief_done=True).action == recovery.FAIL


def test_journal_records_steps_lost_and_recovery(tmp_path):
    path = str(tmp_path / "events.json")
    journal = recovery.Journal(path)
    journal.fault("kill", "worker:1", 12)
    journal.restart("worker:1", 14, "why", recovery.RESTART_CLUSTER)
    assert journal.recovered("worker:1") is None  # a cluster restart recovers at its first step
    journal.resumed(10)
    message = journal.recovered()
    assert message.startswith("recovered in ") and "resumed from step 10, 4 step(s) lost" in message
    journal.restart("worker:0", 30, "why", recovery.RESTART_TASK)
    assert journal.recovered("worker:1") is None  # not the task that was restarted
    assert journal.recovered() is None  # the chief's next step: the worker is not back yet
    assert journal.recovered("worker:0").startswith("worker:0 back after ")
    journal.restart("chief:0", 3, "why", recovery.RESTART_CLUSTER)
    journal.recovered()  # no checkpoint restored: everything since the start is lost
    with open(path) as f:
        saved = json.load(f)
    assert saved["faults"] == [{"task": "worker:1", "at_step": 12, "mode": "kill"}]
    assert [(r["task"], r["action"], r["steps_lost"], r["resumed_from_step"])
            for r in saved["restarts"]] == [("worker:1", "cluster", 4, 10),
                                              ("worker:0", "task", 0, None),
                                              ("chief:0", "cluster", 3, 0)]
    assert all(r["recovery_s"] >= 0 for r in saved["restarts"])
