"""The run's configuration declared once: each RunConfig / LaunchConfig field makes its flag,
its --help line and its check (experiments/config/). Pure Python: no TensorFlow."""
import dataclasses

import pytest
from absl import flags

from experiments.config import ConfigError, LaunchConfig, RunConfig, validate
from experiments.config import flags as config_flags
from experiments.config.validation import check_fields


def _fields(config_class):
    return [f for f in dataclasses.fields(config_class) if f.metadata.get("flag", True)]


@pytest.mark.parametrize("config_class", [RunConfig, LaunchConfig])
def test_every_field_makes_one_flag_with_its_default_help_and_choices(config_class):
    values = flags.FlagValues()
    config_flags.define(config_class, flag_values=values)
    for f in _fields(config_class):
        flag = values[f.name]
        assert flag.default == f.default, f.name
        assert flag.help.startswith(f.metadata["help"]), f.name
        for choice in f.metadata.get("choices") or ():
            assert str(choice) in flag.help, (f.name, choice)
    assert set(values) == {f.name for f in _fields(config_class)}
    # and read() gives back the dataclass from the parsed values
    values(["prog"])
    assert config_flags.read(config_class, flag_values=values) == config_class()


def test_a_field_set_by_the_program_makes_no_flag():
    hidden = [f.name for f in dataclasses.fields(RunConfig) if not f.metadata.get("flag", True)]
    values = flags.FlagValues()
    config_flags.define(RunConfig, flag_values=values)
    assert not set(hidden) & set(values)


def test_flag_values_parse_into_the_config():
    values = flags.FlagValues()
    config_flags.define(RunConfig, flag_values=values)
    values(["prog", "--strategy=parameter_server", "--num_workers=3", "--num_ps=1",
            "--nocomm_probe", "--learning_rate=0.5"])
    cfg = config_flags.read(RunConfig, flag_values=values)
    assert (cfg.strategy, cfg.num_workers, cfg.num_ps, cfg.comm_probe, cfg.learning_rate) == (
        "parameter_server", 3, 1, False, 0.5)
    assert config_flags.given("num_ps", values) and not config_flags.given("epochs", values)


@pytest.mark.parametrize("model, dataset", [
    ("resnet", "synthetic_cifar"), ("embedding", "synthetic_tokens"),
    ("gpt", "synthetic_sequences"), ("mlp", "synthetic"), ("my_pkg.nets:build", "synthetic")])
def test_a_run_without_a_dataset_trains_its_comparison_cells_dataset(tmp_path, model, dataset):
    # `experiments.run --model=resnet` reproduces the comparison's resnet cell (32x32x3), not
    # 28x28x1 images (a profile of the wrong input would predict another model's step)
    values = flags.FlagValues()
    config_flags.define(RunConfig, flag_values=values)
    values(["prog", f"--model={model}"])
    cfg = config_flags.read(RunConfig, flag_values=values)
    assert cfg.dataset == dataset
    if ":" not in model:
        from experiments.comparison.options import resolve
        assert resolve("default", models=[model]).dataset_of(model) == dataset
        validate(dataclasses.replace(cfg, results_dir=str(tmp_path)))  # token models included
    # a dataset named on the command line is the one trained
    values(["prog", f"--model={model}", "--dataset=synthetic_cifar"])
    assert config_flags.read(RunConfig, flag_values=values).dataset == "synthetic_cifar"


@pytest.mark.parametrize("config_class", [RunConfig, LaunchConfig])
def test_each_choice_and_bound_is_checked_from_its_declaration(config_class):
    for f in dataclasses.fields(config_class):
        choices, bound = f.metadata.get("choices"), f.metadata.get("bound")
        if choices:
            bad = dataclasses.replace(config_class(), **{f.name: "no-such-value"})
            with pytest.raises(ConfigError, match=f"--{f.name}='no-such-value' is not valid; "
                                                  f"choose one of: {choices[0]}"):
                check_fields(bad)
        if bound:
            bad_value = 0 if bound == "> 0" else -1
            bad = dataclasses.replace(config_class(), **{f.name: f.type(bad_value)})
            with pytest.raises(ConfigError, match=f"--{f.name}={bad_value!r}"):
                check_fields(bad)


def test_the_defaults_are_valid(tmp_path):
    validate(RunConfig(results_dir=str(tmp_path)))


@pytest.mark.parametrize("changes, message", [
    (dict(strategy="one_device", num_stages=2),
     "^--num_stages=2 applies to --strategy=model_parallel or hybrid only"),
    (dict(strategy="one_device", pipeline_schedule="1f1b", microbatches=2),
     "^--microbatches=2 and --pipeline_schedule=1f1b apply to --strategy=model_parallel or "
     "hybrid only"),
    (dict(strategy="multi_worker_mirrored", num_workers=2, tensor_parallel=2),
     r"^--tensor_parallel=2 applies to --strategy=model_parallel or hybrid only \(got "
     r"--strategy=multi_worker_mirrored\)"),
    (dict(strategy="model_parallel", tensor_parallel=2, model="cnn"),
     r"--tensor_parallel=2 splits transformer blocks; --model=cnn has none \(choose one of: "
     r"vit, vit_small, gpt, gpt_small\)"),
    (dict(strategy="model_parallel", model="vit"),
     "--num_stages=1: --strategy=model_parallel splits the model over 2 or more devices"),
    (dict(strategy="no_such"), "--strategy='no_such' is not valid; choose one of: one_device"),
    (dict(tpu="grpc://x:8470"), "--tpu"),
    (dict(compression="topk:2"), r"--compression='topk:2' is not valid; choose one of: none, "
                                 r"bf16, int8, topk:RATIO \(0 < RATIO <= 1\)"),
    (dict(strategy="parameter_server", num_workers=2, compression="int8"),
     "--compression=int8 needs replicas that all-reduce; --strategy=parameter_server pushes "
     "gradients to its parameter servers and takes --compression=bf16 only"),
    (dict(strategy="central_storage", num_replicas=2, compression="powersgd:2"),
     "--compression=powersgd:2 applies to --strategy=mirrored or multi_worker_mirrored or "
     "hybrid"),
    (dict(strategy="one_device", compression="int8"), "--compression=int8 applies to"),
    (dict(strategy="mirrored", num_replicas=1, compression="int8"),
     "--compression=int8 needs 2 or more replicas in sync"),
    (dict(strategy="mirrored", num_replicas=2, compression="bf16",
          gradient_sync_dtype="float16"), "both compress the gradients; give one"),
    (dict(strategy="parameter_server", num_workers=2, bytes_per_pack=4096),
     "--bytes_per_pack=4096 applies to the all-reduce workers of --strategy="
     "multi_worker_mirrored or hybrid, not --strategy=parameter_server"),
    (dict(strategy="multi_worker_mirrored", num_workers=2, bytes_per_pack=4096,
          compression="int8"), "--compression=int8 exchanges its own forms: give one"),
    (dict(zero=2), "--zero=2 is not valid; choose one of: 0, 1"),
    (dict(strategy="mirrored", num_replicas=2, zero=1),
     "--zero=1 shards the optimizer over MWMS workers; use --strategy=multi_worker_mirrored, "
     "not --strategy=mirrored"),
    (dict(strategy="multi_worker_mirrored", num_workers=1, zero=1),
     "--zero=1 needs 2 or more workers to shard over; --num_workers=1"),
    (dict(strategy="multi_worker_mirrored", num_workers=2, zero=1, compression="int8"),
     r"--zero=1 reduce-scatters the gradients itself, in the model's dtype; "
     r"--compression=int8 cannot go with it \(use --compression=none\)"),
    (dict(strategy="multi_worker_mirrored", num_workers=2, zero=1, bytes_per_pack=4096),
     "--bytes_per_pack=4096 cannot go with it"),
])
def test_cross_field_rules_name_the_bad_value(tmp_path, changes, message):
    with pytest.raises(ConfigError, match=message):
        validate(RunConfig(results_dir=str(tmp_path), **changes))


@pytest.mark.parametrize("changes", [
    dict(strategy="model_parallel", model="vit", tensor_parallel=2),  # tensor parallel alone
    dict(strategy="model_parallel", model="gpt", dataset="synthetic_sequences", num_stages=2,
         tensor_parallel=2),
    dict(strategy="hybrid", model="gpt_small", dataset="synthetic_sequences", num_workers=2,
         tensor_parallel=2),  # data x tensor
])
def test_tensor_parallel_needs_no_second_stage(tmp_path, changes):
    validate(RunConfig(results_dir=str(tmp_path), **changes))
