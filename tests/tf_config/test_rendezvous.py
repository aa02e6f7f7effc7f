"""The meeting of a platform's tasks before TensorFlow starts (tf_config/rendezvous.py): real
sockets on loopback, the chief and each task in a thread of their own."""
import json
import math
import socket
import struct
import threading
import time

import pytest

from tf_config import rendezvous
from tf_config.spec import free_ports


def _meet(tasks, decide, joiners=None, timeout=20.0, before=None, kinds=None, late=None,
          join_timeout=None):
    """late: {task: a threading.Event it waits for before joining}; join_timeout: the tasks'
    (the chief's: timeout)."""
    address = f"127.0.0.1:{free_ports(1)[0]}"
    got, errors = {}, {}
    kinds = {} if kinds is None else kinds  # task -> whether the chief said "bad input"

    early = threading.Thread(target=before, args=(address,), daemon=True) if before else None

    def join(task):
        if early is not None:  # the tasks come after it
            early.join(timeout)
        if task in (late or {}):
            late[task].wait(timeout)
        try:
            got[task] = rendezvous.join(address, task, join_timeout or timeout, retry_s=0.05)
        except rendezvous.ChiefFailed as e:
            errors[task], kinds[task] = str(e), e.bad_input
        except rendezvous.RendezvousError as e:
            errors[task] = str(e)

    if early is not None:  # a connection that comes before every task
        early.start()

    threads = [threading.Thread(target=join, args=(t,)) for t in (joiners or tasks)]
    for t in threads:  # the tasks start first: they retry until the chief listens
        t.start()
    try:
        served = rendezvous.serve(address, tasks, decide, timeout, out=lambda line: None)
    except Exception as e:  # noqa: BLE001 - the chief's own failure, returned for the test
        served = e
    for t in threads:
        t.join(join_timeout or timeout)
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
    for link in seen:  # measured, not assumed: figures of a real exchange
        assert 0 < link.latency_us and 0 < link.gbps and math.isfinite(link.gbps)


def test_the_chiefs_failure_reaches_every_task_in_its_words():
    def decide(links):
        raise ValueError("--plan_profile=x.json: cannot read it as JSON")

    kinds = {}
    served, got, errors = _meet(["worker:0", "worker:1"], decide, kinds=kinds)
    assert isinstance(served, ValueError) and not got
    assert set(errors) == {"worker:0", "worker:1"}
    assert all(e == "--plan_profile=x.json: cannot read it as JSON" for e in errors.values())
    assert kinds == {"worker:0": True, "worker:1": True}  # the user's input: exit 2
    # any other failure is not the user's
    kinds.clear()
    _, _, errors = _meet(["worker:0"], lambda links: 1 / 0, kinds=kinds)
    assert kinds == {"worker:0": False} and errors["worker:0"] == "division by zero"


def test_a_task_that_never_joins_is_named_and_nobody_waits_forever():
    # worker:0 would wait far longer than the chief: its error comes from the chief's close
    served, got, errors = _meet(["worker:0", "worker:1"], lambda links: {"plan": 1},
                                joiners=["worker:0"], timeout=3.0, join_timeout=120.0)
    assert isinstance(served, rendezvous.RendezvousError)
    assert str(served).endswith(": worker:1 (never joined), within 3s")  # worker:0 had joined
    assert not got and errors["worker:0"].endswith("closed the connection")


def test_a_chief_that_never_listens_is_said_after_the_timeout():
    address = f"127.0.0.1:{free_ports(1)[0]}"
    with pytest.raises(rendezvous.RendezvousError, match=f"the chief at {address} did not answer"):
        rendezvous.join(address, "worker:0", 0.5, retry_s=0.1)


def _connect(address):
    for _ in range(200):
        try:
            return socket.create_connection(rendezvous._host_port(address), timeout=5)
        except OSError:
            time.sleep(0.05)
    raise AssertionError("the chief never listened")


@pytest.mark.parametrize("what", [b"", b"GET / HTTP/1.1\r\n\r\n", b"\0\0\0\x05hello"])
def test_a_connection_that_is_not_a_task_is_ignored(what, monkeypatch):
    """A health check, a port scan, garbage: closed, and the tasks still meet (a silent one is
    dropped after HELLO_S, not after the whole timeout: the chief waiting that long on it would
    miss worker:0)."""
    monkeypatch.setattr(rendezvous, "HELLO_S", 2.0)
    held = []

    def stray(address):
        sock = _connect(address)
        held.append(sock)  # kept open: silence, not a closed connection
        if what:
            sock.sendall(what)

    served, got, errors = _meet(["worker:0"], lambda links: {"ok": 1}, before=stray)
    assert served == got["worker:0"] == {"ok": 1} and not errors
    held[0].settimeout(5)
    try:  # closed by the chief (a reset when what it sent was left unread)
        data = held[0].recv(1 << 16)
    except ConnectionResetError:
        data = b""
    assert data == b""
    held[0].close()


def test_a_restarted_task_replaces_its_first_connection(monkeypatch):
    """worker:0 says hello and its process dies (its socket stays open, as a half-dead one
    may) while worker:1 is late; the new worker:0 connects again: the chief closes the first
    connection, and both tasks get the plan."""
    first, hellos, replaced = [], [], threading.Event()
    real_hello = rendezvous._hello

    def hello(conn, seconds, tasks):  # the chief read a hello: the second worker:0's, at last
        task = real_hello(conn, seconds, tasks)
        hellos.append(task)
        if hellos.count("worker:0") == 2:
            replaced.set()
        return task
    monkeypatch.setattr(rendezvous, "_hello", hello)

    def early(address):
        sock = _connect(address)
        data = json.dumps({"task": "worker:0"}).encode()
        sock.sendall(struct.pack("!I", len(data)) + data)
        first.append(sock)

    # worker:1 joins once the chief has read the new worker:0's hello: were it first, the chief
    # would probe the dead connection (which never answers) before it saw the new one
    served, got, errors = _meet(["worker:0", "worker:1"], lambda links: {"ok": 2},
                                before=early, late={"worker:1": replaced})
    assert served == got["worker:0"] == got["worker:1"] == {"ok": 2} and not errors
    first[0].settimeout(5)
    assert first[0].recv(1) == b""  # closed by the chief, never probed
    first[0].close()


def test_the_plan_reaches_a_task_that_restarts_while_the_chief_plans(monkeypatch):
    address = f"127.0.0.1:{free_ports(1)[0]}"
    result, rejoined = {}, threading.Event()
    real_send = rendezvous._send

    def send(sock, obj):  # a task's hello: the restarted worker:0 is connected
        real_send(sock, obj)
        if "task" in obj:
            rejoined.set()
    monkeypatch.setattr(rendezvous, "_send", send)

    def worker():
        def restart():  # while the chief is in decide: connect again, as a new process
            result["second"] = rendezvous.join(address, "worker:0", 20, retry_s=0.05)
        old = _connect(address)
        data = json.dumps({"task": "worker:0"}).encode()
        old.sendall(struct.pack("!I", len(data)) + data)
        rendezvous._answer_probe(old)  # measured, then the process "dies"
        old.close()
        thread = threading.Thread(target=restart)
        thread.start()
        thread.join(20)

    def decide(links):
        assert rejoined.wait(20)  # the restarted task connects meanwhile
        return {"ok": 3}

    t = threading.Thread(target=worker)
    t.start()
    served = rendezvous.serve(address, ["worker:0"], decide, 20, out=lambda line: None)
    t.join(20)
    assert served == result["second"] == {"ok": 3}
