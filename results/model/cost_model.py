"""The one cost model of a data-parallel training step: a workload profile (what one replica's step
computes and moves) on a cluster spec (hosts, devices, links, parameter servers) under a strategy.
The report's projections (results/report/projections.py) and its check of this machine's own runs
(results/model/scaling_model.py), the network experiment (results/report/network.py), the planner
and `experiments.recommend` all predict through `predict`; no other module models a strategy's cost.
Its two inputs, the profile and the cluster spec, and their JSON files: results/model/specs.py.

    python -m experiments.recommend --profile=docs/examples/profile_resnet50_v100.json \
        --cluster=docs/examples/cluster_8x8_v100_25g.json

Per-replica step time:  t = compute / device_speedup + overhead + communication
  compute      the profile's compute_s: one replica's forward, backward and update at `batch`,
               measured with one worker per core (or written from a published table)
  overhead     the strategy's per-step software cost with no peer to wait for (dispatch, its
               distributed input path), measured at N=1 on idle cores; host CPU, not scaled
  communication, with G = gradient bytes in the sync dtype, P = bytes a PSS worker pulls (the
  variables, in their own dtype), d devices per host, H hosts, N = d x H workers:
    all-reduce (MWMS), hierarchical as NCCL and Horovod do it: a ring within each host, then a
      ring across hosts carrying the whole gradient through each host's NIC:
        2 (d-1)/d G/B_intra + 2 (d-1) a_intra  +  2 (H-1)/H G/B_inter + 2 (H-1) a_inter
      sparse gradients (IndexedSlices) are all-gathered, not reduced: each worker receives the
      other N-1 workers' rows, a ring of N-1 steps over the slowest tier: (N-1) (G_rows / B + a),
      and the dense rest of the step's gradient (G - G_rows) is all-reduced as above, in a pack
      of its own
    parameter servers (PSS), K of them holding 1/K of the variables each: a worker pushes G and
      pulls P per step; a ps's link carries the traffic of the N/K workers it serves, a host's
      link the traffic of its d workers:  (G + P) / B_inter x max(d, N/K) + 2 a_inter
      (ps on hosts of their own; `ps_placement="with_workers"` keeps the share of the ps
      beside a worker off the network: x (H-1)/H); with `ps_local_aggregation` a host's devices
      all-reduce within the host first and the host pushes and pulls once: an intra-host ring
      plus (G + P) / B_inter x max(1, H/K); on hosts of their own a worker pays at least the
      profile's sync_floor_s, one push and pull as the profile's machine's software does it
      (its loopback probe): the software and the wire overlap, and the larger is paid
      (docs/scaling_model.md); the overlap below then hides its share of the larger, as it
      hid the probe at N=1; host software: not scaled by device_speedup, measured in the
      profile's sync dtype
    pipelines (GPipe over S equal stages on one host's devices, M micro-batches; hybrid: one
      pipeline per host, an MWMS worker each, all-reducing G across hosts): compute / S x
      (M + S - 1) / M, plus each boundary's activation forward and gradient back for one
      micro-batch on the critical path, 2 (S-1) (batch / M x A / B_intra + a_intra), A the
      profile's boundary_activation_bytes per example; a device holds the largest stage's share
      of the weights (the profile's stage_weight_shares; 1/S where unknown) and 1/S of the
      activations (under 1F1B min(S, M)/M of that: the same time, fewer held)
    tensor parallelism (--tensor_parallel=T within each stage; Megatron-LM's split): the
      stage's compute / T plus its R reductions per micro-batch, each its share X / (R M) of
      the profile's tensor_reduced_bytes x batch handed out from the stage's first device and
      the T - 1 partial sums gathered back to it (what the toolkit runs; Megatron's ring would
      move 2 (T-1)/T X per device): R M (2 (T-1) X / (R M) / B_intra + 2 a_intra), on the
      critical path; then the pipeline's bubble as above; a device holds 1/(S T) of the
      weights and 1/S of the activations (layer outputs stay whole)
    reducers (--compression, under all-reduce; strategies/compression.py): the profile's
      measured payload C of one replica's compressed gradient all-gathered ((N-1) C / B, int8
      and top-k) or all-reduced like a gradient (PowerSGD's factors), plus the compression's own
      compute, scaled with the device; its per-replica state (error feedback) adds to memory
    ZeRO-1 (--zero=1, MWMS; experiments/engine/zero.py): the gradient reduce-scattered and the
      parameters all-gathered, both in the model's dtype: per worker the bytes of a ring
      all-reduce of the parameters, 2 (N-1)/N W (dense, whatever the gradient's kind), after
      the whole backward (no overlap); a device holds 1/N of the optimizer state and a copy of
      1/N of the parameters
    the parameter servers' own work (PSS): a ps applies the optimizer's update to the variables
      it holds and serves every pull and push, one worker's after another's; the profile's ps
      CPU seconds per worker step c (PSS N=1, with the ps's threads t) bound the cluster at
      K x (ps_cores / t) x batch / c examples per second (x d with ps_local_aggregation: one
      update per host), bound "the parameter servers' CPU"; assumed: ps cores as fast as the
      profile's machine's, t threads serve t cores' worth (a ps of one thread uses somewhat
      more than a core with workers queued), an accumulated step's one update costs the ps what one
      step's does; a bounded prediction's step is the workers' step at the bound's rate
    shared medium (the emulated network, tc tbf on one loopback): every byte of every link
      goes through one bucket of B: all-reduce 2 (N-1) G / B per step; a PSS worker (G + P)/B
      per step, and the cluster at most B / (G + P) steps per second
  a straggler (the cluster's `straggler_s`: one host whose every step takes that much longer,
  a busier or slower machine; --adapt measures it as what the others wait for it): in lockstep
  (all-reduce, pipelines) every step waits for it, t + straggler_s; under PSS only its own
  workers slow (asynchronous steps): the rate is (N - d) b / t + d b / (t + straggler_s), d its
  devices; the planner leaves it out of a configuration on fewer hosts than the cluster's
  one machine's cores (the cluster's `machine_cores`: a local cluster, every task on one
  machine): N > 1 data-parallel workers' compute x the profile's sharing slowdown at K = N (K
  one-thread loops in lockstep there, as MWMS workers wait on each other and a PSS worker on
  its ps), and the rate at most min(busy cores at K, machine_cores) / the strategy's CPU seconds
  per example at N=1 over all its tasks (ps and chief too), bound "this machine's cores";
  where the profile lacks a figure, its term is left out. One device (one process: the
  planner's single-device configuration) has the K = machine_cores cores to itself: its compute
  is the profile's one_process step at K threads, measured at the batch one device will train
  (scaled linearly to another). A comparison's own local runs are predicted from their records
  the same way, with what was measured here in place of the links (`Here`: the synchronization
  swept with N processes and the CPU it costs each, added to the cap's step). What it leaves
  out: the CPU of MWMS's all-reduce in the planner's cap (an N=1 MWMS run reduces nothing, and
  the planner's profile has no sweep), a one-host
  MWMS configuration is one MirroredStrategy process yet slowed as N processes, and pipelines
  get neither term. The sharing was measured on the profile's machine: machine_cores with a
  profile from elsewhere carries that machine's sharing

Assumptions (said in every report that uses it): synchronization overlaps compute only by the
profile's measured `overlap` share (0 where unmeasured; communication x (1 - overlap)), by no
more than the N=1 runs hid of their own probe (overlap x sync_floor_s, where measured: a
slower link's transfer was not hidden under a shaper: docs/scaling_model.md), and
never by more than the step's compute (hidden communication runs beside compute: a step is never
shorter than its own communication, so a parameter server's link still bounds a cluster whose
N=1 run hid all of its pushes and pulls), links
are full duplex and uncontended except as above, every worker is equally fast but a straggler's,
the per-replica batch is the profile's.
"""
import dataclasses

from models.schedules import in_flight, schedule
from results.model.specs import ClusterSpec, SpecError
from strategies import REGISTRY, compression, data_parallel_workers, kind

# The strategies it models: data-parallel workers (strategies.data_parallel_workers), and the
# pipelines (one GPipe pipeline over S devices of a host; hybrid: one per MWMS worker).
STRATEGIES = tuple(n for n in REGISTRY if data_parallel_workers(n))
PIPELINES = tuple(n for n in REGISTRY if kind(n).pipelined)
ZERO_STRATEGIES = ("multi_worker_mirrored",)  # --zero=1 (experiments/engine/zero.py)


PS_BOUND = "the parameter servers' CPU"  # a Prediction's bound where the ps's work holds PSS


def _ring(nbytes, n, gbps, latency_us):
    if n <= 1:
        return 0.0
    return 2 * (n - 1) / n * nbytes * 8 / (gbps * 1e9) + 2 * (n - 1) * latency_us * 1e-6


def _sent_per_worker(gradient, n, kind):
    """What one worker sends per step: ring all-reduce 2(N-1)/N G; all-gather of sparse rows
    (and of int8 / top-k payloads), its rows to each of the N-1 others in a ring, (N-1) G."""
    return compression.sent_per_replica(gradient, n, "gather" if kind == "sparse" else "reduce")


def reducer_s(reducer, cluster):
    """Seconds of one step's synchronization through a reducer (--compression; a profile's
    `reducers` entry): its payload all-gathered (int8, topk: exchange "gather") or all-reduced
    (powersgd) like a gradient, plus the compression's own compute, measured on the profile's
    device and scaled with it."""
    kind_ = "sparse" if reducer["exchange"] == "gather" else "dense"
    return allreduce_s(reducer["payload_bytes"], cluster, kind_) + \
        (reducer.get("compress_s") or 0.0) / cluster.device_speedup


def bytes_moved(profile, strategy, n, dtype="float32", shared_medium=False):
    """Bytes the cost model moves per step: through one worker's link (PSS: its push G and pull
    P), or on a shared medium through the medium, every worker's together (PSS: one worker's
    step; the workers' steps share the medium)."""
    if kind(strategy).parameter_servers:
        return profile.gradient(dtype) + profile.pull_bytes
    rows, rest = profile.sparse_split(dtype)
    sent = _sent_per_worker(rows, n, "sparse") + _sent_per_worker(rest, n, "dense")
    return n * sent if shared_medium else sent


def allreduce_s(gradient, cluster, kind="dense"):
    """Seconds of one step's gradient synchronization under MWMS (see the module doc)."""
    n, d, h = cluster.workers, cluster.devices_per_host, cluster.hosts
    if n <= 1:
        return 0.0
    if cluster.shared_medium:
        return n * _sent_per_worker(gradient, n, kind) * 8 / (cluster.inter_host_gbps * 1e9)
    if kind == "sparse":  # a ring all-gather of every worker's rows over the slowest tier
        gbps, latency_us = (cluster.inter_host_gbps, cluster.inter_host_latency_us) if h > 1 \
            else (cluster.intra_host_gbps, cluster.intra_host_latency_us)
        return (n - 1) * (gradient * 8 / (gbps * 1e9) + latency_us * 1e-6)
    return _ring(gradient, d, cluster.intra_host_gbps, cluster.intra_host_latency_us) + \
        _ring(gradient, h, cluster.inter_host_gbps, cluster.inter_host_latency_us)


def parameter_server_s(gradient, pull, cluster):
    """Seconds of one worker step's push and pull under PSS (see the module doc)."""
    moved = gradient + pull
    gbps = cluster.inter_host_gbps
    if cluster.shared_medium:
        return moved * 8 / (gbps * 1e9)
    local = 0.0
    if cluster.ps_local_aggregation:  # one push and pull per host, after an intra-host ring
        local = _ring(gradient, cluster.devices_per_host, cluster.intra_host_gbps,
                      cluster.intra_host_latency_us)
        fan_in = max(1.0, cluster.hosts / cluster.num_ps)
    else:
        fan_in = max(cluster.devices_per_host, cluster.workers / cluster.num_ps)
    seconds = moved * 8 / (gbps * 1e9) * fan_in + 2 * cluster.inter_host_latency_us * 1e-6
    if cluster.ps_placement == "with_workers" and cluster.hosts > 1:
        seconds *= (cluster.hosts - 1) / cluster.hosts
    return local + seconds


@dataclasses.dataclass
class Prediction:
    strategy: str
    workers: int
    step_s: float
    compute_s: float
    overhead_s: float
    communication_s: float
    examples_per_sec: float
    speedup: float  # over one device of the cluster computing alone (`compute`)
    efficiency: float
    communication_share: float
    memory_per_device_bytes: int
    fits_memory: bool
    bound: str = ""  # what limits it beyond the step ("the shared link", "a straggler")
    # seconds a step waits for the straggler (lockstep; under PSS its own steps' excess)
    straggler_s: float = 0.0


def memory_per_device(profile, strategy, stages=1, zero_shards=1, tensor_parallel=1,
                      activation_share=1.0):
    """Bytes one device holds: its parameters, their gradients and the activations of its
    batch, and under all-reduce strategies the optimizer state too (under PSS it lives on the
    parameter servers; a worker holds what it pulled), 1/zero_shards of it under ZeRO-1, plus
    the worker's copy of its 1/zero_shards of the parameters (zero.py's shard). A model split
    over S stages puts its largest stage's share of the weights on the busiest device (the
    profile's stage_weight_shares, as the toolkit cuts it; 1/S where unknown) and 1/S of the
    activations, of those the share its schedule keeps in flight (`activation_share`: GPipe
    every micro-batch's, 1; 1F1B's first stage min(S, M) of M); T tensor shards split the
    weights (the split layers holding nearly all of them) but not the activations: every
    layer's output is whole on the stage's first device, as Megatron keeps it on every rank."""
    weights = 2 * profile.parameter_bytes
    if not kind(strategy).parameter_servers:
        weights += profile.optimizer_state_bytes // zero_shards
    if zero_shards > 1:
        weights += profile.parameter_bytes // zero_shards
    share = profile.stage_weight_shares.get(str(stages), 1 / stages) if stages > 1 else 1.0
    return int(weights * share / tensor_parallel +
               profile.activation_bytes * activation_share // stages)


def activation_share(schedule_name, stages, microbatches):
    """The share of a step's activations a pipeline's busiest stage holds at once: GPipe all of
    its micro-batches', 1F1B's first stage min(S, M) of M (models/schedules.py)."""
    return in_flight(schedule(schedule_name, stages, microbatches)[0]) / microbatches


def tensor_s(profile, shards, microbatches, cluster):
    """Seconds of one step's tensor-parallel exchanges (models/tensor_parallel.py): each of the
    profile's reductions per micro-batch sums its share of tensor_reduced_bytes x the
    micro-batch as the toolkit does, through the stage's first device: the tensor handed out to
    the T - 1 other shards, their T - 1 partial sums gathered back, 2 (T - 1) x its bytes over
    that device's link and 2 latencies, on the critical path (each sum is the next layer's
    input)."""
    if shards < 2:
        return 0.0
    if not profile.tensor_reduced_bytes or not profile.tensor_reductions:
        raise SpecError(f"profile {profile.model!r} has no tensor_reduced_bytes: tensor "
                        f"parallelism cannot be predicted (a model without transformer blocks)")
    if profile.tensor_shards and shards not in profile.tensor_shards:
        raise SpecError(f"tensor_parallel={shards} does not divide profile "
                        f"{profile.model!r}'s split layers (valid: "
                        f"{', '.join(map(str, profile.tensor_shards))})")
    count = profile.tensor_reductions * microbatches
    each = profile.tensor_reduced_bytes * profile.batch / count
    return count * (2 * (shards - 1) * each * 8 / (cluster.intra_host_gbps * 1e9) +
                    2 * cluster.intra_host_latency_us * 1e-6)


def pipeline_s(profile, stages, microbatches, cluster, tensor_parallel=1):
    """(compute, tensor exchanges, boundary transfers on the critical path) of one step of a
    model split over `stages` equal stages x `tensor_parallel` shards on one host's devices,
    `microbatches` micro-batches. Each stage's work is 1/S of the step's compute / T plus its
    share of the tensor exchanges (tensor_s); over S >= 2 stages GPipe's (M + S - 1) slots of
    1/M of that each (the bubble (S-1)/(M+S-1), 1F1B's too), and a micro-batch's activation
    crosses each of the S-1 boundaries forward and its gradient back, at the intra-host
    bandwidth; transfers of the other micro-batches overlap other stages' compute."""
    if stages * tensor_parallel < 2 or microbatches < 1:
        raise SpecError(f"a model split needs 2 or more devices (stages x tensor_parallel) and "
                        f"microbatches >= 1, got {stages} x {tensor_parallel}, {microbatches}")
    compute = profile.compute_s / cluster.device_speedup / tensor_parallel
    exchanges = tensor_s(profile, tensor_parallel, microbatches, cluster)
    if stages == 1:
        return compute, exchanges, 0.0
    if not profile.boundary_activation_bytes:
        raise SpecError(f"profile {profile.model!r} has no boundary_activation_bytes: pipelines "
                        f"cannot be predicted")
    slots = (microbatches + stages - 1) / microbatches / stages
    one = profile.batch / microbatches * profile.boundary_activation_bytes * 8 / (
        cluster.intra_host_gbps * 1e9) + cluster.intra_host_latency_us * 1e-6
    return compute * slots, exchanges * slots, 2 * (stages - 1) * one


def predict(profile, cluster, strategy, sync_dtype="float32", overlap=None, stages=1,
            microbatches=1, compression="none", zero=0, tensor_parallel=1,
            schedule_name="gpipe", here=None):
    """The step, throughput and efficiency of `strategy` for `profile` on `cluster`; overlap:
    the share of synchronization hidden behind compute (None: the profile's measured one);
    compression: an all-reduce's --compression form, from the profile's `reducers`; zero: the
    ZeRO stage (1: MWMS's optimizer state sharded over its workers).
    Pipelines: `stages` x `tensor_parallel` devices of one host per pipeline, `microbatches`
    per step run in `schedule_name` order (gpipe or 1f1b: the same time, 1F1B holding fewer
    micro-batches' activations); model_parallel is one pipeline, hybrid one per host (an MWMS
    worker per host all-reducing the gradients). here: this machine's measured terms (Here),
    only where its own local cluster's runs are predicted."""
    # this machine's own software cost of a synchronization is a floor only for a cluster of
    # hosts of their own: a local cluster (Here, machine_cores, the emulated shared medium)
    # pays what was measured here instead
    own_hosts = here is None and not cluster.machine_cores and not cluster.shared_medium
    here = here or Here()
    floor = profile.sync_floor_s.get(strategy, 0.0)  # PSS's push and pull here, where measured
    if overlap is None:
        overlap = profile.overlap.get(strategy, 0.0)
    if strategy not in STRATEGIES + PIPELINES:
        raise SpecError(f"the cost model covers {', '.join(STRATEGIES + PIPELINES)}, not "
                        f"{strategy!r}")
    if tensor_parallel > 1 and not kind(strategy).pipelined:
        raise SpecError(f"tensor_parallel={tensor_parallel} splits the model within a "
                        f"pipeline's devices: {', '.join(PIPELINES)}, not {strategy}")
    compute = profile.compute_s / cluster.device_speedup
    overhead = profile.overhead_s.get(strategy, 0.0)
    gradient = profile.gradient(sync_dtype)
    slowdown, cores_cap = on_one_machine(profile, cluster, strategy)
    compute *= slowdown
    reducer = None
    if compression != "none":
        reducer = profile.reducers.get(compression)
        if reducer is None or kind(strategy).parameter_servers or \
                profile.gradient_kind == "sparse":
            raise SpecError(f"compression {compression!r} under {strategy}: the profile "
                            f"measured {', '.join(profile.reducers) or 'no reducer'} (all-reduce "
                            f"strategies and dense gradients only)")
    if zero and (strategy not in ZERO_STRATEGIES or compression != "none" or
                 sync_dtype != "float32"):
        raise SpecError(f"ZeRO-{zero} under {strategy} with {compression!r} and {sync_dtype} "
                        f"sync: the toolkit shards under {', '.join(ZERO_STRATEGIES)} with "
                        f"neither compression nor a 16-bit sync")
    if zero:  # the parameters' bytes, reduce-scattered and all-gathered, hidden by nothing
        gradient, overlap = profile.parameter_bytes, 0.0
    # the compression's own compute: on the step's path, hidden by no overlap
    compress = ((reducer or {}).get("compress_s") or 0.0) / cluster.device_speedup

    def sync(part):  # one step's all-reduce (or the reducer's exchange) on `part`
        if reducer:
            return reducer_s(reducer, part)
        if zero:
            return allreduce_s(gradient, part)
        rows, rest = profile.sparse_split(sync_dtype)  # the rows all-gathered beside the rest
        return (allreduce_s(rows, part, "sparse") if rows else 0.0) + \
            (allreduce_s(rest, part) if rest else 0.0)

    replicas, devices = cluster.workers, cluster.workers
    if kind(strategy).pipelined:
        compute, exchanges, transfers = pipeline_s(profile, stages, microbatches, cluster,
                                                   tensor_parallel)
        replicas = cluster.hosts if kind(strategy).all_reduce else 1
        devices = replicas * stages * tensor_parallel
        comm = exchanges + transfers + (sync(dataclasses.replace(cluster, devices_per_host=1))
                                        if replicas > 1 else 0.0)
    elif kind(strategy).parameter_servers:
        comm = parameter_server_s(gradient, profile.pull_bytes, cluster)
        if own_hosts:  # the software's cost and the wire's overlap: the larger is paid
            comm = max(comm, floor)
    else:
        comm = sync(cluster)
    comm += here.sync_s - here.sync_hidden * min(comm, here.sync_s)
    # What overlaps hides runs beside the step's compute, so it hides no more than that compute
    hidden = min((comm - compress) * overlap, compute)
    if floor:  # the N=1 runs hid that share of their own probe, and no more than that
        hidden = min(hidden, overlap * floor)
    comm_exposed = comm - hidden
    step = compute + overhead + comm_exposed + here.local_s
    rate = replicas * profile.batch / step
    bound = ""
    if cluster.straggler_s:
        step, rate = straggled(step, rate, replicas, profile.batch, strategy, cluster)
        bound = "a straggler"
    if cores_cap is not None and cores_cap < rate:
        rate, bound = cores_cap, "this machine's cores"
    if kind(strategy).parameter_servers and cluster.shared_medium:
        cap = profile.batch * cluster.inter_host_gbps * 1e9 / 8 / (gradient + profile.pull_bytes)
        if cap < rate:
            rate, bound = cap, "the shared link"
    served = ps_served(profile, cluster) if kind(strategy).parameter_servers else None
    if served is not None and served < rate:
        rate, bound = served, PS_BOUND
    if bound and bound != "a straggler":
        # a worker's step at the bound's rate: compute, overhead and communication, and the
        # rest waiting for the cores, the link or the ps
        step = replicas * profile.batch / rate
    # against one device computing alone (no strategy, nothing to synchronize): the baseline
    # every efficiency in the report has, so a projection's and a measured run's agree
    alone = profile.batch / (profile.compute_s / cluster.device_speedup)
    speedup = rate / alone
    split = stages if kind(strategy).pipelined else 1
    memory = memory_per_device(profile, strategy, split, replicas if zero else 1,
                               tensor_parallel,
                               activation_share(schedule_name, split, microbatches)) + \
        ((reducer or {}).get("state_bytes") or 0) // (split * tensor_parallel)
    return Prediction(strategy, devices, step, compute, overhead, comm_exposed, rate,
                      speedup, speedup / devices, comm_exposed / step, memory,
                      fits_memory(memory, cluster), bound, cluster.straggler_s)


def ps_served(profile, cluster):
    """Examples/s the cluster's parameter servers can serve (see the module doc), or None where
    the profile did not measure their CPU: K ps x (their cores / the threads the profile's ps
    had) worker steps of `batch` per ps CPU second of a step; with ps_local_aggregation a
    host's one push covers its d devices' steps, x d."""
    if not profile.ps_cpu_s_per_step:
        return None
    per_push = cluster.devices_per_host if cluster.ps_local_aggregation else 1
    return cluster.num_ps * ps_cores(profile, cluster) / (profile.ps_threads or 1) * per_push * \
        profile.batch / profile.ps_cpu_s_per_step


def ps_cores(profile, cluster):
    """The cores each of the cluster's parameter servers applies updates with: its ps_cores, or
    as many as the profile's ps had threads (one where unknown)."""
    return cluster.ps_cores or profile.ps_threads or 1


@dataclasses.dataclass(frozen=True)
class Here:
    """Terms measured on this machine for predicting its own local cluster's runs from their records
    (results/model/scaling_model.py, results/report/network.py); a projection to a cluster we do not
    have never takes one. sync_s: one step's synchronization as measured here with the run's N
    processes (the real loopback's probe), added to what the cluster's links take (less
    sync_hidden's share); local_s: the rest
    of a step measured here beyond compute, overhead and synchronization (a fit point's);
    sync_hidden: the share of the smaller of sync_s and the links' time that runs beside the other
    (an all-reduce's copies and reductions beside its chunks on the wire: measured by
    results/report/network.py under a shaper; 0, in series, elsewhere)."""
    sync_s: float = 0.0
    local_s: float = 0.0
    sync_hidden: float = 0.0


def on_one_machine(profile, cluster, strategy):
    """(compute factor, examples/s cap or None) of `strategy`'s data-parallel workers when the
    whole cluster shares one machine of cluster.machine_cores cores (see the module doc): the
    profile's sharing slowdown at K = N workers, and min(its busy cores, machine_cores) over a
    worker step's CPU (the strategy's CPU seconds per example x batch);
    (1, None) on a real cluster, for one worker, for pipelines (one process per host, not
    modelled), and where the profile lacks the figure."""
    n = cluster.workers
    if not cluster.machine_cores or n < 2 or strategy not in STRATEGIES:
        return 1.0, None
    shared = profile.sharing.get(str(n)) or {}
    slowdown = shared.get("slowdown") or 1.0
    per_example = profile.cpu_s_per_example.get(strategy)
    if not per_example:
        return slowdown, None
    cores = min(shared.get("busy_cores") or cluster.machine_cores, cluster.machine_cores)
    return slowdown, cores / per_example


def this_machine(workers, cores, shaped_gbps=0.0, num_ps=1):
    """The ClusterSpec of a local cluster of `workers` one-device workers sharing this machine's
    `cores` (0: not known, and no sharing term), its synchronization measured (Here) rather
    than modelled: links that cost nothing, or with shaped_gbps the emulated network's one
    shaper of that rate shared by every link (tf_config/netshape.py)."""
    if shaped_gbps:
        return ClusterSpec(hosts=workers, inter_host_gbps=shaped_gbps, shared_medium=True,
                           machine_cores=cores, num_ps=num_ps)
    return ClusterSpec(hosts=workers, inter_host_gbps=float("inf"), inter_host_latency_us=0.0,
                       intra_host_gbps=float("inf"), intra_host_latency_us=0.0,
                       machine_cores=cores, num_ps=num_ps)


def one_process_compute(profile, cluster):
    """Seconds of one device's compute at profile.batch: on a machine_cores cluster, whose K
    cores the one process has, the profile's one_process step at K threads scaled linearly
    from its measured batch; else (a real cluster's device, or unmeasured) compute_s; both
    over the cluster's device_speedup."""
    measured = profile.one_process.get(str(cluster.machine_cores)) \
        if cluster.machine_cores else None
    if measured:
        return measured["step_s"] * profile.batch / measured["batch"] / cluster.device_speedup
    return profile.compute_s / cluster.device_speedup


def straggled(step, rate, replicas, batch, strategy, cluster):
    """(step, examples/s) with the cluster's straggler (see the module doc): every lockstep step
    waits for it; under PSS only the workers on its host, d of the N, step that much slower."""
    if kind(strategy).parameter_servers:
        slow = min(cluster.devices_per_host, replicas)
        return step, (replicas - slow) * batch / step + slow * batch / (step + cluster.straggler_s)
    step += cluster.straggler_s
    return step, replicas * batch / step


def fits_memory(nbytes, cluster):
    """Whether `nbytes` fit one device of `cluster` (always, where its memory is not limited)."""
    return not cluster.memory_per_device_mb or nbytes <= cluster.memory_per_device_mb * 1e6
