"""The meeting of a platform's tasks before TensorFlow starts (tf_config/rendezvous.py): real
sockets on loopback, the chief and each task in a thread of their own."""
import threading

import pytest

from tf_config import rendezvous
from tf_config.spec import free_ports


def _meet(tasks, decide, joiners=None, timeout=20.0):
    address = f"127.0.0.1:{free_ports(1)[0]}"
    got, errors = {}, {}

    def join(task):
        try:
            got[task] = rendezvous.join(address, task, timeout, retry_s=0.05)
        except rendezvous.RendezvousError as e:
            errors[task] = str(e)

    threads = [threading.Thread(target=join, args=(t,)) for t in (joiners or tasks)]
    for t in threads:  # the tasks start first: they retry until the chief listens
        t.start()
    try:
        served = rendezvous.serve(address, tasks, decide, timeout, out=lambda line: None)
    except Exception as e:  # noqa: BLE001 - the chief's own failure, returned for the test
        served = e
    for t in threads:
        t.join(timeout)
    return served, got, errors


def test_every_task_gets_the_chiefs_message_after_its_link_is_measured():
    seen = []

    def decide(links):
        seen.extend(links)
        return {"plan": [link.task for link in links]}

    served, got, errors = _meet(["worker:0", "ps:0"], decide)
    assert not errors
    assert served == got["worker:0"] == got["ps:0"] == {"plan": ["worker:0", "ps:0"]}
    assert [link.task for link in seen] == ["worker:0", "ps:0"]
    for link in seen:  # loopback: fast and near, but measured, not assumed
        assert 0 < link.latency_us < 1e5 and link.gbps > 0.05


def test_the_chiefs_failure_reaches_every_task_in_its_words():
    def decide(links):
        raise ValueError("--plan_profile=x.json: cannot read it as JSON")

    served, got, errors = _meet(["worker:0", "worker:1"], decide)
    assert isinstance(served, ValueError) and not got
    assert set(errors) == {"worker:0", "worker:1"}
    assert all("the chief says: --plan_profile=x.json: cannot read it as JSON" in e
               for e in errors.values())


def test_a_task_that_never_joins_is_named_and_nobody_waits_forever():
    served, got, errors = _meet(["worker:0", "worker:1"], lambda links: {"plan": 1},
                                joiners=["worker:0"], timeout=2.0)
    assert isinstance(served, rendezvous.RendezvousError)
    assert "worker:1 did not join within 2s" in str(served)
    assert "worker:0" in errors and not got  # told by the closed connection, not left waiting


def test_a_chief_that_never_listens_is_said_after_the_timeout():
    address = f"127.0.0.1:{free_ports(1)[0]}"
    with pytest.raises(rendezvous.RendezvousError, match=f"the chief at {address} did not answer"):
        rendezvous.join(address, "worker:0", 0.5, retry_s=0.1)
