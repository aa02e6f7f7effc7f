"""`python -m tf_config.launch` failure handling: fail fast, name the task, leave nothing behind."""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile

import pytest

from tests.helpers import ROOT, processes_mentioning, run_module
from tf_config import netns

pytestmark = pytest.mark.integration

# A task that serves its TF_CONFIG port (so the cluster forms), then behaves as told by argv.
# Where the order of two tasks' ends matters, the later one waits for an event, not for a fixed
# time: the earlier one connects to it and says "peer" (then `heard` returns), and its end
# closes that connection (then `ended` returns). The order holds however busy the machine is.
# Every task that does not end by itself sleeps 300 s, beyond _launch's timeout: a launch that
# waited for one instead of stopping it fails the test.
_TASK = r"""
import json, os, socket, sys, time
marker, mode = sys.argv[1], sys.argv[2]
cfg = json.loads(os.environ["TF_CONFIG"])
kind, index = cfg["task"]["type"], cfg["task"]["index"]

def connected(i):  # a connection to worker:i, once it serves
    host, _, port = cfg["cluster"]["worker"][i].rpartition(":")
    while True:
        try:
            return socket.create_connection((host.strip("[]"), int(port)))
        except OSError:
            time.sleep(0.02)

def tell(i):  # says "peer" to worker:i; the connection closes when this process ends
    conn = connected(i)
    conn.sendall(b"peer")
    return conn

def heard():  # the connection of the peer that said so (the launcher's probes say nothing)
    while True:
        conn, _ = s.accept()
        if conn.recv(4) == b"peer":
            return conn

def ended(conn):  # what the process at the other end of conn said, once it has ended
    said = b""
    try:
        while True:
            more = conn.recv(64)
            if not more:
                return said
            said += more
    except OSError:
        return said

def reaped_or_zombie(pid):  # returns once process pid has exited, as its parent's wait sees it
    while True:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except OSError:
            return
        time.sleep(0.02)

if mode == "silent":
    time.sleep(300)
if mode == "leaves_tmp":  # a file in its temp dir, as autograph writes, said before it serves
    import tempfile
    print("tmp=" + tempfile.mkstemp()[1], flush=True)
port = int(cfg["cluster"][kind][index].rsplit(":", 1)[1])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", port)); s.listen()  # every interface, as TF's gRPC servers do
print(f"{kind}:{index} up threads={os.environ['TF_NUM_INTRAOP_THREADS']}", flush=True)
print(f"listening on *:{port}", flush=True)
if mode == "fail" and kind == "worker" and index == 1:
    time.sleep(1); print("boom: simulated crash", flush=True); sys.exit(1)
if mode == "ok":
    sys.exit(0)
if mode == "lost" and kind == "worker" and index == 1:
    time.sleep(1); os.kill(os.getpid(), 9)  # a lost machine, every time it starts
if mode == "lost_after_done":  # the chief finishes, then worker:1 is lost before it exits
    if index == 0:
        heard().sendall(str(os.getpid()).encode())
        os._exit(0)  # the connection closes with the process, not before
    reaped_or_zombie(int(ended(tell(0))))
    os.kill(os.getpid(), 9)
if mode == "leaves_tmp" and index == 1:  # killed once worker:0 has said its file too
    connected(0).close()
    os.kill(os.getpid(), 9)
if mode == "exit_hangs":  # worker:1 did all its work (says so), then its exit hangs
    if index == 0:  # the chief ends once worker:1 has said so
        heard()
        sys.exit(0)
    print("tfdist-finished: worker:1", flush=True)
    conn = tell(0)
    time.sleep(300)
if mode == "own_error":  # worker:1's bug; worker:0 dies of it right after, as MWMS peers do
    if index == 1:
        conn = tell(0)
        print("Traceback (most recent call last):\nValueError: a bug of its own", flush=True)
        sys.exit(1)
    ended(heard())
    print("Traceback (most recent call last):\ntensorflow.python.framework.errors_impl."
          "UnavailableError: Collective ops is aborted by: Socket closed", flush=True)
    sys.exit(1)
time.sleep(300)
"""


def _launch(tmp_path, mode, *flags):
    """A 2-task launch of _TASK in `mode`. Without --task_log_dir a launch that fails keeps its
    tasks' logs in a temporary directory for the user to read; the test's own directory takes
    them here for every mode but "ok", which keeps the default (removed on success)."""
    marker = str(tmp_path / "marker")
    if mode != "ok":
        flags = (f"--task_log_dir={tmp_path / 'logs'}", *flags)
    proc = run_module("tf_config.launch", "--workers=2", *flags, "--",
                      sys.executable, "-c", _TASK, marker, mode, timeout=120)
    return proc, marker


def test_success_prefixes_output_and_sets_threads(tmp_path):
    proc, marker = _launch(tmp_path, "ok", "--threads_per_task=1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[worker:0] worker:0 up threads=1" in proc.stdout
    assert "[worker:1] worker:1 up threads=1" in proc.stdout
    assert not processes_mentioning(marker)


def test_failed_task_stops_the_cluster(tmp_path):
    proc, marker = _launch(tmp_path, "fail")
    assert proc.returncode == 1
    assert "task worker:1 exited with code 1" in proc.stdout and "boom: simulated crash" in proc.stdout
    assert not processes_mentioning(marker)


def test_lost_task_restarts_the_cluster_until_the_budget_is_spent(tmp_path):
    proc, marker = _launch(tmp_path, "lost", "--restart_cluster", "--max_restarts=1",
                                    f"--task_log_dir={tmp_path / 'logs'}")
    assert proc.returncode == 1
    assert "launch: worker:1 lost before the first step (killed by signal 9); restarting the " \
           "whole cluster from the last checkpoint (restart 1/1)" in proc.stdout
    assert "launch: FAILED: task worker:1 was killed by signal 9; the restart budget is spent " \
           "(--max_restarts=1: restarted worker:1 x1)" in proc.stdout
    # Both attempts' output, each under its own header, in the task's log.
    log = (tmp_path / "logs" / "worker-1.log").read_text()
    assert log.count("--- launch: worker:1 started") == 2 and "attempt 1 ---" in log
    assert log.count("worker:1 up threads=") == 2
    assert not processes_mentioning(marker)


def test_a_task_lost_after_the_chief_finished_does_not_fail_the_run(tmp_path):
    proc, marker = _launch(tmp_path, "lost_after_done", "--restart_cluster")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "launch: worker:1 was killed by signal 9 after the chief finished; nothing to redo" \
        in proc.stdout
    assert "restarting" not in proc.stdout
    assert not processes_mentioning(marker)


def test_a_worker_whose_exit_hangs_after_its_work_does_not_fail_the_run(tmp_path):
    """An MWMS worker that printed its last line (events.report_finished) but whose process
    does not exit after the chief's (TensorFlow's shutdown without its coordination leader) is
    stopped after the grace period with one line; the run stands."""
    proc, marker = _launch(tmp_path, "exit_hangs", "--done_grace_s=5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "launch: worker:1 did all its work but had not exited 5s after the chief " \
           "(TensorFlow's shutdown); stopped" in proc.stdout
    assert "tfdist-finished" not in proc.stdout  # a marker: read, never shown
    assert not processes_mentioning(marker)


def test_what_killed_tasks_leave_in_their_temp_dir_goes_with_the_launch(tmp_path):
    proc, marker = _launch(tmp_path, "leaves_tmp")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    files = re.findall(r"\] tmp=(\S+)", proc.stdout)
    assert len(files) == 2, proc.stdout
    # one temp dir of the launch's own, shared by its tasks, gone with the launch
    (tmp,) = {os.path.dirname(f) for f in files}
    assert os.path.basename(tmp).startswith("tfdist-tmp-")
    assert os.path.dirname(tmp) == tempfile.gettempdir()
    assert not os.path.exists(tmp)
    assert not processes_mentioning(marker)


def test_the_task_with_its_own_error_is_named_not_the_peer_that_died_of_it(tmp_path):
    proc, marker = _launch(tmp_path, "own_error", "--restart_cluster")
    assert proc.returncode == 1
    assert "launch: FAILED: task worker:1 exited with code 1; its last lines:" in proc.stdout
    assert "restarting" not in proc.stdout  # an error of its own is not a loss
    assert "[worker:1] ValueError: a bug of its own" in proc.stdout
    assert "[worker:0] stopped: its peer was lost (UnavailableError" in proc.stdout
    assert not processes_mentioning(marker)


def test_without_whole_cluster_restarts_a_lost_task_fails_fast(tmp_path):
    proc, marker = _launch(tmp_path, "lost")
    assert proc.returncode == 1
    assert "launch: FAILED: task worker:1 was killed by signal 9; --restart_cluster turns on " \
           "whole-cluster restarts" in proc.stdout
    assert not processes_mentioning(marker)


def test_task_that_never_answers_is_named(tmp_path):
    proc, marker = _launch(tmp_path, "silent", "--cluster_timeout=3")
    assert proc.returncode == 1
    assert "cluster did not form within 3s" in proc.stdout
    assert "worker:0" in proc.stdout.split("no answer from")[1]
    assert not processes_mentioning(marker)


def test_launch_without_command_is_bad_input():
    proc = run_module("tf_config.launch", "--workers=2", timeout=60)
    assert proc.returncode == 2 and "give the command after --" in proc.stderr


def test_ctrl_c_stops_every_task(tmp_path):
    marker = str(tmp_path / "marker")
    proc = subprocess.Popen([sys.executable, "-m", "tf_config.launch", "--workers=2",
                             f"--task_log_dir={tmp_path / 'logs'}", "--",
                             sys.executable, "-c", _TASK, marker, "hang"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:  # wait until both tasks serve
        lines.append(line)
        if sum(" up threads=" in l for l in lines) == 2:
            break
    assert len(processes_mentioning(marker)) >= 2
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=30)[0]
    assert proc.returncode == 128 + signal.SIGINT
    assert "stopped by SIGINT; all tasks stopped" in out
    assert f"every task's full output is in {tmp_path / 'logs'}" in out
    assert not processes_mentioning(marker)


@pytest.mark.skipif(not netns.isolation_available(), reason="no private network namespaces here")
def test_isolated_cluster_is_not_reachable_from_the_host(tmp_path):
    """Tasks listen on all interfaces (like TF's gRPC servers); from this (host) namespace their
    ports must not answer, not even on 127.0.0.1."""
    marker = str(tmp_path / "marker")
    proc = subprocess.Popen([sys.executable, "-m", "tf_config.launch", "--workers=2",
                             f"--task_log_dir={tmp_path / 'logs'}", "--",
                             sys.executable, "-c", _TASK, marker, "hang"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        ports = []
        for line in proc.stdout:
            ports += [int(p) for p in re.findall(r"listening on \*:(\d+)", line)]
            if len(ports) == 2:
                break
        assert len(ports) == 2
        for port in ports:
            with socket.socket() as s:
                s.settimeout(1)
                assert s.connect_ex(("127.0.0.1", port)) != 0, f"port {port} reachable"
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert not processes_mentioning(marker)
