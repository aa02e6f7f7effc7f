"""Fake run records for the results tests: what experiments/engine/task.py writes, reduced to the keys
the report reads, with the steady-state epoch time and throughput under the test's control."""

_SINGLE_PROCESS = ("one_device", "engine_floor", "mirrored", "central_storage")


def record(run_id, strategy="one_device", n=1, epoch_time=1.0, *, run_name="", examples=1024,
           batch=64, global_batch=0, epochs=3, threads=1, acc=0.9, config=None, cpu=None,
           probe=None, timestamp="2026-01-01T00:00:00", spread=0.0, **extra):
    """A record whose steady epochs take `epoch_time` s, alternately x (1 - spread) and
    x (1 + spread) (the first, tracing, 10x that).
    `examples` and `batch`/`global_batch` are the *requested* flags; the top-level counts are
    what the trainer would have used (per-replica batch from the global one, examples rounded
    down to a multiple of the global batch), as in experiments/engine/task.py."""
    replicas = n if strategy in ("mirrored", "central_storage", "multi_worker_mirrored") else 1
    workers = n if strategy in ("multi_worker_mirrored", "parameter_server") else 1
    per_replica = global_batch // replicas if global_batch else batch
    step_batch = per_replica * replicas
    trained = examples // step_batch * step_batch
    times = [10 * epoch_time] + [epoch_time * (1 + spread * (-1) ** (i + 1))
                                 for i in range(epochs - 1)]
    rec = {
        "schema_version": 1, "run_id": run_id, "run_name": run_name, "timestamp": timestamp,
        "strategy": strategy, "model": "cnn", "dataset": "synthetic", "num_workers": workers,
        "num_ps": 1 if strategy == "parameter_server" else 0, "num_replicas_in_sync": replicas,
        "batch_size_per_replica": per_replica, "global_batch_size": step_batch,
        "train_examples": trained, "steps_per_epoch": trained // step_batch,
        "learning_rate": 0.02, "threads_per_task": threads,
        "epochs": [{"epoch": i + 1, "includes_tracing": i == 0, "time_s": t,
                    "examples_per_sec": trained / t, "train_loss": 1.0, "train_accuracy": 0.5,
                    "eval_loss": 1.0 - acc, "eval_accuracy": acc * (i + 1) / len(times)}
                   for i, t in enumerate(times)],
        "steady_state": {}, "final_eval_accuracy": acc, "final_eval_loss": 1.0 - acc,
        "straggler": None, "cpu": cpu, "environment": {},
        "config": {"train_examples": examples, "batch_size_per_replica": batch,
                   "global_batch_size": global_batch, "dataset": "synthetic", "model": "cnn",
                   "epochs": epochs, "steps_per_execution": 1, "optimizer": "momentum",
                   "learning_rate": 0.02, "lr_scaling": "none", "warmup_epochs": 0.0,
                   "gradient_sync_dtype": "float32", "run_name": run_name,
                   **(config or {})},
    }
    if probe is not None:
        rec["communication"] = {"gradient_bytes": 1_000_000, "method": "x",
                                "probe_s": {"median": probe, "min": probe, "max": probe, "n": 1}}
        rec["communication_fraction"] = 0.1
    rec.update(extra)
    return rec


def sweep(examples=1024, global_batch=0, ns=(1, 2), **kwargs):
    """The records of one comparison: baseline, all-cores reference, and every strategy's N."""
    out = [record("base", run_name=f"baseline/cnn/{examples}/r0", examples=examples,
                  global_batch=global_batch, **kwargs),
           record("ref", epoch_time=0.7, run_name=f"hardware_reference/cnn/{examples}/r0",
                  threads=2, examples=examples, global_batch=global_batch, **kwargs)]
    for n in ns:
        for s in ("mirrored", "multi_worker_mirrored", "parameter_server"):
            out.append(record(f"{s}{n}", s, n, epoch_time=1.2, run_name=f"{s}-n{n}/cnn/r0",
                              examples=examples, global_batch=global_batch, **kwargs))
    return out
