"""Checkpoints every epoch (and every N steps), resume, and MWMS preemption.

    python -m experiments.run --strategy=multi_worker_mirrored --num_workers=2 --checkpoint_dir=ckpt \
        [--checkpoint_every_steps=50]
    # ...interrupted, preempted or a worker lost: the launcher restarts the cluster (--max_restarts)
    # and it resumes from the last checkpoint; rerunning the same command by hand does the same

Model, optimizer and the number of finished steps go into the checkpoint (tf.train.CheckpointManager);
the finished epochs' stats go into `epochs.json` beside it, so the final record still has every
epoch (restored ones marked `resumed`, a partly restored one `resumed_at_step`).
Under MWMS every worker must take part in saving (the save is collective): the chief writes to the
directory, the others to a scratch directory they delete (the TF multi-worker tutorial's pattern).
With --zero=1 every worker also writes its own optimizer shard beside it first
(experiments/engine/zero.py).
MWMS also gets TensorFlow's `PreemptionCheckpointHandler`: a worker that receives SIGTERM (a
platform's preemption notice) makes every worker save at the same step and exit with
PREEMPTED_EXIT_CODE; a local launcher then restarts the cluster, which resumes from that step
(a platform reruns the job; by hand, rerun the command).

The checkpoint holds the model and the optimizer by object, not by strategy: a run may resume
under another strategy (--adapt switches so). The chief writes a digest of what it saved beside
the checkpoint, and the restore checks the same digest of what it restored: a variable the new
strategy's model or optimizer did not match fails there, instead of training on fresh values
(tf.train.Checkpoint's restore is partial).
"""
import json
import math
import os
import shutil
import sys
import time

import numpy as np
import tensorflow as tf

from experiments.config import checkpoint_layout
from results.records.store import write_json_atomic
from tf_config import events
from tf_config.events import PREEMPTED_EXIT_CODE

_STATS = "epochs.json"
_RECORD = "record_written.json"
_DIGEST = checkpoint_layout.DIGEST
KEEP = 2  # checkpoints kept (and --zero's shards per rank)


def saved_step(path):
    """The finished steps of the checkpoint at `path` (read from its file: nothing restored)."""
    return int(tf.train.load_variable(path, "steps_done/.ATTRIBUTES/VARIABLE_VALUE"))


def state_digest(model, optimizer):
    """{weights, optimizer: sum of |value| in float64, exact for the same values whatever the
    order of variables (math.fsum); optimizer_variables: how many}. Summed in numpy, not by a
    TensorFlow kernel whose reduction order follows the thread count."""
    def total(variables):
        return math.fsum(float(np.abs(np.asarray(v.numpy(), dtype=np.float64)).sum())
                         for v in variables)
    return {"weights": total(model.weights), "optimizer": total(optimizer.variables),
            "optimizer_variables": len(optimizer.variables)}


class ResumeError(ValueError):
    """A checkpoint this run cannot resume (one line for the user: exit 2)."""


def check_digest(directory, tensor_parallel, dataset):
    """ResumeError when the checkpoint in `directory` holds the weights split over another
    --tensor_parallel than this run's (its variables would not match: models/tensor_parallel.py)
    or was trained on another --dataset; a digest from before splits or datasets were noted is
    taken as it is."""
    path = os.path.join(directory, _DIGEST)
    if not tf.io.gfile.exists(path):
        return
    with tf.io.gfile.GFile(path) as f:
        line = checkpoint_layout.digest_refusal(directory, json.load(f), tensor_parallel,
                                                dataset)
    if line:
        raise ResumeError(line)


class Checkpoints:
    """resolver: the MWMS cluster resolver (enables preemption handling), else None;
    tensor_parallel, dataset: the run's --tensor_parallel and --dataset, noted with each save."""

    def __init__(self, directory, trainer, is_chief, task_name, every_steps=0, resolver=None,
                 tensor_parallel=1, dataset=None):
        self.is_chief, self.every_steps, self.trainer = is_chief, every_steps, trainer
        self.root = directory  # the chief's; under --zero every worker writes its shard there
        self.directory = directory if is_chief else os.path.join(
            directory, ".scratch", task_name.replace(":", "-"))
        self.stats_path = os.path.join(directory, _STATS)
        self.digest_path = os.path.join(directory, _DIGEST)
        self.restored_digest = None  # state_digest of what restore() read (the record's)
        # The global step restore() read, wherever it lies (inside an epoch or on its boundary,
        # as a preemption, a restart, an --adapt switch or a rerun leave it); None: a fresh run.
        self.resumed_from_step = None
        # Written by the chief once the run's record is: a rerun of a finished run adds nothing
        # then, but one that died between its last checkpoint and its record still writes it.
        self.record_path = os.path.join(directory, _RECORD)
        self.steps_done = tf.Variable(0, dtype=tf.int64, trainable=False)
        self._checkpoint = tf.train.Checkpoint(model=trainer.model, optimizer=trainer.optimizer,
                                               steps_done=self.steps_done)
        self.manager = tf.train.CheckpointManager(self._checkpoint, self.directory,
                                                  max_to_keep=KEEP)
        self._shared_latest = tf.train.latest_checkpoint(directory)
        # noted with each save's digest: check_digest refuses to resume another split or data
        self.tensor_parallel, self.dataset = tensor_parallel, dataset
        self._epochs = []  # finished epochs' stats, as last handed to save()
        self._saved_at = None  # global step of the last checkpoint this process wrote
        # Each save this process made: global step, wall clock (epoch s) of its start, seconds
        # (the record's checkpoint_saves: the run's trace shows them)
        self.saves = []
        self.preemption = None
        if resolver is not None:
            # Restores the chief's latest checkpoint on every worker when created; saves through
            # save_fn so the chief/scratch layout and epochs.json stay the same as periodic saves.
            self.preemption = tf.distribute.experimental.PreemptionCheckpointHandler(
                resolver, self._checkpoint, checkpoint_dir=directory,
                termination_config=tf.distribute.experimental.TerminationConfig(
                    exit_fn=self._exit_preempted, save_fn=self._save_now))

    def restore(self):
        """Restores the chief's latest checkpoint (every task reads the same one). Returns
        (finished epochs' stats each marked `resumed`, finished steps)."""
        if self._shared_latest is None:
            return [], 0
        self._checkpoint.restore(self._shared_latest).expect_partial()
        steps = int(self.steps_done.numpy())
        self._check_digest(steps)
        self.resumed_from_step = steps
        if self.trainer.zero is not None:  # this worker's optimizer shard, not the chief's
            self.trainer.zero.restore(self.root, steps)
        per_epoch = self.trainer.steps_per_epoch
        stats = []
        if tf.io.gfile.exists(self.stats_path):
            with tf.io.gfile.GFile(self.stats_path) as f:
                stats = [dict(e, resumed=True) for e in json.load(f)]
        stats = [e for e in stats if e["epoch"] <= steps // per_epoch]
        if len(stats) != steps // per_epoch or any(
                e["steps"] != per_epoch for e in stats if "resumed_at_step" not in e):
            raise RuntimeError(f"{self._shared_latest} ({steps} steps) does not match "
                               f"{self.stats_path} ({len(stats)} epochs) at {per_epoch} steps per "
                               f"epoch; resume with the settings that wrote it, or remove both")
        digest = self.restored_digest
        print(f"resumed from {self._shared_latest}: {steps} step(s) done ({len(stats)} epoch(s) "
              f"+ {steps % per_epoch} step(s)); weights sum|w| {digest['weights']:.9e}, "
              f"{digest['optimizer_variables']} optimizer variables sum|v| "
              f"{digest['optimizer']:.9e}", flush=True)
        self._epochs = stats
        events.report_resumed(steps)
        return stats, steps

    def _check_digest(self, steps):
        """Raises when the restored model and optimizer are not what the chief saved at `steps`
        (a checkpoint without a digest, written before digests, is taken as it is)."""
        self.restored_digest = state_digest(self.trainer.model, self.trainer.optimizer)
        if not tf.io.gfile.exists(self.digest_path):
            return
        with tf.io.gfile.GFile(self.digest_path) as f:
            saved = json.load(f)
        if saved.get("step") != steps:
            return  # a step checkpoint of a task lost before the chief's digest: not comparable
        if saved["digest"] != self.restored_digest:
            raise RuntimeError(
                f"{self._shared_latest}: restored {self.restored_digest}, but the run that "
                f"saved it had {saved['digest']} (a model or optimizer this strategy builds "
                f"differently); resume with the settings that wrote it, or remove the directory")

    def record_written(self):
        """The run_id of the record this run already wrote, or None."""
        if not tf.io.gfile.exists(self.record_path):
            return None
        with tf.io.gfile.GFile(self.record_path) as f:
            return json.load(f).get("run_id")

    def mark_record_written(self, run_id):
        if self.is_chief:
            write_json_atomic(self.record_path, {"run_id": run_id})

    def run_step(self, step_fn, *args):
        """One call of the training function; under MWMS through the preemption handler, which
        saves and exits when any worker was told to stop."""
        if self.preemption is not None:
            return self.preemption.run(step_fn, *args)
        return step_fn(*args)

    def saves_after(self, before, global_step, epoch_end=False):
        """Whether after_steps(before, global_step, epoch_end) saves (see there)."""
        return bool(self.every_steps) and not epoch_end and \
            global_step // self.every_steps != before // self.every_steps

    def after_steps(self, before, global_step, epoch_end=False):
        """Counts the steps just run (before+1..global_step); saves when they crossed a multiple
        of `every_steps`. Returns the seconds spent saving (not training time).

        Not at an epoch's last step: the epoch's own save follows its evaluation and writes its
        stats with it. A step checkpoint there would be ahead of epochs.json during the
        evaluation, and a task killed in that window could not resume ("does not match")."""
        self.steps_done.assign(global_step)
        return self._save_now() if self.saves_after(before, global_step, epoch_end) else 0.0

    def save(self, epochs):
        """End of an epoch: checkpoint and the finished epochs' stats."""
        self._epochs = list(epochs)
        if self._saved_at == int(self.steps_done.numpy()):  # a step checkpoint just saved it
            if self.is_chief:
                write_json_atomic(self.stats_path, self._epochs)
            return
        self._save_now()

    def _save_now(self):
        """Saves; returns the seconds the save took (after PSS's wait for its scheduled steps,
        which is training)."""
        if self.trainer.coordinator is not None:
            self.trainer.coordinator.join()  # PSS: the scheduled steps are in the variables
        start, at = time.perf_counter(), time.time()
        if self.trainer.zero is not None:  # every rank's shard first: then the model (zero.py)
            self.trainer.zero.save(self.root, int(self.steps_done.numpy()))
        self.manager.save()
        self._saved_at = int(self.steps_done.numpy())
        self.saves.append({"step": self._saved_at, "at_time": at,
                           "s": time.perf_counter() - start})
        if self.is_chief:
            write_json_atomic(self.digest_path, {"step": self._saved_at, "digest": state_digest(
                self.trainer.model, self.trainer.optimizer),
                "tensor_parallel": self.tensor_parallel, "dataset": self.dataset})
            write_json_atomic(self.stats_path, self._epochs)
        else:
            shutil.rmtree(self.directory, ignore_errors=True)
        return time.perf_counter() - start

    def _exit_preempted(self):
        print(f"preempted: checkpoint saved after step {int(self.steps_done.numpy())}; exiting "
              f"with code {PREEMPTED_EXIT_CODE} (to resume)", flush=True)
        sys.exit(PREEMPTED_EXIT_CODE)
