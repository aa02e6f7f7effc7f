"""Cluster specs and TF_CONFIG: parse, validate, and describe this task's role.

Accepts what real platforms write: Vertex AI (chief/worker/ps/evaluator, top-level "environment"
and "job", "task.trial"), Kubeflow TFJob (evaluator left out of "cluster"), and older "master".
"""
import dataclasses
import json
import os
import re
import socket

import strategies

TASK_TYPES = ("chief", "master", "worker", "ps", "evaluator")
_ADDRESS = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


class TFConfigError(ValueError):
    """TF_CONFIG (or a cluster spec) is malformed or does not fit the strategy."""


@dataclasses.dataclass(frozen=True)
class TaskRole:
    """Who this process is in its cluster. `cluster` maps task type -> list of "host:port"."""
    cluster: dict
    task_type: str
    task_index: int

    @property
    def name(self):
        return f"{self.task_type}:{self.task_index}"

    @property
    def chief_type(self):
        for kind in ("chief", "master"):
            if self.cluster.get(kind):
                return kind
        return "worker"

    @property
    def is_chief(self):
        """The chief writes results: the `chief`/`master` task, else worker 0 (MWMS convention)."""
        return self.task_type == self.chief_type and self.task_index == 0

    @property
    def num_workers(self):
        return len(self.cluster.get("worker", []))

    @property
    def num_ps(self):
        return len(self.cluster.get("ps", []))

    def tf_cluster(self):
        """The cluster as TensorFlow should see it: `master` renamed `chief`, no evaluator (it is
        not part of the training cluster)."""
        out = {}
        for kind, addresses in self.cluster.items():
            if kind == "evaluator" or not addresses:
                continue
            out["chief" if kind == "master" else kind] = list(addresses)
        return out

    @property
    def tf_task_type(self):
        return "chief" if self.task_type == "master" else self.task_type


def _fail(message):
    raise TFConfigError(message)


def _check_address(kind, address, seen):
    if not isinstance(address, str) or not _ADDRESS.match(address):
        _fail(f"TF_CONFIG cluster.{kind} has malformed address {address!r}; expected 'host:port'")
    port = int(address.rsplit(":", 1)[1])
    if not 0 < port < 65536:
        _fail(f"TF_CONFIG cluster.{kind} address {address!r} has port {port} outside 1-65535")
    if address in seen:
        _fail(f"TF_CONFIG address {address!r} appears twice (cluster.{seen[address]} and "
              f"cluster.{kind})")
    seen[address] = kind


def parse_tf_config(text):
    """Parses a TF_CONFIG string into a TaskRole; raises TFConfigError naming what is wrong."""
    try:
        config = json.loads(text)
    except (TypeError, ValueError) as e:
        _fail(f"TF_CONFIG is not valid JSON ({e}): {str(text)[:80]!r}")
    if not isinstance(config, dict):
        _fail(f"TF_CONFIG must be a JSON object with 'cluster' and 'task', got {type(config).__name__}")
    for key in ("cluster", "task"):
        if key not in config:
            _fail(f"TF_CONFIG has no {key!r} key; it needs 'cluster' and 'task'")
    cluster, task = config["cluster"], config["task"]
    if not isinstance(cluster, dict) or not cluster:
        _fail("TF_CONFIG 'cluster' must be a non-empty object of task type -> address list")
    if not isinstance(task, dict):
        _fail("TF_CONFIG 'task' must be an object with 'type' and 'index'")
    seen = {}
    for kind, addresses in cluster.items():
        if kind not in TASK_TYPES:
            _fail(f"TF_CONFIG cluster has unknown task type {kind!r}; valid: {', '.join(TASK_TYPES)}")
        if not isinstance(addresses, list):
            _fail(f"TF_CONFIG cluster.{kind} must be a list of 'host:port' strings")
        for address in addresses:
            _check_address(kind, address, seen)
    if cluster.get("chief") and cluster.get("master"):
        _fail("TF_CONFIG cluster has both 'chief' and 'master'; use one")
    for kind in ("chief", "master"):
        if len(cluster.get(kind, [])) > 1:
            _fail(f"TF_CONFIG cluster.{kind} has {len(cluster[kind])} addresses; at most 1 allowed")
    task_type = task.get("type")
    if task_type not in TASK_TYPES:
        _fail(f"TF_CONFIG task.type is {task_type!r}; valid: {', '.join(TASK_TYPES)}")
    index = task.get("index", 0)
    if isinstance(index, str) and index.isdigit():
        index = int(index)  # some hand-written configs quote it
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        _fail(f"TF_CONFIG task.index is {task.get('index')!r}; expected an integer >= 0")
    count = len(cluster.get(task_type, []))
    if task_type == "evaluator" and count == 0:
        pass  # Kubeflow TFJob leaves the evaluator out of the cluster
    elif index >= count:
        _fail(f"TF_CONFIG task {task_type}:{index} is out of range: cluster.{task_type} has "
              f"{count} address(es)")
    return TaskRole(cluster={k: list(v) for k, v in cluster.items() if v}, task_type=task_type,
                    task_index=index)


def role_from_env(environ=None):
    """This process's TaskRole from $TF_CONFIG, or None when it is unset or has no cluster.

    Vertex AI sets TF_CONFIG only for multi-replica jobs; a single-replica job gets none (or an
    empty cluster), which means: run alone."""
    text = (environ if environ is not None else os.environ).get("TF_CONFIG", "")
    if not text.strip():
        return None
    role = parse_tf_config(text)
    if sum(len(v) for k, v in role.cluster.items() if k != "evaluator") <= 1 and \
            role.task_type != "evaluator":
        return None  # a one-task "cluster" is a single process
    return role


def check_strategy_fits(strategy, role, tf_config_set=False):
    """Raises TFConfigError when the cluster cannot run `strategy`. `role` None with
    `tf_config_set`: TF_CONFIG names a one-task cluster (see role_from_env)."""
    if role is None:
        if tf_config_set and strategies.kind(strategy).parameter_servers:
            raise TFConfigError(f"TF_CONFIG does not fit: it describes a single task, but "
                                f"--strategy={strategy} needs a chief, workers and ps tasks")
        return
    try:
        _check_fits(strategy, role)
    except TFConfigError as e:
        raise TFConfigError(f"TF_CONFIG does not fit: {e}") from None


def _check_fits(strategy, role):
    kinds = {k for k, v in role.cluster.items() if v}
    strategy_kind = strategies.kind(strategy)
    if strategy_kind.all_reduce:
        if "ps" in kinds:
            _fail(f"strategy {strategy} cannot use a cluster with 'ps' tasks; "
                  "use --strategy=parameter_server or drop cluster.ps")
        if "worker" not in kinds:
            _fail(f"strategy {strategy} needs cluster.worker")
    elif strategy_kind.parameter_servers:
        missing = [k for k in ("ps", "worker") if k not in kinds]
        if not kinds & {"chief", "master"}:
            missing.insert(0, "chief")
        if missing:
            _fail(f"strategy {strategy} needs cluster.{' and cluster.'.join(missing)} "
                  f"(it has: {', '.join(sorted(kinds))})")
    else:
        _fail(f"strategy {strategy} runs in one process but TF_CONFIG describes a cluster "
              f"({', '.join(sorted(kinds))}); use multi_worker_mirrored, hybrid or "
              f"parameter_server, "
              f"or unset TF_CONFIG")


def free_ports(count, host="127.0.0.1"):
    """`count` distinct ports free right now. All sockets stay open until every port is picked,
    so the same port is never handed out twice; another program can still take one before the
    task binds it, which the launcher handles by retrying with fresh ports."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def local_cluster(num_workers, num_ps=0, chief=False, host="127.0.0.1", ports=None):
    """A cluster spec on this host: {"chief": [...], "worker": [...], "ps": [...]}."""
    if num_workers < 1:
        raise TFConfigError(f"a cluster needs at least 1 worker, got {num_workers}")
    counts = [("chief", 1 if chief else 0), ("worker", num_workers), ("ps", num_ps)]
    ports = list(ports) if ports is not None else free_ports(sum(n for _, n in counts), host)
    cluster = {}
    for kind, n in counts:
        if n:
            cluster[kind] = [f"{host}:{ports.pop(0)}" for _ in range(n)]
    return cluster


def tf_config_json(cluster, task_type, task_index):
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": task_index}})
