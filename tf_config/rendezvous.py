"""A cluster that a platform already started (TF_CONFIG: Vertex AI, a TFJob, by hand) meeting
before TensorFlow opens its servers: the chief measures its link to every other task and then
hands each the same message (--strategy=auto's plan, experiments/adaptive/on_workers.py).

It talks on the chief's own TF_CONFIG address, which stays free until TensorFlow binds it after
the meeting. Every other task connects (retrying while the chief starts), says who it is, takes
part in the chief's link probe and waits for the message. The probe, per task, from the chief:
PINGS round trips of one byte (latency: half the median), then PROBE_BYTES sent by the task
and timed by the chief from the first byte to the last, REPEATS times (bandwidth: the fastest,
in Gbit/s of payload; TCP on the same path as TensorFlow's gRPC, so it bounds what gRPC gets).
Nothing here imports TensorFlow.
"""
import dataclasses
import json
import socket
import statistics
import struct
import time

PINGS = 20
PROBE_BYTES = 16 << 20
REPEATS = 3
_CHUNK = 1 << 20


class RendezvousError(RuntimeError):
    """The cluster did not meet (one line: who was missing, or what broke)."""


class ChiefFailed(RendezvousError):
    """The chief could not plan; its own one line, and whether that was the user's input."""

    def __init__(self, said, bad_input):
        super().__init__(said)
        self.bad_input = bad_input


@dataclasses.dataclass(frozen=True)
class Link:
    """The chief's link to one task, as measured."""
    task: str
    latency_us: float  # one way: half the median round trip of one byte
    gbps: float  # the fastest of REPEATS transfers of PROBE_BYTES, task to chief

    def to_dict(self):
        return dataclasses.asdict(self)


def _host_port(address):
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def _send(sock, obj):
    data = json.dumps(obj).encode()
    sock.sendall(struct.pack("!I", len(data)) + data)


def _recv_exact(sock, n):
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(min(_CHUNK, n - len(out)))
        if not chunk:
            raise ConnectionError("the other side closed the connection")
        out += chunk
    return bytes(out)


def _recv(sock):
    (size,) = struct.unpack("!I", _recv_exact(sock, 4))
    if size > _MAX_MESSAGE:
        raise ValueError(f"a message of {size} bytes is not the rendezvous's")
    return json.loads(_recv_exact(sock, size))


def _probe(sock, task):
    """Link of `task` (the chief's side of the probe; see the module doc)."""
    rtts = []
    for _ in range(PINGS):
        start = time.perf_counter()
        sock.sendall(b"p")
        _recv_exact(sock, 1)
        rtts.append(time.perf_counter() - start)
    best = None
    for _ in range(REPEATS):
        sock.sendall(b"s")  # send me PROBE_BYTES
        _recv_exact(sock, 1)  # its first byte: the clock starts once data flows
        start = time.perf_counter()
        _recv_exact(sock, PROBE_BYTES - 1)
        seconds = time.perf_counter() - start
        best = seconds if best is None else min(best, seconds)
    sock.sendall(b"d")
    return Link(task, statistics.median(rtts) / 2 * 1e6,
                (PROBE_BYTES - 1) * 8 / best / 1e9 if best > 0 else float("inf"))


def _answer_probe(sock):
    """The task's side of the probe: echo pings, send the bytes asked for, until done."""
    payload = b"\0" * PROBE_BYTES
    while True:
        what = _recv_exact(sock, 1)
        if what == b"p":
            sock.sendall(b"p")
        elif what == b"s":
            sock.sendall(payload)
        elif what == b"d":
            return
        else:
            raise ConnectionError(f"unexpected probe byte {what!r}")


HELLO_S = 10.0  # a connection that says nothing this long is not one of the tasks
PROBE_S = 60.0  # a link probe takes well under a second; a task silent this long is lost
_MAX_MESSAGE = 64 << 20  # a hello or a plan is a few KB; anything larger is not ours


def serve(address, tasks, decide, timeout_s, out=print):
    """The chief's side: listens on `address` ("host:port", bound on every interface as
    TensorFlow's server would be), waits up to timeout_s for every task name in `tasks` (a
    connection that is not one of them is closed and ignored; a task that connects again, as a
    restarted one does, replaces its first connection), probes each link, calls decide(links)
    -> message (a dict), sends it to every task and returns it. decide's exception reaches the
    tasks as {"error": its first line, "bad_input": bad_input(exception)} and is raised here
    too, so no task waits for a message that will not come. RendezvousError (one line) when a
    task does not join in time or a link breaks."""
    host, port = _host_port(address)
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    joined = {}
    try:
        try:
            listener.bind(("", port))
            listener.listen(len(tasks) + 1)
            deadline = time.monotonic() + timeout_s
            measured, lost = {}, {}
            while len(measured) < len(tasks):
                _accept(listener, joined, measured, tasks, deadline, address, timeout_s, lost)
                for task in tasks:  # one at a time: a probe alone on the chief's link
                    if task in measured:
                        continue
                    try:
                        joined[task].settimeout(
                            max(1.0, min(PROBE_S, deadline - time.monotonic())))
                        measured[task] = _probe(joined[task], task)
                    except (OSError, ConnectionError, struct.error) as e:
                        joined.pop(task).close()  # gone (restarting?): wait for it again
                        lost[task] = str(e) or type(e).__name__
            links = [measured[task] for task in tasks]
        except OSError as e:
            raise RendezvousError(f"rendezvous on {address} broke: {e}") from None
        out(f"rendezvous: {len(tasks)} task(s) joined; links "
            + ", ".join(f"{l.task} {l.gbps:.2f} Gbit/s {l.latency_us:.0f} us" for l in links))
        try:
            message = decide(links)
        except Exception as e:
            said = str(e).splitlines()[0] if str(e) else type(e).__name__
            _send_all(joined, {"error": said, "bad_input": bad_input(e)})
            raise
        # a task restarted while the chief planned: its new connection takes the plan
        _accept(listener, joined, measured, tasks, time.monotonic(), address, 0, {}, wait=False)
        failed = _send_all(joined, message)
        if failed:  # the chief must not train a plan a task never received
            raise RendezvousError(f"rendezvous on {address}: the plan did not reach "
                                  f"{', '.join(failed)}")
        return message
    finally:
        for conn in joined.values():
            conn.close()
        listener.close()


def _accept(listener, joined, measured, tasks, deadline, address, timeout_s, lost, wait=True):
    """Accepts connections until every task in `tasks` has one in `joined` (see serve); with
    wait=False only those already waiting. A task that connects again replaces its connection
    and is measured again."""
    while set(tasks) - set(joined) or not wait:
        left = deadline - time.monotonic()
        if left <= 0 and wait:
            missing = ", ".join(
                f"{t} ({'its link broke: ' + lost[t] if t in lost else 'never joined'})"
                for t in sorted(set(tasks) - set(joined)))
            raise RendezvousError(f"rendezvous on {address}: {missing}, within {timeout_s:g}s")
        listener.settimeout(left if wait else 0.0)
        try:
            conn, _ = listener.accept()
        except (socket.timeout, BlockingIOError):
            if wait:
                continue
            return
        task = _hello(conn, max(0.1, min(left, HELLO_S)) if wait else HELLO_S, tasks)
        if task is None:
            conn.close()
            continue
        if task in joined:  # restarted: its first connection is gone or going
            joined.pop(task).close()
            measured.pop(task, None)
        joined[task] = conn


def bad_input(error):
    """Whether the chief's failure is the user's input (exit 2 on every task) rather than a
    run that failed (exit 1): a ValueError, as ConfigError and SpecError are."""
    return isinstance(error, ValueError)


def _hello(conn, seconds, tasks):
    """The task name a new connection says within `seconds`, or None (silence, garbage, a
    name not in `tasks`: told so when it can still hear)."""
    try:
        conn.settimeout(seconds)
        hello = _recv(conn)
        task = hello.get("task") if isinstance(hello, dict) else None
        if task not in tasks:
            _send(conn, {"error": f"unexpected task {task!r}", "bad_input": True})
            return None
        return task
    except Exception:  # noqa: BLE001 - whatever a stranger sends, it is not a task's hello
        return None


def _send_all(joined, message):
    """Sends `message` to every joined task; one that is gone does not keep it from the rest.
    Returns the tasks it did not reach."""
    failed = []
    for task, conn in joined.items():
        try:
            _send(conn, message)
        except OSError:
            failed.append(task)
    return failed


def join(address, task, timeout_s, retry_s=0.5):
    """A task's side: connects to the chief at `address` (retrying until timeout_s while it
    starts), answers its probe and returns its message; RendezvousError when the chief never
    answers or sent {"error": ...}."""
    host, port = _host_port(address)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=max(1.0, retry_s))
            break
        except OSError as e:
            if time.monotonic() > deadline:
                raise RendezvousError(f"rendezvous: the chief at {address} did not answer "
                                      f"within {timeout_s:g}s ({e})") from None
            time.sleep(retry_s)
    try:
        sock.settimeout(timeout_s)
        _send(sock, {"task": task})
        while True:  # the chief may refuse before probing
            sock.setblocking(True)
            sock.settimeout(timeout_s)
            first = sock.recv(1, socket.MSG_PEEK)
            if not first:
                raise RendezvousError(f"rendezvous: the chief at {address} closed the connection")
            if first in (b"p", b"s", b"d"):
                _answer_probe(sock)
                continue
            message = _recv(sock)
            if "error" in message:
                raise ChiefFailed(message["error"], message.get("bad_input", False))
            return message
    except (OSError, ConnectionError, ValueError, struct.error) as e:
        raise RendezvousError(f"rendezvous with the chief at {address} broke: {e}") from None
    finally:
        sock.close()
