"""Train one Keras model under one tf.distribute strategy and write its record.

    python -m experiments.run --strategy=one_device --model=cnn --epochs=2 --results_dir=runs/demo
    python -m experiments.run --strategy=mirrored --num_replicas=2 --model=cnn --epochs=2
    python -m experiments.run --strategy=central_storage --num_replicas=2 --model=cnn --epochs=2
    python -m experiments.run --strategy=multi_worker_mirrored --num_workers=2 --model=mlp
    python -m experiments.run --strategy=parameter_server --num_workers=2 --num_ps=1 --model=mlp
    python -m experiments.run --model=examples.two_branch:build_model \
        --dataset=examples.two_branch:make_dataset --train_examples=1024 --eval_examples=256
    python -m experiments.run --model=my_model.keras --model_weights=saved --dataset=data.npz
    python -m experiments.run --strategy=tpu --tpu=my-tpu     # or TPU_NAME; exit 2 without a TPU
    python -m experiments.run --strategy=auto --plan_profile=PROFILE.json \
        --plan_cluster=CLUSTER.json --model=cnn      # the planner chooses (config/auto.py)
    TF_CONFIG=... python -m experiments.run --strategy=auto --model=cnn   # on each task of a
        # platform's cluster: planned on its tasks (experiments/adaptive/on_workers.py)

Your own model and data (experiments/workload/user_model.py, experiments/workload/user_data.py,
experiments/workload/npz_data.py): --model=MODULE:FUNCTION or PATH.keras, --dataset=MODULE:FUNCTION or
PATH.npz. MODULE is imported from the current directory and PYTHONPATH, in every task.

Multi-worker strategies without TF_CONFIG start a local cluster of this same command (one process
per task, each with its own TF_CONFIG); with TF_CONFIG set (Vertex AI, a TFJob, by hand) the
command plays only its own task. Bad input exits 2 with one line, before anything starts.
"""
import dataclasses
import datetime
import json
import os
import sys

from experiments.engine import tf_settings  # noqa: E402

tf_settings.apply()  # before TensorFlow is imported anywhere: quiet, and the same CPU kernels

from absl import app, flags, logging  # noqa: E402

from experiments.config import ConfigError, LaunchConfig, RunConfig, validate  # noqa: E402
from experiments.adaptive import on_workers, profile_here, segment, supervisor  # noqa: E402
from experiments.config import auto  # noqa: E402
from experiments.config import flags as config_flags  # noqa: E402
from experiments.config.cli import bad_input, parse_flags  # noqa: E402
from experiments.config.validation import check_fields  # noqa: E402
from results.model import specs  # noqa: E402
from results.records.store import is_url, write_text_atomic  # noqa: E402
from strategies import all_reduce_workers, kind, needs_cluster  # noqa: E402
from tf_config import TFConfigError, check_strategy_fits, role_from_env  # noqa: E402
from tf_config import launch, netns, netshape, rendezvous  # noqa: E402
from tf_config.cores import placement, usable_cpus  # noqa: E402

# Every flag is a field of RunConfig or LaunchConfig (experiments/config/run_config.py).
config_flags.define(RunConfig)
config_flags.define(LaunchConfig)
flags.adopt_module_key_flags(config_flags)  # --help lists them as this command's own


def _schedule(launch_cfg):
    """--emulate_bandwidth_schedule as [(epoch, gbps)] ([] without one); ConfigError for a bad
    one, or one given beside --emulate_bandwidth_gbps."""
    text, gbps = launch_cfg.emulate_bandwidth_schedule, launch_cfg.emulate_bandwidth_gbps
    if not text:
        return []
    if gbps:
        raise ConfigError(f"--emulate_bandwidth_schedule={text} already gives the rate: drop "
                          f"--emulate_bandwidth_gbps={gbps:g}")
    try:
        return netshape.parse_schedule(text)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _emulation(cfg, launch_cfg, role):
    """(gbps, latency_ms, best_effort, schedule) when an emulated network is asked for, else
    None (schedule: [(epoch, gbps)], or empty for one rate all run long); raises
    ConfigError for bad values or a run without a local cluster. When the machine cannot shape
    (no namespace, no tc, no netem), strict mode refuses and best effort runs unshaped."""
    gbps, latency = launch_cfg.emulate_bandwidth_gbps, launch_cfg.emulate_latency_ms
    schedule = _schedule(launch_cfg)
    if schedule:
        gbps = schedule[0][1]
    if not gbps and not latency:
        return None
    if os.environ.get(netshape.APPLIED_ENV):  # a task, or the launcher inside its namespace
        return None
    if not 0 <= gbps <= 1000:
        raise ConfigError(f"--emulate_bandwidth_gbps={gbps:g} must be in (0, 1000] (0: off)")
    if not 0 <= latency <= 10000:
        raise ConfigError(f"--emulate_latency_ms={latency:g} must be in (0, 10000] (0: off)")
    if role is not None or not needs_cluster(cfg.strategy, cfg.num_workers):
        raise ConfigError("--emulate_bandwidth_gbps/--emulate_latency_ms shape a local cluster's "
                          "private network: use multi_worker_mirrored with --num_workers > 1 or "
                          f"parameter_server, without TF_CONFIG (got --strategy={cfg.strategy})")
    best_effort = launch_cfg.emulate_network == "best_effort"
    try:
        if not launch_cfg.isolate_network:
            raise netshape.ShapingUnavailable("--noisolate_network: the shaper lives in the "
                                              "cluster's private network namespace")
        netns.check_shaping(gbps, latency)
    except netshape.ShapingUnavailable as e:
        if not best_effort:
            raise ConfigError(f"cannot emulate the network here: {e}; pass "
                              "--emulate_network=best_effort to run on the real one")
        sys.stderr.write(f"WARNING: cannot emulate the network ({e}); running unshaped\n")
        os.environ[netshape.APPLIED_ENV] = json.dumps(netshape.unshaped(str(e)))
        return None
    return gbps, latency, best_effort, schedule


def _this_machine(cfg, cpus, written):
    """--strategy=auto (or --adapt) without --plan_cluster: this machine's cluster spec
    (auto.this_machine) written beside the results (a gs:// run's: in a local temporary
    directory, gone at exit), and planned for."""
    if cfg.plan_cluster or os.environ.get("TF_CONFIG", "").strip():
        return cfg
    spec = auto.this_machine(len(cpus), *auto.visible_gpus())
    where = cfg.results_dir
    if is_url(where):  # an input of the run's, not one of its results
        import atexit
        import shutil
        import tempfile

        where = tempfile.mkdtemp(prefix="tfdist-cluster-")
        atexit.register(shutil.rmtree, where, True)
    path = os.path.join(where, "cluster_this_machine.json")
    written += [p for p in (path, where) if not os.path.exists(p)]
    os.makedirs(where, exist_ok=True)
    write_text_atomic(path, spec.to_json())
    print(f"auto: no --plan_cluster: planning for {spec.name} ({path})", flush=True)
    return dataclasses.replace(cfg, plan_cluster=path)


def _profiled(cfg, written):
    """--strategy=auto without --plan_profile: the profile measured here first (its cluster spec
    is read first: a bad one is refused before anything runs). What it writes is appended to
    `written`, for _refuse to take back."""
    if cfg.plan_profile or not cfg.plan_cluster or os.environ.get("TF_CONFIG", "").strip():
        return cfg  # auto.resolve says what is missing or refused
    try:
        cluster = specs.load_cluster(cfg.plan_cluster, "plan_cluster")
    except specs.SpecError as e:
        raise ConfigError(str(e)) from None
    new = [p for p in (profile_here.path_for(cfg, cluster), cfg.results_dir)
           if not os.path.exists(p)]
    try:
        path = profile_here.measure(cfg, sys.argv, cluster=cluster)
    except profile_here.ProfilingFailed as e:
        sys.stderr.write(f"{e}\n")
        sys.exit(1)
    written += new
    return dataclasses.replace(cfg, plan_profile=path)


def _planned_on_workers(cfg, role, written):
    """experiments/adaptive/on_workers.py's resolve, its failures said in one line: bad input
    (exit 2, raised), a cluster that did not meet or a profiling run that failed (exit 1)."""
    try:
        return on_workers.resolve(cfg, role, sys.argv, written=written)
    except (rendezvous.RendezvousError, profile_here.ProfilingFailed) as e:
        sys.stderr.write(f"error: {e}\n")
        sys.exit(1)


def _refuse(error, written):
    """Bad input found after a profile was measured for it: the profile (and the results
    directory it made) go again, so bad input leaves nothing written: files first, then the
    directories they emptied."""
    for path in sorted(written, key=os.path.isdir):
        if os.path.isdir(path):
            try:
                os.rmdir(path)  # only if empty: a directory the user had is not in `written`
            except OSError:
                pass
        elif os.path.exists(path):
            os.remove(path)
    bad_input(error)


def task_log_dir(cfg):
    """Where a local cluster's task logs go: beside the records when they are local."""
    if is_url(cfg.results_dir):
        return ""  # the launcher's temporary directory
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")  # as run ids
    return os.path.join(cfg.results_dir, "logs", f"{stamp}-{cfg.strategy}-{os.getpid()}")


def main(argv):
    if not flags.FLAGS["verbosity"].present:
        logging.set_verbosity(logging.WARNING)  # TF's Python INFO lines drown the progress bars
    if len(argv) > 1:
        bad_input(f"unexpected arguments {argv[1:]}; all options are --flags")
    launch_cfg = config_flags.read(LaunchConfig)
    tf_settings.show_startup_messages(launch_cfg.verbose)
    cfg = config_flags.sizes_from_data(config_flags.read(RunConfig))
    # Vertex AI tells a job where its outputs go; an explicit --results_dir still wins.
    if os.environ.get("AIP_MODEL_DIR") and not config_flags.given("results_dir"):
        cfg = dataclasses.replace(cfg, results_dir=os.environ["AIP_MODEL_DIR"])
    if os.environ.get("AIP_CHECKPOINT_DIR") and not config_flags.given("checkpoint_dir"):
        cfg = dataclasses.replace(cfg, checkpoint_dir=os.environ["AIP_CHECKPOINT_DIR"])
    if os.environ.get("AIP_TENSORBOARD_LOG_DIR"):
        cfg = dataclasses.replace(cfg, tensorboard_dir=os.environ["AIP_TENSORBOARD_LOG_DIR"])
    extra_config = launch_cfg.recorded()
    # The CPUs this run's local clusters may use (--pin_cores): every placement below (the
    # choice, --adapt's segments, the cluster launched here) is made on them.
    cpus = usable_cpus(cfg.pin_cores)
    where = None  # the launched cluster's Placement, where --strategy=auto made it
    written = []  # a profile measured here for --strategy=auto (taken back on bad input)
    if cfg.adapt and not os.environ.get(segment.ADAPT_ENV):  # the chain of segments
        try:  # every check a segment would make, on the first one, before anything is written
            supervisor.check(cfg, bool(os.environ.get("TF_CONFIG", "").strip()))
            _schedule(launch_cfg)  # whatever the first configuration (one process ignores it)
            cfg.straggler_delays()  # the same: parsed before any profiling run
            cfg = _profiled(_this_machine(cfg, cpus, written), written)
            first, plan, _, _ = auto.resolve(cfg, cpus)
            supervisor.first_configuration(cfg, plan)  # one it can switch from fits
            # a one-process configuration runs without the straggler (supervisor.UNSHAPED)
            validate(first if needs_cluster(first.strategy, first.num_workers) else
                     dataclasses.replace(first, straggler_schedule=""))
            check_fields(launch_cfg)
            if needs_cluster(first.strategy, first.num_workers):
                _emulation(first, launch_cfg, None)
                # each segment finds out again whether it can shape (and says so in its record)
                os.environ.pop(netshape.APPLIED_ENV, None)
        except ConfigError as e:
            _refuse(e, written)
        sys.exit(supervisor.supervise(cfg, sys.argv, cpus, launch_cfg.emulate_bandwidth_schedule,
                                      launch_cfg.threads_per_worker))
    try:
        if cfg.strategy == auto.AUTO:
            cfg.straggler_delays()  # a bad schedule is refused before any profiling run
            platform_role = role_from_env()
            if platform_role is not None:  # the platform's cluster: plan on its tasks
                cfg, plan, choice, tf_config = _planned_on_workers(cfg, platform_role, written)
            elif os.environ.get("TF_CONFIG", "").strip():
                raise ConfigError("--strategy=auto: TF_CONFIG names a single task; unset it to "
                                  "plan a cluster on this machine")
            else:
                cfg, plan, choice, where = auto.resolve(
                    _profiled(_this_machine(cfg, cpus, written), written), cpus,
                    launch_cfg.threads_per_worker)
                # the local cluster pinned as the choice says, as its profile's runs were
                launch_cfg = dataclasses.replace(launch_cfg, pin_workers=where.pinned)
                extra_config.update(launch_cfg.recorded())
            chosen = plan["chosen"]
            print(f"auto: {chosen['configuration']} ({chosen['predicted_examples_per_sec']:.0f} "
                  f"examples/s predicted; best of {plan['configurations']} on "
                  f"{plan['cluster']}): {' '.join(choice)}", flush=True)
            if platform_role is not None:
                if tf_config == on_workers.NOT_USED:
                    print(f"auto: {platform_role.name} is not one of the tasks "
                          f"{chosen['configuration']} uses: nothing to run here", flush=True)
                    sys.exit(0)
                os.environ.pop("TF_CONFIG", None)
                if tf_config is not None:
                    os.environ["TF_CONFIG"] = tf_config
            batch = cfg.resolved_per_replica_batch()
            if plan["profile_batch"] != batch or plan["profile_model"] != cfg.model:
                print(f"auto: the profile is of {plan['profile_model']} at {plan['profile_batch']} "
                      f"per replica, this run trains {cfg.model} at {batch}: the predictions "
                      f"are the profile's", flush=True)
            sys.argv += choice  # a local cluster's tasks run the choice (the last flag wins)
            os.environ[auto.PLAN_ENV] = json.dumps(plan)
        elif (cfg.plan_profile or cfg.plan_cluster) and not os.environ.get(auto.PLAN_ENV):
            raise ConfigError(f"--plan_profile / --plan_cluster apply to --strategy=auto only "
                              f"(got --strategy={cfg.strategy})")
        if os.environ.get(auto.PLAN_ENV):
            extra_config["plan"] = json.loads(os.environ[auto.PLAN_ENV])
        role = role_from_env()
        if role is not None:  # the platform's cluster wins over --num_workers / --num_ps
            # MWMS counts a chief (Vertex pool 0) as a worker; PSS's chief only coordinates.
            chief = 1 if all_reduce_workers(cfg.strategy) and role.chief_type != "worker" \
                else 0
            cfg = dataclasses.replace(cfg, num_workers=max(role.num_workers + chief, 1),
                                      num_ps=role.num_ps)
        # First: when the cluster is the cause, say so rather than blame a flag.
        check_strategy_fits(cfg.strategy, role, bool(os.environ.get("TF_CONFIG", "").strip()))
        validate(cfg)
        check_fields(launch_cfg)
        if cfg.fail_mode == "hang" and cfg.fail_task and not launch_cfg.watchdog_s:
            raise ConfigError(f"--fail_mode=hang freezes {cfg.fail_task} for good: it needs the "
                              f"watchdog on (--watchdog_s > 0, got 0)")
        if cfg.fail_mode == "hang" and cfg.fail_task and \
                cfg.fail_at_step <= cfg.steps_per_execution:
            raise ConfigError(f"--fail_mode=hang at --fail_at_step={cfg.fail_at_step} freezes "
                              f"{cfg.fail_task} inside the first training call (steps 1.."
                              f"{cfg.steps_per_execution}), before the watchdog arms: give "
                              f"--fail_at_step > {cfg.steps_per_execution}")
        shaping = _emulation(cfg, launch_cfg, role)
    except (ConfigError, TFConfigError) as e:
        _refuse(e, written)
    # No cluster given: launch one locally. A one-worker MWMS needs no cluster (it runs like a
    # single worker), and a task that already has TF_CONFIG never launches another cluster.
    tf_settings.pin_cores(cfg.pin_cores)
    if role is None and needs_cluster(cfg.strategy, cfg.num_workers) and \
            not os.environ.get("TF_CONFIG"):
        this_command = [sys.executable, "-m", "experiments.run"] + sys.argv[1:]
        if shaping is not None:  # applied by tf_config.netns inside the private namespace
            os.environ.update(netshape.request_env(*shaping))
        launch.maybe_isolate(this_command, launch_cfg.isolate_network)
        sys.exit(launch.run(launch.LaunchOptions(
            num_workers=cfg.num_workers, num_ps=cfg.num_ps, chief=kind(cfg.strategy).parameter_servers,
            placement=where or placement(cfg.strategy, cfg.num_workers, cfg.num_ps,
                                         launch_cfg.threads_per_worker, cpus,
                                         pin=launch_cfg.pin_workers),
            cluster_timeout_s=launch_cfg.cluster_timeout, verbose=launch_cfg.verbose,
            watchdog_s=launch_cfg.watchdog_s, watchdog_factor=launch_cfg.watchdog_factor,
            max_restarts=launch_cfg.max_restarts, cluster_restarts=bool(cfg.checkpoint_dir),
            log_dir=task_log_dir(cfg),
            cluster_restart_hint="--checkpoint_dir turns on whole-cluster restarts from the last "
                                 "checkpoint",
            command=lambda kind, index, threads: this_command + [f"--threads={threads}"])))
    # Imported only now: TensorFlow is slow to import and the launcher never needs it.
    from experiments.engine.task import run_task
    sys.exit(run_task(cfg, role, extra_config=extra_config))


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)
