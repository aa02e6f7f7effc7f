"""The comparison in TensorBoard's HParams tab: one trial per summary row (its setting, strategy,
N and role as hyperparameters; throughput, scaling, efficiency, accuracy and cores used as
metrics), written from the rows after the runs, so no timed step pays for it.

    tensorboard --logdir runs/compare/tensorboard     # HPARAMS: table and parallel coordinates

Each report rebuilds <results_dir>/tensorboard/hparams whole (a rebuilt report shows each row
once, never a second copy of it).
"""
import os
import shutil

from results.cells import SETTING_KEYS

# Hyperparameters: what tells two rows apart. Metrics: what the comparison measures of them.
HPARAMS = ("role", "strategy", "n", *SETTING_KEYS, "threads_per_task")
METRICS = ("examples_per_sec", "speedup", "scaling_percent", "efficiency", "epoch_time_s",
           "final_eval_accuracy", "accuracy_delta", "cores_used", "examples_per_cpu_second",
           "communication_fraction")


def _value(v):
    """An HParams value (bool, int, float or str); None and others as text."""
    if isinstance(v, (bool, int, float, str)):
        return v
    return "" if v is None else str(v)


def trial_id(row):
    return "-".join(str(row.get(k)) for k in ("model", "train_examples", "strategy", "n", "role",
                                               "batch_size_per_replica", "threads_per_task",
                                               "accumulation_steps", "gradient_sync_dtype"))


def write(rows, logdir):
    """One HParams trial per row under logdir/hparams (made afresh); returns that directory, or
    None without rows. Only local directories (a gs:// report skips it)."""
    if not rows or "://" in logdir:
        return None
    import tensorflow as tf
    from tensorboard.plugins.hparams import api as hp

    root = os.path.join(logdir, "hparams")
    staging = root + ".new"
    shutil.rmtree(staging, ignore_errors=True)
    with tf.summary.create_file_writer(staging).as_default():
        hp.hparams_config(hparams=[hp.HParam(k) for k in HPARAMS],
                          metrics=[hp.Metric(m) for m in METRICS])
    seen = set()
    for row in rows:
        trial = trial_id(row)
        if trial in seen:  # the same configuration twice: keep the first
            continue
        seen.add(trial)
        with tf.summary.create_file_writer(os.path.join(staging, trial)).as_default():
            hp.hparams({k: _value(row.get(k)) for k in HPARAMS}, trial_id=trial)
            for m in METRICS:
                if isinstance(row.get(m), (int, float)) and not isinstance(row.get(m), bool):
                    tf.summary.scalar(m, row[m], step=0)
    shutil.rmtree(root, ignore_errors=True)
    os.replace(staging, root)
    return root
