"""A TF profiler trace of chosen training steps, for TensorBoard's Profile tab.

    python -m experiments.run --strategy=mirrored --num_replicas=2 --profile_steps=20,30
    tensorboard --logdir runs/tensorboard     # Profile tab (pip install tensorboard-plugin-profile)

Only the chief traces (its host and devices; under PSS that is the coordinator's side).
"""
import time

import tensorflow as tf


class StepProfiler:
    def __init__(self, logdir, first, last, coordinator=None):
        self.logdir, self.first, self.last = logdir, first, last
        self.coordinator = coordinator
        self.active = False

    def acts_before(self, first, last):
        """Whether before_steps(first, last) starts the trace."""
        return first <= self.first <= last and not self.active

    def acts_after(self, first, last):
        """Whether after_steps(first, last) stops it."""
        return first <= self.last <= last and self.active

    def before_steps(self, first, last):
        """Called before global steps first..last run (one call of the training function).
        Returns the seconds it spent (starting the profiler), which are not training."""
        start = time.perf_counter()
        if self.acts_before(first, last):
            tf.profiler.experimental.start(self.logdir)
            self.active = True
        return time.perf_counter() - start

    def after_steps(self, first, last):
        """Returns the seconds spent stopping the trace (0 unless it stopped here)."""
        if first <= self.last <= last:
            return self.close()
        return 0.0

    def close(self):
        """Stops the trace (also when training ended before the last profiled step). Returns the
        seconds writing the trace took; waiting for scheduled PSS steps is training, not that."""
        if not self.active:
            return 0.0
        if self.coordinator is not None:
            self.coordinator.join()  # the scheduled steps belong in the trace
        start = time.perf_counter()
        tf.profiler.experimental.stop()
        self.active = False
        spent = time.perf_counter() - start
        print(f"profile of steps {self.first}-{self.last} written under {self.logdir} "
              f"(TensorBoard, Profile tab)", flush=True)
        return spent
