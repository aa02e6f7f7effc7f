"""The comparison in TensorBoard's HParams tab: one trial per summary row (its setting, strategy,
N and role as hyperparameters; throughput, scaling, efficiency, accuracy and cores used as
metrics), written from the rows after the runs, so no timed step pays for it.

    tensorboard --logdir runs/compare/tensorboard     # HPARAMS: table and parallel coordinates

Each report rebuilds <results_dir>/tensorboard/hparams whole (a rebuilt report shows each row
once, never a second copy of it).
"""
import os
import shutil

from results.records.cells import SETTING_KEYS
from results.records.store import is_url

# Hyperparameters: what tells two rows apart. Metrics: what the comparison measures of them.
HPARAMS = ("role", "strategy", "n", *SETTING_KEYS, "threads_per_task")
# TensorBoard ticks the first five of each list (checked in Chromium): the metrics
# in this order, the hyperparameters by name.
METRICS = ("examples_per_sec", "speedup", "scaling_percent", "accuracy_delta", "cores_used",
           "efficiency", "epoch_time_s", "final_eval_accuracy", "examples_per_cpu_second",
           "communication_fraction")
ALWAYS = ("role", "strategy", "n")  # in the view even when every row shares them


def _hparams(row):
    """The row's HParams values (bool, int, float or str); what it does not have is left out,
    so no hyperparameter mixes numbers with text."""
    return {k: row[k] if isinstance(row[k], (bool, int, float, str)) else str(row[k])
            for k in HPARAMS if row.get(k) is not None}


def shown(rows):
    """The hyperparameters of the experiment's view: those that tell rows apart, and ALWAYS.
    TensorBoard sorts them by name and ticks the first five: with every setting listed, the
    five were accumulation_steps, batch_size_per_replica, dataset, epochs and
    global_batch_size, the same in every row, and the strategy was hidden. Each trial still
    carries all of its settings."""
    return [k for k in HPARAMS
            if k in ALWAYS or len({str(r.get(k)) for r in rows}) > 1]


def trial_id(row):
    """Every hyperparameter of the row: unique per summary row, whatever tells two apart."""
    return ",".join(f"{k}={row.get(k)}" for k in HPARAMS)


def write(rows, logdir):
    """One HParams trial per row under logdir/hparams (made afresh; the trials' folders named
    by position, their ids in the events); returns (that directory, trials written), or None
    without rows or for a gs:// report (TensorBoard's HParams need a local directory here)."""
    if not rows or is_url(logdir):
        return None
    import tensorflow as tf
    from tensorboard.plugins.hparams import api as hp

    root = os.path.join(logdir, "hparams")
    staging = root + ".new"
    shutil.rmtree(staging, ignore_errors=True)
    with tf.summary.create_file_writer(staging).as_default():
        hp.hparams_config(hparams=[hp.HParam(k) for k in shown(rows)],
                          metrics=[hp.Metric(m) for m in METRICS])
    for i, row in enumerate(rows):
        with tf.summary.create_file_writer(os.path.join(staging, f"trial-{i:03d}")).as_default():
            hp.hparams(_hparams(row), trial_id=trial_id(row))
            for m in METRICS:
                if isinstance(row.get(m), (int, float)) and not isinstance(row.get(m), bool):
                    tf.summary.scalar(m, row[m], step=0)
    shutil.rmtree(root, ignore_errors=True)
    os.replace(staging, root)
    return root, len(rows)
