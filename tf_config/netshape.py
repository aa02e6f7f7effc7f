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

    python -m experiments.run --strategy=multi_worker_mirrored --num_workers=2 --epochs=6 \
        --emulate_bandwidth_schedule=0:1,2:0.05   # 1 Gbit/s, then 0.05 from the third epoch

A schedule changes the rate between epochs: the chief, inside the namespace, replaces the qdisc
before the epoch starts (`follow_schedule`), so every step of an epoch sees one rate and the
epoch's record says which (`emulated_gbps`). A run resumed at epoch k starts at the rate the
schedule gives k.
"""
import json
import os
import shutil
import subprocess

from tf_config import schedules

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


def parse_schedule(text):
    """'0:1,2:0.05' -> [(0, 1.0), (2, 0.05)]: from after E epochs, G Gbit/s in (0, 1000]."""
    return schedules.parse(text, "emulate_bandwidth_schedule", "GBPS", 0, 1000, "0:1,2:0.05")


def request_env(gbps, latency_ms, best_effort=False, schedule=()):
    return {SHAPE_ENV: json.dumps({"gbps": gbps, "latency_ms": latency_ms,
                                   "best_effort": best_effort, "schedule": list(schedule)})}


def follow_schedule(epochs_done):
    """In the chief, before an epoch: puts the schedule's rate for it in place when it differs
    from the one in place. Returns the rate the epoch runs at; None without a schedule (or on
    the real network: best effort could not shape)."""
    raw, applied = os.environ.get(SHAPE_ENV), recorded()
    schedule = json.loads(raw).get("schedule") if raw else None
    if not schedule or not applied or not applied.get("emulated_gbps"):
        return None
    gbps = schedules.value_at(schedule, epochs_done)
    if gbps != applied["emulated_gbps"]:
        applied = {**apply(gbps, applied.get("latency_ms") or 0.0),
                   "schedule": applied.get("schedule")}
        os.environ[APPLIED_ENV] = json.dumps(applied)
    return gbps


def requested():
    """(gbps, latency_ms, best_effort, schedule) asked for through the environment, or None."""
    raw = os.environ.get(SHAPE_ENV)
    if not raw:
        return None
    asked = json.loads(raw)
    return asked["gbps"], asked["latency_ms"], asked["best_effort"], asked.get("schedule") or []


def unshaped(why):
    """The record's `network` entry when shaping was asked for but not possible (best effort)."""
    return {"emulated_gbps": None, "latency_ms": None, "method": f"none: {why}", "qdisc": None}


def recorded():
    """The record's `network` entry: what was applied (None: the real network, unshaped)."""
    raw = os.environ.get(APPLIED_ENV)
    return json.loads(raw) if raw else None
