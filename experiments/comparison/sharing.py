"""How this machine shares its cores: K plain TF loops (the engine floor's) alone, at once, and
in lockstep, timed back to back in the same K processes.

    python -m experiments.comparison.sharing --model=cnn --train_examples=6144 --threads=1 --processes=2 --pin_loops

A local cluster's workers share one machine's cores, so a 2-worker step is not "the 1-worker
step plus synchronization": two 1-thread plain loops that wait for each other after every step
run each step slower than one loop alone, with no data exchanged at all, while two independent
ones do not (figures: docs/benchmarks.md, "With the sharing calibration"). The cost model
multiplies the compute of a cluster on this machine's cores (machine_cores) by the lockstep
slowdown at K = N and caps its rate by the cores the lockstep phase keeps busy; projections to
clusters whose workers have machines of their own do not (results/model/cost_model.py
`on_one_machine`).

Three phases, every process running the same plain loop one step per call (so each phase pays
the same dispatch), taking turns for --rounds rounds:
  solo      process 0 alone (the others wait)        -> the 1-process step
  free      all K at once, independently              -> the machine's limit for K workers
  lockstep  all K at once, a barrier after each step  -> processes that wait on each other every
            step, as MWMS workers do (the all-reduce) and a PSS worker does (its ps)
With --pin_loops, loop k runs on the cores worker k of a --pin_workers cluster gets (the
comparison pins both where the workers fit the cores). Writes an `engine_floor` record with
num_workers=K whose epochs are the free phase's rounds (examples/s summed over the K
processes: the row "K plain TF loops at once" of the report) and
`sharing` = {processes, rounds, steps_per_round, batch, examples_per_sec: {solo, free, lockstep}
per process, slowdown: {free, lockstep} = solo rate / per-process rate, cores_per_process: {free,
lockstep}, rounds_examples_per_sec, cpus, pinned} (docs/records.md).
"""
import dataclasses
import multiprocessing
import multiprocessing.connection
import os
import sys
import time

from experiments.engine import tf_settings

tf_settings.apply()  # the same TensorFlow settings as the toolkit's runs and the floor

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from experiments.comparison.floor import plain_loop_config  # noqa: E402  (and run's flags)
from experiments.config.cli import parse_flags  # noqa: E402
from results.records import metrics  # noqa: E402
from results.records.cells import ENGINE_FLOOR  # noqa: E402
from experiments.workload.user_code import UserCodeError  # noqa: E402
from tf_config.cores import placement  # noqa: E402
from tf_config.task_process import die_with_parent  # noqa: E402

_PROCESSES = flags.DEFINE_integer("processes", 2, "Plain loops run at once (K).", lower_bound=2)
_ROUNDS = flags.DEFINE_integer("rounds", 4, "Timed rounds per phase; each round is "
                               "min(an epoch, --steps_per_round) steps.", lower_bound=1)
_WAIT_S = 600  # longest a loop waits for another (a round is seconds): then it gives up
_PIN_LOOPS = flags.DEFINE_bool("pin_loops", False, "Pin loop k to the cores a local cluster's "
                                "worker k gets under --pin_workers (its own --threads cores, "
                                "round robin over the usable ones).")
_STEPS_PER_ROUND = flags.DEFINE_integer("steps_per_round", 40, "At most this many steps a round.",
                                        lower_bound=4)


def _phase(loop, steps, barrier=None):
    """(seconds, loss sum, correct) for `steps` steps of the plain loop, one step per call, each
    waited for; with a barrier, every process waits for the others after each step."""
    loss, correct = 0.0, 0.0
    start = time.perf_counter()
    for _ in range(steps):
        out = loop.run_steps(1)
        loss += float(out[0])  # reading the loss waits for the step
        correct += float(out[1])
        if barrier is not None:
            barrier.wait()
    return time.perf_counter() - start, loss, correct


def _median(values):
    return metrics.spread(values)["median"]


def summarize(per_rank, batch, steps):
    """The record's `sharing`: per-process medians of each phase, and the slowdowns: the median
    over rounds of (process 0's solo rate / the processes' median rate in that round's phase)."""
    rounds = len(per_rank[0]["solo"])

    def phase(name, i):
        return _median([rates[name][i] for rates in per_rank.values()])

    return {"processes": len(per_rank), "rounds": rounds, "steps_per_round": steps,
            "batch": batch,
            "examples_per_sec": {
                "solo": _median(per_rank[0]["solo"]),
                "free": _median([r for rates in per_rank.values() for r in rates["free"]]),
                "lockstep": _median([r for rates in per_rank.values()
                                     for r in rates["lockstep"]])},
            "slowdown": {name: _median([per_rank[0]["solo"][i] / phase(name, i)
                                        for i in range(rounds)])
                         for name in ("free", "lockstep")},
            "rounds_examples_per_sec": {str(rank): {name: rates[name] for name in (
                "solo", "free", "lockstep")} for rank, rates in sorted(per_rank.items())},
            # each loop's CPU seconds over its wall seconds, per phase (medians over loops and
            # rounds): below 1 in lockstep is a core left idle while a loop waited
            "cores_per_process": {name: _median([
                rates[f"{name}_cpu_s"][i] * rates[name][i] / (steps * batch)
                for rates in per_rank.values() for i in range(rounds)])
                for name in ("free", "lockstep")}}


def _write_record(cfg, loop, per_rank, free_sums, steps, pinned):
    """Process 0's record. Its epochs are the free phase's rounds with the K processes'
    examples/s summed (the machine's limit for K independent loops), each timed as an epoch
    would take at that rate; no round traces (the warm-up did)."""
    from experiments.engine import record as run_record
    from experiments.engine.training import EpochStats, weights_checksum

    sharing = summarize(per_rank, loop.global_batch, steps)
    # where each loop could run, as it ran (pinned: worker k's cores), and whether pinned
    sharing["cpus"] = {str(rank): rates["cpus"] for rank, rates in sorted(per_rank.items())}
    sharing["pinned"] = pinned
    print(f"sharing: {sharing['processes']} plain loops at {cfg.threads} thread(s) each: one "
          f"alone {sharing['examples_per_sec']['solo']:.0f} examples/s; at once "
          f"{sharing['examples_per_sec']['free']:.0f} each (slowdown "
          f"{sharing['slowdown']['free']:.2f}x); in lockstep "
          f"{sharing['examples_per_sec']['lockstep']:.0f} each "
          f"({sharing['slowdown']['lockstep']:.2f}x)", flush=True)
    eval_loss, eval_accuracy = loop.evaluate()
    epochs = []
    for i, (loss, correct) in enumerate(free_sums):
        total = sum(rates["free"][i] for rates in per_rank.values())
        seen = steps * loop.global_batch
        time_s = loop.examples_per_epoch / total
        # CPU seconds of each loop over its free round, scaled like the round to an epoch
        by_task = {f"loop:{rank}": rates["free_cpu_s"][i] * rates["free"][i] / total *
                   loop.examples_per_epoch / seen for rank, rates in per_rank.items()}
        epochs.append({**dataclasses.asdict(EpochStats(
            epoch=i + 1, time_s=time_s, examples_per_sec=total,
            train_loss=loss / seen, train_accuracy=correct / seen, eval_loss=None,
            eval_accuracy=None, eval_time_s=0.0, learning_rate=loop.learning_rate,
            steps=loop.steps_per_epoch, cpu_s=sum(by_task.values()), cpu_by_task_s=by_task)),
            "includes_tracing": False})
    cfg = dataclasses.replace(cfg, strategy=ENGINE_FLOOR, num_workers=sharing["processes"])
    run_id = run_record.new_run_id(cfg)
    record = run_record.build_record(cfg, None, loop, loop.tf.distribute.get_strategy(), run_id,
                               epochs, weights_checksum(loop.model), {})
    record["strategy"] = ENGINE_FLOOR
    # evaluated once, at the end (the rounds are timing, not a training curve)
    record["final_eval_loss"], record["final_eval_accuracy"] = eval_loss, eval_accuracy
    record["sharing"] = sharing
    # a resumed comparison matches on these
    record["config"]["processes"], record["config"]["pin_loops"] = sharing["processes"], pinned
    run_record.write(cfg, record)


def _process(rank, cfg, processes, rounds, steps_per_round, barrier, results, pinned):
    """One of the K processes: warm up, then solo (process 0 only), free, lockstep. The others
    hand their rates to process 0, which writes the record."""
    from experiments.engine import task
    from experiments.comparison.floor import PlainLoop

    task.set_threads(cfg.threads)
    loop = PlainLoop(cfg)
    steps = max(1, min(loop.steps_per_epoch, steps_per_round))
    _phase(loop, steps)  # warm-up, every process at once: tracing, first allocations, caches
    examples = steps * loop.global_batch
    rates = {"solo": [], "free": [], "lockstep": [], "free_cpu_s": [], "lockstep_cpu_s": [],
             "cpus": sorted(os.sched_getaffinity(0))}
    free_sums = []
    # The phases take turns, round after round, so that the machine's drift (a shared host's
    # speed changes from one minute to the next) falls on each of them alike.
    for _ in range(rounds):
        barrier.wait()
        if rank == 0:
            rates["solo"].append(examples / _phase(loop, steps)[0])
        for name, wait in (("free", None), ("lockstep", barrier)):
            barrier.wait()
            cpu_start = time.process_time()  # this process's CPU, all its threads
            seconds, loss, correct = _phase(loop, steps, wait)
            rates[name].append(examples / seconds)
            rates[f"{name}_cpu_s"].append(time.process_time() - cpu_start)
            if name == "free":
                free_sums.append((loss, correct))
    if rank:
        results.put((rank, rates))
        return
    per_rank = {0: rates}
    while len(per_rank) < processes:
        other, other_rates = results.get(timeout=_WAIT_S)
        per_rank[other] = other_rates
    _write_record(cfg, loop, per_rank, free_sums, steps, pinned)


def _child(rank, cfg, processes, rounds, steps_per_round, barrier, results, where):
    die_with_parent()  # a parent killed outright (compare's timeout) takes its loops along
    if where.pinned:  # before TensorFlow starts its thread pools: every one of them inherits it
        os.environ.update(where.env("worker", rank))  # as a --pin_workers worker is
        tf_settings.apply()
    try:
        _process(rank, cfg, processes, rounds, steps_per_round, barrier, results, where.pinned)
    except UserCodeError as e:  # your model or data, found bad once TensorFlow runs it
        barrier.abort()
        print(f"error: {e}", file=sys.stderr, flush=True)
        sys.exit(2)
    except BaseException:
        barrier.abort()  # the others stop waiting and fail too, instead of hanging
        raise


def measure(cfg, processes, rounds, steps_per_round, pin=False):
    """Runs the K processes; returns their exit codes (all 0 when process 0 wrote the record).
    The first to fail stops the others: none is left waiting for it. pin: loop k on the cores
    worker k of a --pin_workers cluster gets (tf_config.cores.placement, the K loops placed as
    K all-reduce workers of --threads threads)."""
    where = placement("multi_worker_mirrored", processes, 0, cfg.threads, pin=bool(pin))
    ctx = multiprocessing.get_context("spawn")  # fresh interpreters: TF is not fork-safe
    # A peer that dies without a word (SIGKILL, out of memory) cannot abort the barrier: the
    # timeout breaks it instead.
    barrier, results = ctx.Barrier(processes, timeout=_WAIT_S), ctx.Queue()
    procs = [ctx.Process(target=_child, args=(rank, cfg, processes, rounds, steps_per_round,
                                               barrier, results, where), daemon=True)
             for rank in range(processes)]
    for p in procs:
        p.start()
    try:
        running = list(procs)
        while running:
            multiprocessing.connection.wait([p.sentinel for p in running])
            running = [p for p in running if p.exitcode is None]
            if any(p.exitcode for p in procs):
                break
    finally:
        for p in procs:  # no process outlives the calibration (Ctrl-C, a failed peer)
            if p.is_alive():
                p.kill()
            p.join()
    return [p.exitcode for p in procs]


def main(argv):
    cfg = plain_loop_config(argv, "the calibration runs plain loops, one device each",
                            fixed_threads=True)
    codes = measure(cfg, _PROCESSES.value, _ROUNDS.value, _STEPS_PER_ROUND.value,
                    _PIN_LOOPS.value)
    if 2 in codes:  # bad input found by a loop (your model or data): it said why in one line
        sys.exit(2)
    if any(codes):
        sys.exit(f"sharing: a plain-loop process failed (exit codes {codes}); no record written")
    sys.exit(0)


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)
