"""What the cost model (results/model/cost_model.py) is given, kept apart: a workload profile (what
one replica's step computes and moves, measured by a comparison or written by hand from a published
table) and a cluster spec (hosts, devices, links, parameter servers: the cluster to predict), read
from JSON and checked, with a one-line SpecError naming the flag, the file and the field.

    python -m experiments.recommend --profile=docs/examples/profile_resnet50_v100.json \
        --cluster=docs/examples/cluster_8x8_v100_25g.json

Each field is declared once, here (`spec`): type, default (none: required), unit and meaning, and
what a value must be. The checks, to_json and the field list (`python -m results.model.specs`) are
made from those declarations. The profile a comparison measures: results/model/workload_profile.py.
"""
import dataclasses
import json
import textwrap

SYNC_DTYPES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}  # bytes per element
OPTIMIZER_SLOTS = {"sgd": 0, "momentum": 1, "adam": 2}  # slot variables per weight
KINDS = {int: "a whole number", float: "a number", str: "a string", bool: "true or false",
         dict: "an object", list: "a list"}  # what a field's type takes from JSON


class SpecError(ValueError):
    """A profile or cluster file that cannot be used (one line for the user)."""


def spec(default=dataclasses.MISSING, about="", bound=None, choices=None, each=None):
    """A field declared once: its default (none: required), `about` (its unit and meaning), and
    what a value must be besides its type: `bound` (one of BOUNDS), `choices`, or, of an object,
    `each` (a rule on every (key, value) entry, what an entry must be)."""
    given = {"default_factory": type(default)} if isinstance(default, (dict, list)) else \
        {"default": default}
    return dataclasses.field(**given, metadata=dict(
        about=about, bound=bound, choices=choices, each=each,
        required=default is dataclasses.MISSING))


BOUNDS = {"> 0": lambda v: v > 0, ">= 0": lambda v: v >= 0, ">= 1": lambda v: v >= 1}


def _is(value, kind):  # JSON's true and false are no numbers
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return number and (kind is float or isinstance(value, int)) if kind in (int, float) else \
        isinstance(value, kind)


def _positive(value):
    return _is(value, float) and value > 0


_SECONDS = (lambda _, v: _is(v, float) and v >= 0, "a strategy with seconds >= 0")


class _Fields:
    """What both specs do from their fields' declarations."""
    WHAT = ""  # how a message names the spec, before a field's name

    def check(self, where=""):
        """self if each field is as declared; else SpecError naming the first that is not,
        after `where` (the flag and file it came from)."""
        for f in dataclasses.fields(self):
            value, m, name = getattr(self, f.name), f.metadata, f"{where}{self.WHAT}{f.name}"
            about = f" ({m['about']})" if m["about"] else ""
            if not _is(value, f.type):
                raise SpecError(f"{name} must be {KINDS[f.type]}, not {value!r}")
            if m["bound"] and not BOUNDS[m["bound"]](value):
                raise SpecError(f"{name}={value!r} must be {m['bound']}{about}")
            if m["choices"] and value not in m["choices"]:
                raise SpecError(f"{name}={value!r} is not valid; choose one of: "
                                f"{', '.join(m['choices'])}")
            for key, entry in value.items() if m["each"] else ():
                if not m["each"][0](key, entry):
                    raise SpecError(f"{name} {{{key!r}: {entry!r}}} is not {m['each'][1]}")
            if m["required"] and not value:
                raise SpecError(f"{name} must not be empty{about}")
        return self

    def to_json(self):
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def reference(cls):
        """The field list (`python -m results.model.specs`): each field's name, type, what it
        must be, its default, its unit and meaning."""
        lines = []
        for f in dataclasses.fields(cls):
            m = f.metadata
            must = " ".join(filter(None, [KINDS[f.type], m["bound"], m["choices"] and
                                          f"(one of {', '.join(m['choices'])})", m["each"] and
                                          f"of entries each {m['each'][1]}"]))
            default = "required" if m["required"] else "default " + json.dumps(
                f.default_factory() if f.default is dataclasses.MISSING else f.default)
            lines += textwrap.wrap(f"{f.name}: {must}, {default}; {m['about']}", 100,
                                   initial_indent="- ", subsequent_indent="  ",
                                   break_on_hyphens=False)
        return lines


@dataclasses.dataclass
class WorkloadProfile(_Fields):
    model: str = spec(about="the model's name")
    batch: int = spec(bound=">= 1", about="examples per replica per step (micro-batch x "
                      "accumulation steps)")
    compute_s: float = spec(bound="> 0", about="one replica's compute per step at `batch` on "
                            "the profile's device")
    gradient_bytes: dict = spec(each=(lambda k, v: k in SYNC_DTYPES and _positive(v),
                                      f"a sync dtype ({', '.join(SYNC_DTYPES)}) with bytes > 0"),
                                about="bytes one replica synchronizes per step, per sync dtype")
    gradient_kind: str = spec("dense", choices=("dense", "sparse"),
                              about="sparse: IndexedSlices, rows all-gathered")
    sparse_gradient_bytes: int = spec(0, bound=">= 0", about="of a sparse gradient (measured "
                                      "dtype), its rows (values, indices); 0: not split")
    sparse_tensors: int = spec(0, bound=">= 0", about="of a sparse gradient: tensors of rows")
    pull_bytes: int = spec(0, bound=">= 0", about="what a PSS worker reads from the ps per step "
                           "(the variables' dtype)")
    parameter_bytes: int = spec(0, bound=">= 0", about="the model's weights")
    optimizer_state_bytes: int = spec(0, bound=">= 0", about="the optimizer's slots")
    activation_bytes: int = spec(0, bound=">= 0", about="held per replica until the backward")
    boundary_activation_bytes: int = spec(0, bound=">= 0", about="per example crossing a "
                                          "pipeline stage boundary, one way (its gradient the "
                                          "same back); 0: unknown, pipelines not predicted")
    stage_weight_shares: dict = spec({}, each=(
        lambda k, v: k.isdigit() and int(k) >= 2 and _positive(v) and v <= 1,
        "a stage count >= 2 with a share in (0, 1]"), about="{S: the largest of S stages' "
        "share of the parameters} as the toolkit cuts the model; a missing S: 1/S")
    tensors: int = spec(1, bound=">= 1", about="gradient tensors per step (PSS moves each alone)")
    tensor_reduced_bytes: int = spec(0, bound=">= 0", about="per example, all-reduced in a step "
                                     "by models/tensor_parallel.py's split; 0: not predicted")
    tensor_reductions: int = spec(0, bound=">= 0", about="its all-reduces per micro-batch")
    tensor_shards: list = spec([], about="the T that divide every split layer")
    overhead_s: dict = spec({}, each=_SECONDS, about="{strategy: its own per-step software "
                            "seconds with no peer to wait for}")
    overlap: dict = spec({}, each=(lambda _, v: _is(v, float) and 0 <= v <= 1, "a strategy "
                                   "with a share in [0, 1]"), about="{strategy: the share of its "
                         "synchronization its N=1 step hid behind compute}; 0 where unmeasured")
    sync_floor_s: dict = spec({}, each=_SECONDS, about="{strategy: one push and pull as the "
                              "profile's machine's software does it}, a floor under the wire's")
    reducers: dict = spec({}, about="{--compression form: {payload_bytes, exchange: gather or "
                          "reduce, compress_s: its compute per step, state_bytes: per replica}}")
    cpu_s_per_example: dict = spec({}, each=(lambda _, v: _positive(v), "a strategy with a "
                                             "value > 0"), about="{strategy: CPU seconds per "
                                   "example over all its tasks at N=1} (machine_cores only)")
    sharing: dict = spec({}, each=(
        lambda k, v: k.isdigit() and isinstance(v, dict) and _positive(v.get("slowdown")) and
        (v.get("busy_cores") is None or _positive(v["busy_cores"])),
        'a process count with {"slowdown": > 0, "busy_cores": > 0 or null}'),
        about="{K: {slowdown, busy_cores}} of K one-thread loops in lockstep on the profile's "
        "machine (experiments/comparison/sharing.py), for machine_cores")
    ps_cpu_s_per_step: float = spec(0.0, bound=">= 0", about="the ps's CPU seconds per worker "
                                    "step, all ps together, at PSS N=1; 0: unmeasured, no bound")
    ps_threads: int = spec(0, bound=">= 0", about="the threads each ps had there")
    one_process: dict = spec({}, each=(
        lambda k, v: k.isdigit() and isinstance(v, dict) and _positive(v.get("batch")) and
        _positive(v.get("step_s")), 'a core count with {"batch": > 0, "step_s": > 0}'),
        about="{K: {batch, step_s}}: one device's step with K threads at the batch it trains "
        "(machine_cores = K); where unmeasured, compute_s")
    device: str = spec("", about="what compute_s was measured on")
    source: str = spec("", about="the records it came from, or a citation")

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


@dataclasses.dataclass
class ClusterSpec(_Fields):
    WHAT = "cluster "
    hosts: int = spec(1, bound=">= 1", about="hosts, each with a network link of its own")
    devices_per_host: int = spec(1, bound=">= 1", about="devices (workers) per host")
    device_speedup: float = spec(1.0, bound="> 0", about="a device's speed over the profile's")
    intra_host_gbps: float = spec(100.0, bound="> 0", about="between devices of one host "
                                  "(NVLink, PCIe, shared memory)")
    intra_host_latency_us: float = spec(5.0, bound=">= 0", about="per message within a host")
    inter_host_gbps: float = spec(10.0, bound="> 0", about="each host's link, each direction")
    inter_host_latency_us: float = spec(50.0, bound=">= 0", about="per message between hosts")
    memory_per_device_mb: float = spec(0.0, bound=">= 0", about="0: not limited")
    num_ps: int = spec(1, bound=">= 1", about="parameter servers (PSS)")
    ps_placement: str = spec("own_hosts", choices=("own_hosts", "with_workers"),
                             about="the ps on hosts of their own, or beside the workers")
    ps_local_aggregation: bool = spec(False, about="PSS with a host's devices reducing first "
                                      "(an intra-host ring) and the host pushing and pulling "
                                      "once (tf_cnn_benchmarks' distributed_replicated), not "
                                      "each device (TF's ParameterServerStrategy)")
    shared_medium: bool = spec(False, about="every link shares one bucket of inter_host_gbps")
    ps_cores: int = spec(0, bound=">= 0", about="cores each ps updates with, as fast as the "
                         "profile's machine's; 0: as the profile's parameter servers ran")
    straggler_s: float = spec(0.0, bound=">= 0", about="one host (the last) slower by this per "
                              "step; 0: every host equally fast")
    machine_cores: int = spec(0, bound=">= 0", about="the whole cluster on one machine of this "
                              "many cores (the profile's sharing and CPU per example slow and cap "
                              "it); 0: devices with cores of their own")
    name: str = spec("", about="what the spec describes")

    @property
    def workers(self):
        return self.hosts * self.devices_per_host


def _load(cls, path, flag):
    """The `cls` in the JSON file `path`, checked; SpecError naming --flag otherwise."""
    where = f"--{flag}={path}: "
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise SpecError(f"{where}cannot read it as JSON ({e})") from None
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if not isinstance(data, dict):
        raise SpecError(f"{where}must be a JSON object of fields, not {data!r:.80}")
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise SpecError(f"{where}unknown field(s) {', '.join(unknown)}; valid: "
                        f"{', '.join(sorted(fields))}")
    missing = [name for name, f in fields.items() if f.metadata["required"] and name not in data]
    if missing:
        raise SpecError(f"{where}missing the required field(s) {', '.join(missing)}")
    return cls(**data).check(where)


def load_profile(path, flag="profile"):
    """The WorkloadProfile in the JSON file `path`; SpecError naming --flag otherwise."""
    return _load(WorkloadProfile, path, flag)


def load_cluster(path, flag="cluster"):
    """The ClusterSpec in the JSON file `path`, checked; SpecError naming --flag otherwise."""
    return _load(ClusterSpec, path, flag)


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


if __name__ == "__main__":
    for what, cls in (("A workload profile (--profile)", WorkloadProfile),
                      ("A cluster spec (--cluster)", ClusterSpec)):
        print(f"{what}, {cls.__name__}'s fields:", *cls.reference(), "", sep="\n")
