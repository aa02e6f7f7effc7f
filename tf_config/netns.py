"""Run a command in a private network namespace with only loopback up.

TF's gRPC servers listen on every interface without authentication (tensorflow#11689); inside a
fresh namespace "every interface" is just loopback, so a local cluster is unreachable from outside.
Asked to (tf_config/netshape.py), it also puts a traffic shaper on that loopback first.

    python -m tf_config.netns -- CMD ARGS...      # what `unshare --net` re-executes
"""
import fcntl
import json
import os
import shutil
import socket
import struct
import subprocess
import sys

from tf_config import netshape, schedules

ENV_MARK = "TFDIST_NETNS"  # set inside the namespace, so nothing re-isolates twice
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def in_private_namespace():
    return os.environ.get(ENV_MARK) == "1"


def bring_loopback_up():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


def isolation_available():
    """True when `unshare --net` works here (it needs root or unprivileged user namespaces)."""
    unshare = shutil.which("unshare")
    if not unshare or not sys.platform.startswith("linux"):
        return False
    probe = subprocess.run([unshare, "--net", "true"], capture_output=True)
    if probe.returncode == 0:
        return True
    probe = subprocess.run([unshare, "--net", "--map-root-user", "true"], capture_output=True)
    return probe.returncode == 0


def unshare_prefix():
    """The command prefix that runs what follows in a new network namespace."""
    unshare = [shutil.which("unshare"), "--net"]
    if os.geteuid() != 0:
        unshare.append("--map-root-user")
    return unshare + ["--"]


def isolated_command(argv):
    """`argv` wrapped so it runs in a new network namespace with loopback up. `unshare` execs
    (no fork), so the wrapped command keeps the launcher's PID and receives its signals."""
    return unshare_prefix() + [sys.executable, "-m", "tf_config.netns", "--"] + list(argv)


def check_shaping(gbps, latency_ms):
    """On the host, before launching: tries the shaper tf_config.netshape would apply, in a
    throw-away namespace. Raises netshape.ShapingUnavailable (one line) when the namespace,
    `tc` or the qdisc (tbf; netem for a latency) is missing."""
    if not isolation_available():
        raise netshape.ShapingUnavailable("no private network namespace here (`unshare --net` "
                                          "failed)")
    command = netshape.netem_command(gbps, latency_ms) if latency_ms else \
        netshape.tbf_command(gbps)
    done = subprocess.run(unshare_prefix() + command, capture_output=True, text=True)
    if done.returncode:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[0]
        kind = "netem, needed for --emulate_latency_ms" if latency_ms else "tbf"
        raise netshape.ShapingUnavailable(f"`tc qdisc ... {command[6]}` failed: {why} ({kind})")


def main():
    argv = sys.argv[1:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: python -m tf_config.netns -- CMD [ARGS...]", file=sys.stderr)
        sys.exit(2)
    bring_loopback_up()
    os.environ[ENV_MARK] = "1"
    asked = netshape.requested()
    if asked is not None:  # an emulated network: shape this namespace's loopback before any task
        gbps, latency_ms, best_effort, schedule = asked
        try:
            applied = netshape.apply(gbps, latency_ms)
            if schedule:  # the record's network says the whole schedule, beside the rate now
                applied["schedule"] = schedules.text(schedule)
        except netshape.ShapingUnavailable as e:
            if not best_effort:
                sys.stderr.write(f"error: cannot emulate the network: {e}; pass "
                                 "--emulate_network=best_effort to run on the real one\n")
                sys.exit(2)
            sys.stderr.write(f"WARNING: cannot emulate the network ({e}); running unshaped\n")
            applied = netshape.unshaped(str(e))
        os.environ[netshape.APPLIED_ENV] = json.dumps(applied)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
