"""One self-describing JSON record per run: written atomically, read back tolerantly.

Schema (version 1) is documented in docs/records.md. `load_records` checks every record against
the part of it the report reads, so a record it cannot use is named and skipped once, here,
instead of raising somewhere in the summary or a plot.

Paths may be local or any `tf.io.gfile` URL (gs:// from Vertex jobs): writes to and reads from
a URL go through `tf.io.gfile`, so `experiments.report --results_dir=gs://...` reads what a cloud
run wrote. Local writes use a temp file + rename instead (atomic on a POSIX filesystem), and
local reads the standard library (no TensorFlow to import for commands that only read records).
"""
import json
import numbers
import os
import tempfile

SCHEMA_VERSION = 1
REQUIRED_KEYS = ("run_id", "timestamp", "strategy", "model", "dataset", "num_workers",
                 "num_replicas_in_sync", "batch_size_per_replica", "global_batch_size",
                 "train_examples", "epochs", "steady_state", "final_eval_accuracy", "config",
                 "environment")
EPOCH_KEYS = ("epoch", "time_s", "examples_per_sec", "train_loss", "train_accuracy", "eval_loss",
              "eval_accuracy")

# What the report needs of a record, by key: (allowed kinds, may it be null). Keys added to the
# schema later (cpu, communication, steps_per_epoch, ...) may be absent in old records: they are
# checked only when present. Loaded records must also carry run_name and final_eval_loss (the
# report reads them), which write_record's REQUIRED_KEYS predate.
_NUMBER, _INT, _STR, _DICT, _LIST = "number", "integer", "string", "object", "list"
_SCHEMA = {
    "run_id": (_STR, False), "run_name": (_STR, False), "timestamp": (_STR, False),
    "strategy": (_STR, False), "model": (_STR, False), "dataset": (_STR, False),
    "num_workers": (_INT, False), "num_replicas_in_sync": (_INT, False),
    "batch_size_per_replica": (_INT, False), "global_batch_size": (_INT, False),
    "train_examples": (_INT, False), "epochs": (_LIST, False), "steady_state": (_DICT, False),
    "final_eval_accuracy": (_NUMBER, False), "final_eval_loss": (_NUMBER, False),
    "config": (_DICT, False), "environment": (_DICT, False),
}
_OPTIONAL = {
    "num_ps": (_INT, True), "steps_per_epoch": (_INT, True), "threads_per_task": (_INT, True),
    "communication": (_DICT, True), "communication_fraction": (_NUMBER, True),
    "straggler": (_DICT, True), "steps_by_worker": (_DICT, True), "cpu": (_DICT, True),
    "sharing": (_DICT, True),
}
_EPOCH_SCHEMA = {"epoch": (_INT, False), "time_s": (_NUMBER, False),
                 "examples_per_sec": (_NUMBER, False), "train_loss": (_NUMBER, True),
                 "train_accuracy": (_NUMBER, True), "eval_loss": (_NUMBER, True),
                 "eval_accuracy": (_NUMBER, True)}


def _is(value, kind):
    if isinstance(value, bool):  # JSON true/false is not a count or a time
        return False
    return {_NUMBER: isinstance(value, numbers.Real), _INT: isinstance(value, int),
            _STR: isinstance(value, str), _DICT: isinstance(value, dict),
            _LIST: isinstance(value, list)}[kind]


def _type_problem(where, value, kind, nullable):
    if value is None:
        return None if nullable else f"{where} is null"
    if not _is(value, kind):
        return f"{where} is {type(value).__name__}, expected {kind}"
    return None


def record_problem(record):
    """Why the report cannot use this parsed record (one line), or None when it can."""
    if not isinstance(record, dict):
        return "not a JSON object"
    missing = [k for k in _SCHEMA if k not in record]
    if missing:
        return f"missing keys: {', '.join(missing)}"
    checks = [(k, record[k], *_SCHEMA[k]) for k in _SCHEMA]
    checks += [(k, record[k], *_OPTIONAL[k]) for k in _OPTIONAL if k in record]
    for key, value, kind, nullable in checks:
        problem = _type_problem(key, value, kind, nullable)
        if problem:
            return problem
    if not record["epochs"]:
        return "epochs is empty"
    for i, epoch in enumerate(record["epochs"]):
        if not isinstance(epoch, dict):
            return f"epochs[{i}] is {type(epoch).__name__}, expected object"
        missing = [k for k in EPOCH_KEYS if k not in epoch]
        if missing:
            return f"epochs[{i}] is missing keys: {', '.join(missing)}"
        for key, (kind, nullable) in _EPOCH_SCHEMA.items():
            problem = _type_problem(f"epochs[{i}].{key}", epoch[key], kind, nullable)
            if problem:
                return problem
        if epoch["time_s"] < 0:
            return f"epochs[{i}].time_s is {epoch['time_s']}, expected >= 0"
    return None


def is_url(path):
    """Whether `path` is a tf.io.gfile URL (gs:// from Vertex jobs, or any scheme) rather than a
    local path: written and read through tf.io.gfile, with no local directory to check, lock
    or rename in."""
    return "://" in path


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path, write):
    """Calls write(file) on a temp file in the same directory, fsyncs, renames: readers see the
    old file or the whole new one, never a partial write, even if this process is killed."""
    if is_url(path):  # gs:// (Vertex): an object appears whole when its upload completes
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


def read_text(path):
    """A file's text, local or a tf.io.gfile URL alike; FileNotFoundError when it is missing."""
    if not is_url(path):
        with open(path, encoding="utf-8") as f:
            return f.read()
    import tensorflow as tf

    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(path)
    with tf.io.gfile.GFile(path, "rb") as f:
        return f.read().decode("utf-8")


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


def _record_paths(directory):
    """(paths, opener, the errors a read can raise) of directory's *.json: the standard library
    for a local directory (no TensorFlow to import: a command on a directory without records
    says so in a fraction of a second), tf.io.gfile for gs:// and the other file systems TF
    reads."""
    if not is_url(directory):
        try:
            names = os.listdir(directory)
        except FileNotFoundError:  # no run has written here yet: no records
            names = []
        except OSError as e:  # not a directory, permissions: the caller reports one line
            raise ValueError(f"cannot list {directory}: {e.strerror or e}") from e
        return ([os.path.join(directory, n) for n in names if n.endswith(".json")], open,
                (OSError, ValueError))
    import tensorflow as tf

    try:
        paths = tf.io.gfile.glob(os.path.join(directory, "*.json"))
    except tf.errors.NotFoundError:  # e.g. a bucket that does not exist: no records
        paths = []
    except tf.errors.OpError as e:  # permissions, credentials: the caller reports one line
        raise ValueError(f"cannot list {directory}: {str(e).splitlines()[0]}") from e
    return paths, tf.io.gfile.GFile, (OSError, ValueError, tf.errors.OpError)


def load_records(results_dir):
    """Returns (records, problems): every record that parses and passes `record_problem`, sorted
    by timestamp, and a list of (filename, one-line reason) for the ones skipped. A local
    directory or gs:// alike (_record_paths); a missing directory has no records."""
    directory = os.path.join(results_dir, "records")
    records, problems = [], []
    paths, opener, read_errors = _record_paths(directory)
    for path in sorted(paths):
        name = path.rsplit("/", 1)[-1]
        if name.startswith("."):  # a local write's temp file
            continue
        try:
            with opener(path, "rb") as f:
                record = json.loads(f.read())
        # ValueError: JSON cut short, or not UTF-8; OSError / OpError: the file system's own
        except read_errors as e:
            problems.append((name, f"unreadable: {str(e).splitlines()[0]}"))
            continue
        problem = record_problem(record)
        if problem:
            problems.append((name, problem))
            continue
        records.append(record)
    records.sort(key=lambda r: (r["timestamp"], r["run_id"]))
    return records, problems
