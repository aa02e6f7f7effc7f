"""The hang watchdog's clock and its reading of Python stacks (tf_config/watchdog.py); the
watchdog on a real hung cluster is tests/integration/test_faults.py::test_hung_worker_*."""
import os
import signal
import subprocess
import sys
import textwrap
import time


from tf_config import watchdog


def test_armed_by_the_first_step_and_limited_by_the_median_interval():
    dog = watchdog.Watchdog(timeout_s=5.0, factor=10.0)
    assert dog.overdue(now=1e9) is None  # not armed before the first step (tracing)
    dog.progress(now=100.0)
    for i in range(1, 6):
        dog.progress(now=100.0 + i)  # 1 s between steps: limit max(5, 10 x 1) = 10
    assert dog.overdue(now=115.0) is None
    waited, limit, median = dog.overdue(now=115.5)
    assert (waited, limit, median) == (10.5, 10.0, 1.0)


def test_the_floor_holds_for_fast_steps_and_evaluation_stops_the_clock():
    dog = watchdog.Watchdog(timeout_s=5.0, factor=10.0)
    dog.phase(True, now=0.0)  # the first epoch starts: not armed before its first step
    assert dog.overdue(now=1e5) is None
    for i in range(5):
        dog.progress(now=i * 0.01)
    assert dog.overdue(now=0.04 + 4.9) is None and dog.overdue(now=0.04 + 5.1) is not None
    dog.phase(False, now=0.05)  # evaluation: not a step
    assert dog.overdue(now=1e6) is None
    dog.phase(True, now=1e6)  # the next epoch: a hang before its first step is caught too
    assert dog.overdue(now=1e6 + 5.1) is not None
    dog.progress(now=1e6 + 0.01)  # the evaluation's length is no interval between steps
    assert dog.limit() == (5.0, 0.01)


def test_off_when_the_floor_is_zero():
    dog = watchdog.Watchdog(timeout_s=0.0, factor=10.0)
    dog.progress(now=0.0)
    assert dog.overdue(now=1e9) is None


def _dump_of(code, tmp_path):
    """The faulthandler dump of a real Python process running `code` (it registers through
    enable_dumps and says 'ready' on the line where it then waits: whenever the signal lands
    after 'ready', the main thread is on that line). The process is signalled twice: a second
    dump shows the first did not end it."""
    path = tmp_path / "task.stacks"
    script = tmp_path / "hang.py"
    script.write_text(textwrap.dedent(f"""
        import time
        from tf_config import watchdog
        watchdog.enable_dumps()
        def stuck_here():
            print("ready", flush=True); {code}
        stuck_here()
    """))
    env = {**os.environ, watchdog.STACKS_ENV: str(path),
           "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.dirname(__file__)))}
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                            text=True, cwd=tmp_path)

    def dumps_written(n):
        """Waits (while the process lives) until the file holds n complete dumps: each ends
        with the main thread's outermost frame and a newline."""
        deadline = time.monotonic() + 120  # only a failing test waits this long
        while time.monotonic() < deadline and proc.poll() is None:
            text = path.read_text()
            if text.endswith("\n") and text.count(" in <module>\n") >= n:
                return text
            time.sleep(0.05)
        return path.read_text()

    try:
        assert proc.stdout.readline().strip() == "ready"
        os.kill(proc.pid, watchdog.DUMP_SIGNAL)
        first = dumps_written(1)
        os.kill(proc.pid, watchdog.DUMP_SIGNAL)
        both = dumps_written(2)
        assert both.count(" in <module>\n") == 2 and proc.poll() is None  # still running
    finally:
        proc.kill()
        proc.wait()
    return first, str(script)


def test_a_dump_names_where_the_main_thread_is(tmp_path):
    text, script = _dump_of("time.sleep(600)", tmp_path)
    frames = watchdog.main_thread(text)
    assert frames[0][2] == "stuck_here" and frames[-1][2] == "<module>"
    said, in_tf = watchdog.where(text, str(tmp_path))
    assert said == "hang.py:6 in stuck_here" and not in_tf
    clause = watchdog.diagnose([("worker:1", "sleeping", text)], str(tmp_path))
    assert clause == "worker:1 is stuck at hang.py:6 in stuck_here"


def test_the_stuck_task_comes_before_the_ones_that_wait():
    tf_frames = textwrap.dedent("""\
        Current thread 0x00007f0000000001 (most recent call first):
          File "/venv/site-packages/tensorflow/python/eager/execute.py", line 53 in quick_execute
          File "/repo/experiments/engine/training.py", line 291 in train_epoch
          File "/repo/experiments/run.py", line 170 in <module>
    """)
    clause = watchdog.diagnose([("worker:0", "sleeping", tf_frames),
                                ("worker:1", "stopped", None),
                                ("ps:0", "sleeping", None)], "/repo")
    assert clause.startswith("worker:1 is stopped (process state stopped")
    assert "ps:0 did not write its stacks" in clause
    assert clause.endswith("worker:0 waits inside TensorFlow at experiments/engine/training.py:291 "
                           "in train_epoch, inside tensorflow/python/eager/execute.py:53 in "
                           "quick_execute")


def test_every_task_waiting_is_said_too():
    tf_frames = ('Thread 0x1 (most recent call first):\n  File "/x/tensorflow/a.py", line 1 in f\n'
                 '  File "/r/run.py", line 2 in <module>\n')
    clause = watchdog.diagnose([("worker:0", "sleeping", tf_frames)], "/r")
    assert clause.startswith("no task is stopped or outside TensorFlow")


def test_stack_files_are_removed(tmp_path):
    (tmp_path / "worker-0.stacks").write_text("")
    (tmp_path / "worker-0.log").write_text("kept")
    watchdog.remove_stack_files(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["worker-0.log"]


def test_without_a_launcher_nothing_is_registered(monkeypatch):
    monkeypatch.delenv(watchdog.STACKS_ENV, raising=False)
    watchdog.enable_dumps()  # no file, no handler: SIGUSR1 keeps its default
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
