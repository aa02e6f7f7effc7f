"""Per-epoch checkpoints and resume (tf.train.CheckpointManager).

    python -m experiments.run --strategy=multi_worker_mirrored --num_workers=2 --checkpoint_dir=ckpt
    # ...interrupted or a worker lost: the same command resumes after the last finished epoch

Model, optimizer and the finished-epoch counter go into the checkpoint; the finished epochs' stats
go into `epochs.json` beside it, so the final record still has every epoch (resumed ones marked).
Under MWMS every worker must take part in saving (the save is collective): the chief writes to the
directory, the others to a scratch directory they delete (the TF multi-worker tutorial's pattern).
"""
import json
import os
import shutil

import tensorflow as tf

from results.records import write_json_atomic

_STATS = "epochs.json"


class EpochCheckpoints:
    def __init__(self, directory, trainer, is_chief, task_name):
        self.is_chief = is_chief
        self.directory = directory if is_chief else os.path.join(
            directory, ".scratch", task_name.replace(":", "-"))
        self.stats_path = os.path.join(directory, _STATS)
        self.done = tf.Variable(0, dtype=tf.int64, trainable=False)  # finished epochs
        checkpoint = tf.train.Checkpoint(model=trainer.model, optimizer=trainer.optimizer,
                                         epochs_done=self.done)
        self.manager = tf.train.CheckpointManager(checkpoint, self.directory, max_to_keep=2)
        self._checkpoint = checkpoint
        self._shared_latest = tf.train.latest_checkpoint(directory)

    def restore(self):
        """Restores the chief's latest checkpoint (every task reads the same one). Returns the
        finished epochs' stats, each marked `resumed`."""
        if self._shared_latest is None:
            return []
        self._checkpoint.restore(self._shared_latest).expect_partial()
        done = int(self.done.numpy())
        stats = []
        if tf.io.gfile.exists(self.stats_path):
            with tf.io.gfile.GFile(self.stats_path) as f:
                stats = [dict(e, resumed=True) for e in json.load(f) if e["epoch"] <= done]
        if len(stats) != done:
            raise RuntimeError(f"{self.stats_path} holds {len(stats)} epochs but the checkpoint "
                               f"{self._shared_latest} has {done}; remove one of them")
        print(f"resumed from {self._shared_latest}: {done} epoch(s) done", flush=True)
        return stats

    def save(self, epochs):
        self.done.assign(len(epochs))
        self.manager.save(checkpoint_number=len(epochs))
        if self.is_chief:
            write_json_atomic(self.stats_path, epochs)
        else:
            shutil.rmtree(self.directory, ignore_errors=True)
