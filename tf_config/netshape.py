"""An emulated network for a local cluster: a traffic shaper on the loopback of its private
network namespace (tf_config/netns.py), gone with the namespace when the run ends.

    python -m experiments.run --strategy=multi_worker_mirrored --num_workers=2 \
        --emulate_bandwidth_gbps=0.2          # every task's traffic through a 200 Mbit/s shaper

Method: `tc qdisc replace dev lo root tbf rate R` (token bucket). Every packet any task sends
leaves through that one loopback, so R is the **aggregate** rate of all links together, not a
per-link rate: two workers sending at once get about R/2 each (the scaling model's network
experiment maps it that way). `--emulate_latency_ms` needs the kernel's `netem` qdisc, missing on
some machines (probed, and said so). The shaper is applied inside the namespace before the tasks
start (tf_config.netns), so nothing is ever changed on the host's own loopback.
"""
import json
import os
import shutil
import subprocess

SHAPE_ENV = "TFDIST_EMULATE"  # JSON {gbps, latency_ms}: asked for, applied by tf_config.netns
APPLIED_ENV = "TFDIST_EMULATED"  # JSON record entry, set once the shaper is in place
METHOD_TBF = "tc tbf on the private namespace's loopback (aggregate rate of all links)"
# Token-bucket depth: at least one 64 KiB gRPC frame plus headers, and ~1 ms at the rate, so
# short bursts do not pass at loopback speed nor do large rates stall on a tiny bucket.
_MIN_BURST_BYTES = 128 * 1024
_TBF_LATENCY = "100ms"  # how long a packet may wait in the bucket before it is dropped


class ShapingUnavailable(RuntimeError):
    """The machine cannot shape the namespace's loopback (one line: why)."""


def _tc():
    tc = shutil.which("tc") or next((p for p in ("/usr/sbin/tc", "/sbin/tc") if os.path.exists(p)),
                                    None)
    if tc is None:
        raise ShapingUnavailable("no `tc` command (iproute2) on this machine")
    return tc


def burst_bytes(gbps):
    return max(_MIN_BURST_BYTES, int(gbps * 1e9 / 8 / 1000))


def tbf_command(gbps):
    return [_tc(), "qdisc", "replace", "dev", "lo", "root", "tbf", "rate", f"{gbps * 1000:g}mbit",
            "burst", str(burst_bytes(gbps)), "latency", _TBF_LATENCY]


def netem_command(gbps, latency_ms):
    """netem delays (and, with a rate, also shapes) every packet."""
    command = [_tc(), "qdisc", "replace", "dev", "lo", "root", "netem", "delay", f"{latency_ms:g}ms"]
    return command + (["rate", f"{gbps * 1000:g}mbit"] if gbps else [])


def apply(gbps, latency_ms=0.0):
    """In the private namespace: puts the shaper on `lo`. Returns the record's `network` entry;
    raises ShapingUnavailable (one line) when the kernel or tools cannot."""
    command = netem_command(gbps, latency_ms) if latency_ms else tbf_command(gbps)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[0]
        kind = "netem (needed for --emulate_latency_ms)" if latency_ms else "tbf"
        raise ShapingUnavailable(f"`{' '.join(command[1:])}` failed: {why} (qdisc {kind})")
    return {"emulated_gbps": gbps or None, "latency_ms": latency_ms or None,
            "method": "tc netem on the private namespace's loopback" if latency_ms else METHOD_TBF,
            "qdisc": current_qdisc()}


def current_qdisc():
    """`tc qdisc show dev lo`'s root line (what is really in place)."""
    shown = subprocess.run([_tc(), "qdisc", "show", "dev", "lo"], capture_output=True, text=True)
    return (shown.stdout.strip().splitlines() or [""])[0]


def request_env(gbps, latency_ms, best_effort=False):
    return {SHAPE_ENV: json.dumps({"gbps": gbps, "latency_ms": latency_ms,
                                   "best_effort": best_effort})}


def requested():
    """(gbps, latency_ms, best_effort) asked for through the environment, or None."""
    raw = os.environ.get(SHAPE_ENV)
    if not raw:
        return None
    asked = json.loads(raw)
    return asked["gbps"], asked["latency_ms"], asked["best_effort"]


def unshaped(why):
    """The record's `network` entry when shaping was asked for but not possible (best effort)."""
    return {"emulated_gbps": None, "latency_ms": None, "method": f"none: {why}", "qdisc": None}


def recorded():
    """The record's `network` entry: what was applied (None: the real network, unshaped)."""
    raw = os.environ.get(APPLIED_ENV)
    return json.loads(raw) if raw else None
