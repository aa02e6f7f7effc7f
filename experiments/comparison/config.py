"""One comparison, every setting of it in one typed value: what the presets register
(presets.py), what the command line lays over one (options.resolve) and what the plan reads
(plan.plan). Fields named after `experiments.compare`'s flags, but for the four a preset alone
sets (PRESET_ONLY).

    config = dataclasses.replace(PRESETS["zoo"], models=("cnn",))
    runs = plan(config)
"""
import dataclasses

from models import default_dataset

# The forms of the reducers experiment unless --reducers says otherwise (experiments.run's
# --compression, strategies/compression.py; packs:BYTES and zero:STAGE: plan.reducer_flag).
REDUCERS = ("int8", "topk:0.01", "powersgd:4", "packs:262144", "zero:1")
# Examples per epoch of a model that has none of its own where a preset sizes per model
OTHER_MODEL_EXAMPLES = 4096


@dataclasses.dataclass(frozen=True)
class Comparison:
    """A comparison's settings; the defaults are the default preset's."""
    # what is compared, on what
    models: tuple = ("cnn",)
    dataset: str = ""  # every model's; "": each model its own (models.default_dataset)
    strategies: tuple = ("mirrored", "multi_worker_mirrored", "parameter_server")
    experiments: tuple = ("scaling",)  # presets.EXPERIMENT_NAMES
    # the sweeps: every cell at each worker count, size, K and repeat
    workers: tuple = (1, 2)
    train_examples: tuple = (16384,)  # every model's; (): each its own (model_examples)
    accumulation_steps: tuple = (1,)
    repeats: int = 1
    epochs: int = 4  # the first is warm-up
    # every run
    batch_size_per_replica: int = 64
    steps_per_execution: int = 8
    num_ps: int = 1  # parameter_server's
    threads_per_worker: int = 1  # of every worker and of the baseline
    pin_cores: bool = False  # each cell held to the cores its workers get
    # the experiments' own sweeps
    straggler_delays: tuple = (0, 25, 50, 100)  # ms per step of the last worker
    straggler_workers: int = 2
    bandwidths: tuple = (0.02, 0.1, 0.5, 0.0)  # Gbit/s; 0: the real loopback
    reducers: tuple = REDUCERS
    # sizing, output and the report
    time_budget_min: float = 5.0  # what a calibrated comparison takes (0: not calibrated)
    results_dir: str = "runs/compare"
    target_accuracy: float = 0.9
    run_timeout: float = 1800.0  # seconds before one run is abandoned
    # set by a preset only (PRESET_ONLY)
    floors: bool = True  # the plain-loop engine floors beside the scaling cells
    # examples per epoch from a short calibration run, so the whole comparison takes
    # time_budget_min (one model; off once --train_examples is given)
    calibrate: bool = True
    model_examples: dict = dataclasses.field(default_factory=dict)  # model -> examples/epoch
    model_bandwidths: dict = dataclasses.field(default_factory=dict)  # model -> (Gbit/s, ...)

    def dataset_of(self, model):
        return self.dataset or default_dataset(model)

    def train_examples_of(self, model):
        """The examples per epoch `model` runs at: the comparison's, else its own."""
        return self.train_examples or (self.model_examples.get(model, OTHER_MODEL_EXAMPLES),)

    def bandwidths_of(self, model):
        return self.model_bandwidths.get(model, self.bandwidths)


PRESET_ONLY = ("floors", "calibrate", "model_examples", "model_bandwidths")
# The settings the command line may give (experiments.compare's flags of the same names)
FLAG_FIELDS = tuple(f.name for f in dataclasses.fields(Comparison) if f.name not in PRESET_ONLY)
