"""One self-describing JSON record per run: written atomically, read back tolerantly.

Schema (version 1) is documented in README.md ("Result records").
"""
import json
import os
import tempfile

SCHEMA_VERSION = 1
REQUIRED_KEYS = ("run_id", "timestamp", "strategy", "model", "dataset", "num_workers",
                 "num_replicas_in_sync", "batch_size_per_replica", "global_batch_size",
                 "train_examples", "epochs", "steady_state", "final_eval_accuracy", "config",
                 "environment")
EPOCH_KEYS = ("epoch", "time_s", "examples_per_sec", "train_loss", "train_accuracy", "eval_loss",
              "eval_accuracy")


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path, write):
    """Calls write(file) on a temp file in the same directory, fsyncs, renames: readers see the
    old file or the whole new one, never a partial write, even if this process is killed."""
    if "://" in path:  # gs:// (Vertex): an object appears whole when its upload completes
        import tensorflow as tf

        tf.io.gfile.makedirs(path.rsplit("/", 1)[0])
        with tf.io.gfile.GFile(path, "wb") as f:
            write(f)
        return path
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    suffix = os.path.splitext(path)[1]
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=directory)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; results are meant to be shared
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def write_text_atomic(path, text):
    return write_atomic(path, lambda f: f.write(text.encode("utf-8")))


def write_json_atomic(path, obj):
    return write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, allow_nan=True))


def record_path(results_dir, run_id):
    return os.path.join(results_dir, "records", f"{run_id}.json")


def write_record(results_dir, record):
    missing = [k for k in REQUIRED_KEYS if k not in record]
    if missing:
        raise ValueError(f"record is missing keys: {', '.join(missing)}")
    return write_json_atomic(record_path(results_dir, record["run_id"]), record)


def load_records(results_dir):
    """Returns (records, problems): every record that parses and has the required keys, sorted
    by timestamp, and a list of (filename, reason) for the ones skipped."""
    directory = os.path.join(results_dir, "records")
    records, problems = [], []
    if not os.path.isdir(directory):
        return records, problems
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".json") or name.startswith("."):
            continue
        path = os.path.join(directory, name)
        try:
            with open(path) as f:
                record = json.load(f)
        except (OSError, ValueError) as e:
            problems.append((name, f"unreadable: {e}"))
            continue
        if not isinstance(record, dict):
            problems.append((name, "not a JSON object"))
            continue
        missing = [k for k in REQUIRED_KEYS if k not in record]
        if missing:
            problems.append((name, f"missing keys: {', '.join(missing)}"))
            continue
        records.append(record)
    records.sort(key=lambda r: (r["timestamp"], r["run_id"]))
    return records, problems
