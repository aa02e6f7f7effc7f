"""--strategy=auto on a cluster a platform already started (TF_CONFIG: Vertex AI, a TFJob, a
cluster by hand): plan on the real workers, then train the choice with the tasks it needs.

    # every task of the job runs the same command (its own TF_CONFIG):
    python -m experiments.run --strategy=auto --model=cnn --epochs=3

1. The tasks meet before TensorFlow starts (tf_config/rendezvous.py, on the chief's own
   address): the chief measures its link to every other task (latency and bandwidth).
2. The chief profiles the model on its own device: --plan_profile if given, else the brief
   runs of experiments/adaptive/profile_here.py on the chief's machine (a real worker's
   device: compute, bytes, each strategy's overhead).
3. The cluster spec is the one TF_CONFIG fixes: one host per chief or worker task, its ps
   tasks, the links as measured (the median over tasks), the rest from --plan_cluster when
   given (devices per host, device memory). The planner then ranks only what these tasks can
   run (`runnable`): one device or a host's devices on the chief; MWMS over the chief and
   workers (a prefix of them); PSS with the chief coordinating, up to its workers and ps.
4. The chief sends every task the same plan. Each task trains its part of the choice under a
   TF_CONFIG cut down to the tasks the choice uses; a task the choice leaves out says so and
   exits 0. The record keeps the plan, the measured links and the cluster spec.
"""
import dataclasses
import json
import os
import statistics
import tempfile

from experiments.adaptive import profile_here
from experiments.config import auto
from experiments.config.run_config import ConfigError
from results.model import planner, specs
from results.records.store import is_url
from strategies import kind
from tf_config import rendezvous

TIMEOUT_S = 1800.0  # the chief's profiling runs take a minute or two; Vertex starts tasks late
NOT_USED = "not used"


def _workers(role):
    """The tasks that can hold a data-parallel worker, the chief (or worker 0) first."""
    chief = role.chief_type
    names = [f"{chief}:0"] if chief != "worker" else []
    return names + [f"worker:{i}" for i in range(role.num_workers)]


def others(role):
    """Every task but the chief (the rendezvous host), in TF_CONFIG order."""
    chief = f"{role.chief_type}:0"
    return [n for n in _workers(role) if n != chief] + [f"ps:{i}" for i in range(role.num_ps)]


def cluster_spec(role, links, given=None):
    """The ClusterSpec TF_CONFIG fixes (see the module doc); `given`: --plan_cluster's, whose
    device fields it keeps."""
    spec = given or specs.ClusterSpec()
    gbps = statistics.median(link.gbps for link in links) if links else spec.inter_host_gbps
    latency = statistics.median(link.latency_us for link in links) if links else \
        spec.inter_host_latency_us
    return specs.ClusterSpec(**{
        **{f: getattr(spec, f) for f in ("devices_per_host", "device_speedup", "intra_host_gbps",
                                        "intra_host_latency_us", "memory_per_device_mb",
                                        "ps_cores", "ps_placement", "ps_local_aggregation")},
        "hosts": len(_workers(role)), "num_ps": max(1, role.num_ps),
        "inter_host_gbps": gbps, "inter_host_latency_us": latency,
        "name": f"TF_CONFIG's {len(_workers(role))} worker task(s) and {role.num_ps} ps, "
                f"links measured"}).check()


def runnable(role):
    """config -> "" when the tasks of `role`'s cluster can run it, else why not."""
    workers, ps = len(_workers(role)), role.num_ps
    has_chief = role.chief_type != "worker"

    def why_not(config):
        strategy = planner.tasks(config)[0]
        if config.hosts == 1 and (kind(strategy).single_device or not kind(strategy).multi_worker):
            return ""  # on the chief's host alone
        if kind(strategy).parameter_servers:
            if not has_chief or config.workers > role.num_workers or config.num_ps > ps:
                return (f"TF_CONFIG has {'a' if has_chief else 'no'} chief, "
                        f"{role.num_workers} worker(s) and {ps} ps")
            return ""
        if kind(strategy).all_reduce and not kind(strategy).pipelined:
            return "" if config.hosts <= workers else \
                f"TF_CONFIG has {workers} task(s) to hold workers"
        return f"{config.name} is not run on a TF_CONFIG cluster by --strategy=auto"
    return why_not


def tf_config_for(role, settings):
    """This task's TF_CONFIG under the chosen settings: a JSON string, None (the chief alone,
    no cluster) or NOT_USED (the choice leaves this task out)."""
    strategy = settings["strategy"]
    chief = f"{role.chief_type}:0"
    if not kind(strategy).multi_worker:
        return None if role.name == chief else NOT_USED
    cluster = role.tf_cluster()
    if kind(strategy).parameter_servers:
        keep = {"chief": 1, "worker": settings["num_workers"], "ps": settings["num_ps"]}
    else:  # MWMS: the chief counts as a worker
        extra = settings["num_workers"] - (1 if role.chief_type != "worker" else 0)
        keep = {"chief": 1, "worker": extra, "ps": 0}
    cut = {t: addresses[:keep.get(t, 0)] for t, addresses in cluster.items()
           if addresses[:keep.get(t, 0)]}
    task_type = "chief" if role.task_type == "master" else role.task_type
    if role.task_index >= len(cut.get(task_type, [])):
        return NOT_USED
    return json.dumps({"cluster": cut, "task": {"type": task_type, "index": role.task_index}})


def _local(cfg):
    """cfg whose profile is measured into a directory of this machine: the results directory,
    or under a platform's remote one (gs://, Vertex's AIP_MODEL_DIR) the temporary directory."""
    if not is_url(cfg.results_dir):
        return cfg
    return dataclasses.replace(cfg, results_dir=os.path.join(tempfile.gettempdir(),
                                                             "tfdist-auto"))


def _decide(cfg, role, argv, out, written):
    """The chief's plan once the links are measured: the message every task receives. A
    profile it measures (and the directory made for it) is appended to `written`."""
    def decide(links):
        try:
            return plan_for(links)
        except (ConfigError, specs.SpecError, profile_here.ProfilingFailed):
            raise  # bad input (exit 2), a profiling run that failed (exit 1)
        except Exception as e:  # noqa: BLE001 - one line on the chief and every task, exit 1
            raise rendezvous.RendezvousError(f"the chief could not plan: "
                                             f"{type(e).__name__}: {e}") from None

    def plan_for(links):
        given = specs.load_cluster(cfg.plan_cluster, "plan_cluster") \
            if cfg.plan_cluster else None
        spec = cluster_spec(role, links, given)
        path = cfg.plan_profile
        if not path:
            here = _local(cfg)
            new = [p for p in (profile_here.path_for(here), here.results_dir)
                   if not os.path.exists(p)]
            path = profile_here.measure(here, argv, out=out)
            written.extend(new)
        values, plan = auto.choose(path, cfg.plan_cluster or "TF_CONFIG's tasks", cluster=spec,
                                   runnable=runnable(role))
        with open(path) as f:  # the record keeps what the plan stood on, wherever it ran
            profile = json.load(f)
        plan.update(links=[link.to_dict() for link in links], workload_profile=profile,
                    cluster_spec=json.loads(spec.to_json()), planned_on="TF_CONFIG's tasks")
        return {"values": values, "plan": plan}
    return decide


def resolve(cfg, role, argv, out=print, written=None):
    """(cfg with the plan's choice, the plan, the choice's flags, this task's TF_CONFIG: a
    JSON string, None or NOT_USED) for `role`'s task. ConfigError for bad input (the chief's
    too, sent to every task in its words); rendezvous.RendezvousError when the cluster does not
    meet, or the chief failed otherwise (exit 1 on every task); a profile the chief measures
    is appended to `written` (taken back on bad input found later)."""
    if role.cluster.get("evaluator") or role.task_type == "evaluator":
        raise ConfigError("--strategy=auto on a TF_CONFIG cluster plans its training tasks: "
                          "drop the evaluator task (the chief evaluates)")
    chief_address = role.cluster[role.chief_type][0]
    if role.is_chief:
        try:
            message = rendezvous.serve(chief_address, others(role),
                                       _decide(cfg, role, argv, out,
                                               written if written is not None else []),
                                       TIMEOUT_S, out)
        except specs.SpecError as e:
            raise ConfigError(str(e)) from None
    else:
        try:
            message = rendezvous.join(chief_address, role.name, TIMEOUT_S)
        except rendezvous.ChiefFailed as e:
            if e.bad_input:  # the chief's bad input, in its own words
                raise ConfigError(str(e)) from None
            said = str(e).replace("; its output is above", "")  # above in the chief's log
            raise rendezvous.RendezvousError(f"the chief could not plan ({said}); its log says "
                                             f"more") from None
    values, plan = message["values"], message["plan"]
    chosen = auto.apply(cfg, values)
    return chosen, plan, [f"--{k}={v}" for k, v in values.items()], \
        tf_config_for(role, values)
