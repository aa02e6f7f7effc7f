"""What the cost model (results/model/cost_model.py) is given, kept apart: a workload profile (what
one replica's step computes and moves, measured by a comparison or written by hand from a published
table) and a cluster spec (hosts, devices, links, parameter servers: the cluster to predict), read
from JSON and checked, with a one-line SpecError naming the flag, the file and the field.

    python -m experiments.recommend --profile=docs/examples/profile_resnet50_v100.json \
        --cluster=docs/examples/cluster_8x8_v100_25g.json

The fields: docs/scaling_model.md ("The model: a workload profile on a cluster spec"); the
profile a comparison writes: results/model/workload_profile.py.
"""
import dataclasses
import json

SYNC_DTYPES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}  # bytes per element
OPTIMIZER_SLOTS = {"sgd": 0, "momentum": 1, "adam": 2}  # slot variables per weight


class SpecError(ValueError):
    """A profile or cluster file that cannot be used (one line for the user)."""


@dataclasses.dataclass
class WorkloadProfile:
    model: str
    batch: int  # examples per replica per step (micro-batch x accumulation steps)
    compute_s: float  # one replica's compute per step at `batch` on the profile's device
    gradient_bytes: dict  # {sync dtype: bytes one replica synchronizes per step}
    gradient_kind: str = "dense"  # "dense", or "sparse" (IndexedSlices: rows, all-gathered)
    # Of a sparse gradient (in the profile's measured sync dtype): the rows' bytes (values and
    # indices) and how many tensors are rows; the rest, dense, is all-reduced in a pack of its
    # own beside the rows' all-gather. 0: not split (all of it counted as the gradient_kind)
    sparse_gradient_bytes: int = 0
    sparse_tensors: int = 0
    pull_bytes: int = 0  # bytes a PSS worker reads from the ps per step (variables' dtype)
    parameter_bytes: int = 0
    optimizer_state_bytes: int = 0
    activation_bytes: int = 0  # held per replica until backward, at `batch`
    # Bytes per example crossing a pipeline stage boundary, one direction (the activation; its
    # gradient returns the same size); 0: unknown, and pipelines are not predicted
    boundary_activation_bytes: int = 0
    # {"S": the largest of S stages' share of the parameters} as the toolkit splits the model
    # (balanced by parameters at its cut points); a missing S: 1/S, equal stages
    stage_weight_shares: dict = dataclasses.field(default_factory=dict)
    tensors: int = 1  # gradient tensors per step (a PSS step reads and pushes each on its own)
    # What splitting the model's transformer blocks over T devices all-reduces
    # (models/tensor_parallel.py): bytes per example over a step's reductions (both
    # directions), the reductions per micro-batch, and the T that divide every split layer;
    # 0 / []: the model has no such blocks, and tensor parallelism is not predicted
    tensor_reduced_bytes: int = 0
    tensor_reductions: int = 0
    tensor_shards: list = dataclasses.field(default_factory=list)
    overhead_s: dict = dataclasses.field(default_factory=dict)  # {strategy: s per step}
    # {strategy: share of its synchronization hidden behind compute}, measured where a strategy's
    # 1-worker step took less than compute + its probe (PSS: the ps and the chief work on other
    # cores while the worker computes); 0 where unmeasured
    overlap: dict = dataclasses.field(default_factory=dict)
    # {strategy: seconds}: one push and pull as this machine's software does it (PSS: its N=1
    # runs' probe, over loopback, where the wire costs next to nothing); a projected worker on
    # a link of its own pays the larger of it and the link's transfer, which overlap (one PSS
    # worker under a shaper, docs/benchmarks.md); {} where unmeasured (a hand-written profile)
    sync_floor_s: dict = dataclasses.field(default_factory=dict)
    # {--compression form: {payload_bytes, exchange, compress_s, state_bytes}} measured for
    # this workload (the reducers experiment's real-loopback runs): a replica's compressed
    # gradient, how it is exchanged ("gather" or "reduce"), the compression's own compute per
    # step on the profile's device, and the per-replica state it keeps (error feedback)
    reducers: dict = dataclasses.field(default_factory=dict)
    # Where a cluster's tasks share one machine's cores (a cluster spec's machine_cores, a local
    # cluster): {strategy: CPU seconds per example over all its tasks, ps and chief too} at N=1
    # ("one_device" too), and {"K": {"slowdown": x, "busy_cores": c}} from the sharing
    # calibration of K one-thread plain loops in lockstep on the profile's machine
    # (experiments/comparison/sharing.py): a step's compute x slowdown when K processes share
    # it, and the c cores such K processes keep busy. Neither reaches a cluster whose devices
    # have cores of their own.
    cpu_s_per_example: dict = dataclasses.field(default_factory=dict)
    sharing: dict = dataclasses.field(default_factory=dict)
    # The parameter servers' CPU seconds per worker step at `batch` (all ps together), measured
    # at PSS N=1 with ps_threads threads per ps: a ps applies the optimizer's update of the
    # variables it holds (PSS places it with the variable) and serves the pull and push, once
    # per worker step, for every worker in turn (see the module doc); 0: unmeasured, no bound
    ps_cpu_s_per_step: float = 0.0
    ps_threads: int = 0
    # {"K": {"batch": B, "step_s": s}}: one device's step measured with K threads at batch B,
    # the batch one device trains under the run's global batch: one process with a
    # machine_cores cluster's K cores to itself (what --strategy=one_device does with its
    # default threads); compute_s / 1 thread where unmeasured
    one_process: dict = dataclasses.field(default_factory=dict)
    device: str = ""  # what compute_s was measured on ("2-vCPU AMD EPYC, 1 thread", "V100")
    source: str = ""  # the records it came from, or a citation

    def gradient(self, dtype="float32"):
        """Bytes one replica synchronizes per step in `dtype`: as measured, or cast from the
        profile's float32 bytes (16-bit halves them)."""
        if dtype not in SYNC_DTYPES:
            raise SpecError(f"sync dtype {dtype!r} is not valid; choose one of: "
                            f"{', '.join(SYNC_DTYPES)}")
        if dtype in self.gradient_bytes:
            return self.gradient_bytes[dtype]
        if "float32" in self.gradient_bytes:
            return self.gradient_bytes["float32"] * SYNC_DTYPES[dtype] // 4
        raise SpecError(f"profile {self.model!r} has gradient bytes for "
                        f"{', '.join(self.gradient_bytes)} only, not {dtype}")

    def sparse_split(self, dtype="float32"):
        """(rows' bytes, dense rest's bytes) of one replica's gradient in `dtype`: all-reduce
        all-gathers the rows and all-reduces the rest in a pack of its own. A dense gradient is
        all rest; a sparse one the profile does not split, all rows. sparse_gradient_bytes are
        in the profile's measured dtype (its float32 entry where it lists several); in another
        dtype the rows keep their share of the gradient, though their int32 indices do not
        shrink (16-bit rows of 64 values: ~1.5% low)."""
        gradient = self.gradient(dtype)
        if self.gradient_kind != "sparse":
            return 0, gradient
        measured = self.gradient_bytes.get("float32", next(iter(self.gradient_bytes.values())))
        if not 0 < self.sparse_gradient_bytes < measured:
            return gradient, 0
        rows = round(gradient * self.sparse_gradient_bytes / measured)
        return rows, gradient - rows

    def to_json(self):
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"


@dataclasses.dataclass
class ClusterSpec:
    hosts: int = 1
    devices_per_host: int = 1
    device_speedup: float = 1.0  # a device's speed relative to the profile's device
    intra_host_gbps: float = 100.0  # between devices of one host (NVLink, PCIe, shared memory)
    intra_host_latency_us: float = 5.0
    inter_host_gbps: float = 10.0  # each host's network link, each direction
    inter_host_latency_us: float = 50.0
    memory_per_device_mb: float = 0.0  # 0: not limited
    num_ps: int = 1
    ps_placement: str = "own_hosts"  # or "with_workers"
    # PSS with the devices of a host reducing their gradients first (an intra-host ring) and the
    # host pushing and pulling once (tf_cnn_benchmarks' distributed_replicated), instead of every
    # device on its own (TF's ParameterServerStrategy, variable_update=parameter_server)
    ps_local_aggregation: bool = False
    shared_medium: bool = False  # every link shares one bucket of inter_host_gbps
    # Cores each parameter server applies updates with; 0: as many as the profile's ps ran
    # with (its ps_threads). The ps's cores are taken as fast as the profile's machine's.
    ps_cores: int = 0
    # One host (the last) slower by this many seconds per step: a straggler (see the module
    # doc); 0: every host equally fast
    straggler_s: float = 0.0
    # The whole cluster (workers, ps, chief) on one machine of this many cores, as a local
    # cluster runs here: its workers' compute is slowed by the profile's sharing at K = N and
    # its rate capped by the cores over the CPU seconds an example costs (see the module doc);
    # 0: every device has cores of its own (a real cluster)
    machine_cores: int = 0
    name: str = ""

    @property
    def workers(self):
        return self.hosts * self.devices_per_host

    def check(self):
        if self.ps_cores < 0:
            raise SpecError(f"cluster ps_cores={self.ps_cores} must be >= 0 (0: as the "
                            f"profile's parameter servers ran)")
        for name in ("hosts", "devices_per_host", "num_ps"):
            if getattr(self, name) < 1:
                raise SpecError(f"cluster {name}={getattr(self, name)} must be >= 1")
        for name in ("device_speedup", "intra_host_gbps", "inter_host_gbps"):
            if getattr(self, name) <= 0:
                raise SpecError(f"cluster {name}={getattr(self, name)} must be > 0")
        if self.machine_cores < 0:
            raise SpecError(f"cluster machine_cores={self.machine_cores} must be >= 0 (0: "
                            f"devices with cores of their own)")
        if self.straggler_s < 0:
            raise SpecError(f"cluster straggler_s={self.straggler_s} must be >= 0")
        if self.ps_placement not in ("own_hosts", "with_workers"):
            raise SpecError(f"cluster ps_placement={self.ps_placement!r} is not valid; choose "
                            f"one of: own_hosts, with_workers")
        return self

    def to_json(self):
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"


def _load(cls, path, what):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise SpecError(f"--{what}={path}: cannot read it as JSON ({e})") from None
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - fields)
    if unknown:
        raise SpecError(f"--{what}={path}: unknown field(s) {', '.join(unknown)}; valid: "
                        f"{', '.join(sorted(fields))}")
    try:
        return cls(**data)
    except TypeError as e:
        raise SpecError(f"--{what}={path}: {e}") from None


def load_profile(path, flag="profile"):
    """The WorkloadProfile in the JSON file `path`; SpecError naming --flag otherwise."""
    profile = _load(WorkloadProfile, path, flag)
    if profile.batch < 1 or profile.compute_s <= 0 or not profile.gradient_bytes:
        raise SpecError(f"--{flag}={path}: needs batch >= 1, compute_s > 0 and gradient_bytes")
    for stages, share in _items(profile.stage_weight_shares, "stage_weight_shares", path, flag):
        if not (str(stages).isdigit() and int(stages) >= 2 and _positive(share) and share <= 1):
            raise SpecError(f"--{flag}={path}: stage_weight_shares {{{stages!r}: {share}}} is not "
                            f"a stage count >= 2 with a share in (0, 1]")
    for what, value in _items(profile.cpu_s_per_example, "cpu_s_per_example", path, flag):
        if not _positive(value):
            raise SpecError(f"--{flag}={path}: cpu_s_per_example {{{what!r}: {value!r}}} is "
                            f"not a strategy with a value > 0")
    for what, value in _items(profile.sync_floor_s, "sync_floor_s", path, flag):
        if not _non_negative(value):
            raise SpecError(f"--{flag}={path}: sync_floor_s {{{what!r}: {value!r}}} is not a "
                            f"strategy with seconds >= 0")
    for cores, step in _items(profile.one_process, "one_process", path, flag):
        if not (str(cores).isdigit() and isinstance(step, dict) and
                _positive(step.get("batch")) and _positive(step.get("step_s"))):
            raise SpecError(f"--{flag}={path}: one_process {{{cores!r}: {step!r}}} is not a "
                            f"core count with {{\"batch\": > 0, \"step_s\": > 0}}")
    ps_cpu, threads = profile.ps_cpu_s_per_step, profile.ps_threads
    if not _non_negative(ps_cpu) or not (isinstance(threads, int) and
                                                     not isinstance(threads, bool) and
                                                     threads >= 0):
        raise SpecError(f"--{flag}={path}: ps_cpu_s_per_step {ps_cpu!r} and ps_threads "
                        f"{threads!r} must be a number >= 0 and a whole number >= 0")
    for processes, figures in _items(profile.sharing, "sharing", path, flag):
        figures_ok = isinstance(figures, dict) and _positive(figures.get("slowdown")) and \
            (figures.get("busy_cores") is None or _positive(figures["busy_cores"]))
        if not (str(processes).isdigit() and figures_ok):
            raise SpecError(f"--{flag}={path}: sharing {{{processes!r}: {figures!r}}} is not a "
                            f"process count with {{\"slowdown\": > 0, \"busy_cores\": > 0 or "
                            f"null}}")
    return profile


def _positive(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _non_negative(value):  # JSON's false is no figure: a bool is refused, not read as 0
    return _positive(value) or (value == 0 and not isinstance(value, bool))


def _items(value, name, path, flag):
    if not isinstance(value, dict):
        raise SpecError(f"--{flag}={path}: {name} must be an object, not {value!r}")
    return value.items()


def load_cluster(path, flag="cluster"):
    """The ClusterSpec in the JSON file `path`, checked; SpecError naming --flag otherwise."""
    try:
        return _load(ClusterSpec, path, flag).check()
    except SpecError as e:
        raise SpecError(str(e) if str(e).startswith("--") else f"--{flag}={path}: {e}") \
            from None


def target_cluster(spec_path, given_flags=(), **fields):
    """The cluster a command targets: the cluster spec file at spec_path, else
    ClusterSpec(**fields) from its flags; flags given beside a file are refused by name (the
    file already says the target)."""
    if spec_path:
        if given_flags:
            raise SpecError(f"--cluster={spec_path} already says the target: drop "
                            f"--{', --'.join(given_flags)}")
        return load_cluster(spec_path)
    return ClusterSpec(**fields).check()
