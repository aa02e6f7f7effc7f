"""One task of a local cluster as a process: started (and restarted) with its command and
TF_CONFIG, its output pumped line by line to the console (tf_config/task_output.py), its log file
and the launcher's marker handler; signalled as a whole process group; dead with the launcher."""
import collections
import ctypes
import os
import signal
import socket
import subprocess
import threading

from tf_config.events import ATTEMPT_ENV
from tf_config.watchdog import STACKS_ENV
from tf_config.task_output import ConsoleFilter


def die_with_parent():
    """SIGKILL this process if its parent dies, however it dies (a launched task runs it
    before exec; the sharing calibration's loops at their start)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Task:
    """One task's process (restartable with the same command and environment) and the thread
    that pumps its output to the console filter, its log file and the launcher's markers."""

    def __init__(self, task_type, index, address, argv, env, out, log, on_line, verbose=False):
        self.task_type, self.index, self.address = task_type, index, address
        self._verbose = verbose
        self.name = f"{task_type}:{index}"
        self.tail = collections.deque(maxlen=20)
        self._out, self._argv, self._env, self._log, self._on_line = out, argv, env, log, on_line
        self.start()

    def start(self):
        """Starts (or restarts) the task's process with its original command and TF_CONFIG."""
        self.tail.clear()  # the last process's lines must not explain the new one's end
        stacks = self._env.get(STACKS_ENV)
        if stacks and os.path.exists(stacks):  # the last process's: this one has not registered
            os.remove(stacks)
        self.proc = subprocess.Popen(self._argv, env=self._env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=die_with_parent)
        self._log.write(f"--- launch: {self.name} started, pid {self.proc.pid}, attempt "
                        f"{self._env[ATTEMPT_ENV]} ---")
        self.reader = threading.Thread(target=self._pump, args=(self.proc, ConsoleFilter(
            self._verbose)), daemon=True)
        self.reader.start()

    def _pump(self, proc, console):
        for raw in iter(proc.stdout.readline, b""):
            line = raw.decode(errors="replace").rstrip("\n")
            self.tail.append(line)
            self._log.write(line)
            try:
                for shown in console.feed(line):
                    self._out(f"[{self.name}] {shown}")
                self._on_line(self, line)
            except Exception as e:  # noqa: BLE001 - a dead reader would fill the pipe, hang the task
                self._log.write(f"--- launch: could not handle that line: {e!r} ---")
        for shown in console.end():
            self._out(f"[{self.name}] {shown}")

    def note(self, line):
        """Appends a line of the launcher's own to the task's log."""
        self._log.write(line)

    def answers(self):
        host, port = self.address.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=0.5):
                return True
        except OSError:
            return False

    def signal(self, sig):
        """Signals the task's whole process group, even when its leader has exited: a wrapper
        (`bash train.sh`) may be gone while the Python under it still holds the port."""
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
