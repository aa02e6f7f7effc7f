"""What the launcher shows of a task's output, and the task's log file that keeps all of it.

The console gets each task's progress and real errors, prefixed with its role. Hidden there (kept
in `<log_dir>/<task>.log`, shown with --verbose):
- TensorFlow's start-up chatter, printed by every task (absl before InitializeLog, oneDNN and CUDA
  probing, cuInit's "error" on a machine without a GPU): alarming, and four times per cluster;
- gRPC errors about a lost peer (a PSS coordinator prints five multi-line ones per lost worker)
  and a task's traceback when it died of one (an MWMS worker whose all-reduce lost its peer): the
  launcher prints one line per loss instead, and the task one line saying what it died of;
- TensorFlow's warnings about its own internals a user cannot act on (a deprecation inside
  PreemptionCheckpointHandler, its checkpoint saver's retracing);
- the marker lines of tf_config.events.
"""
import os
import re
import threading

from tf_config import events

_STARTUP_NOISE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\)"
    r"|[IW]\d{4} [\d:. ]+\d+ \S+\.cc:\d+\]"
    r"|E\d{4} [\d:. ]+\d+ cuda_\w+\.cc:\d+\] failed call to cuInit"
    # cpu_feature_guard's second line (its first is an I line)
    r"|To enable the following instructions: [\w ]+, in other operations, rebuild TensorFlow)")
# An absl/TF log line (C++ or Python): severity letter, date, time, thread, file:line].
_LOG_LINE = re.compile(r"^[EWIF]\d{4} [\d:. ]+\d+ \S+:\d+\]")
_PEER_LOST = re.compile(
    r"UnavailableError|Connection reset by peer|Failed to connect to remote host|Socket closed"
    r"|Failed to (register|remove) function remotely|failed to connect to all addresses"
    r"|Connection refused|Broken pipe|tasks are unhealthy"
    r"|Failed to send RPC to coordination service")
_TF_INTERNAL = re.compile(r"deprecation\.py:\d+\] From .*/tensorflow/|MultiDeviceSaver")
# A traceback with one of these died of a lost peer, not of a fault of its own.
_DIED_OF_PEER = re.compile(r"(UnavailableError|CancelledError|Collective ops is aborted by"
                           r"|Connection reset by peer|Socket closed|failed to connect to all"
                           r"|was probably restarted)")
_EXCEPTION = re.compile(r"^[\w.]+(Error|Exception)\b")
# Lines a live task prints: a held traceback was caught and logged, not the task's end.
_ALIVE = re.compile(r"^(Epoch \d+/\d+|\d+/\d+ - )")
# The lines gRPC appends to such a message.
_CONTINUATION = re.compile(r"^(Additional GRPC error information|:UNKNOWN:|This could happen if"
                           r"|\s*\{grpc_|\s*$|Instructions for updating:|/job:\w+/"
                           r"|The tasks have crashed)")
_MARKS = (events.FAULT_MARK, events.STEP_MARK, events.DONE_MARK, events.RESUMED_MARK,
          events.PHASE_MARK, events.FINISHED_MARK)


def is_startup_noise(line):
    return bool(_STARTUP_NOISE.match(line))


def died_of_lost_peer(lines):
    """True when the exception that ended a task (its last exception line and the message after
    it) says a peer was lost or restarted: a PSS chief reading a value from a restarted worker
    (AbortedError '... was probably restarted'), an MWMS all-reduce whose peer died
    (UnavailableError). Earlier lines do not count: a task's own error may follow a peer's
    warning."""
    lines = list(lines)
    last = max((i for i, line in enumerate(lines) if _EXCEPTION.match(line)), default=None)
    return last is not None and any(_DIED_OF_PEER.search(line) for line in lines[last:])


class ConsoleFilter:
    """Decides what of one task's output the console shows: `feed` each line, `end` at the end of
    its output; both return the lines to show now. A hidden gRPC error hides its continuation
    lines; a traceback is held until the task's output ends (an uncaught exception ends the
    process), then shown whole, or as one line when the task died of a lost peer; a progress
    or marker line after it (the exception was caught) releases it as it was."""

    def __init__(self, verbose=False):
        self.verbose = verbose
        self._hiding = False  # inside a hidden log entry: its continuation lines go too
        self._after_instructions = False
        self._traceback = []

    def feed(self, line):
        released = []
        if self._traceback and (line.startswith(_MARKS) or _ALIVE.match(line)):
            # The task lives on (a caught, logged exception): show what was held, as it was.
            released, self._traceback = self._traceback, []
        if line.startswith(_MARKS):
            return released
        if self.verbose:
            return [line]
        if self._traceback or line.startswith("Traceback (most recent call last)"):
            self._traceback.append(line)
            return released
        return released + self._plain(line)

    def _plain(self, line):
        if self._hiding and (_CONTINUATION.match(line) or self._after_instructions):
            # A deprecation's "Instructions for updating:" is followed by one line of advice.
            self._after_instructions = line.startswith("Instructions for updating:")
            return []
        self._hiding = bool(_LOG_LINE.match(line) and (_PEER_LOST.search(line) or
                                                       _TF_INTERNAL.search(line)))
        self._after_instructions = False
        return [] if self._hiding or is_startup_noise(line) else [line]

    def end(self):
        held, self._traceback = self._traceback, []
        if not held or not died_of_lost_peer(held):
            return held
        error = next((line for line in held if _EXCEPTION.match(line)), "an error")
        return [f"stopped: its peer was lost ({error.split(':')[0].rsplit('.', 1)[-1]}; "
                f"traceback in its log)"]


class TaskLog:
    """Appends every line of one task (all of its restarts) to `<log_dir>/<type>-<index>.log`."""

    def __init__(self, log_dir, name):
        self.path = os.path.join(log_dir, name.replace(":", "-") + ".log")
        self._file = open(self.path, "a", buffering=1)
        self._lock = threading.Lock()

    def write(self, line):
        with self._lock:
            if not self._file.closed:
                self._file.write(line + "\n")

    def close(self):
        with self._lock:
            self._file.close()
