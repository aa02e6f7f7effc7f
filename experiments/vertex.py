"""Vertex AI custom job (or Kubeflow TFJob manifest) for an experiments.run command.

    python -m experiments.vertex --strategy=multi_worker_mirrored --num_workers=2 --dry_run
    python -m experiments.vertex --strategy=parameter_server --num_workers=2 --num_ps=1 --dry_run
    python -m experiments.vertex --strategy=mirrored --num_replicas=2 \
        --accelerator_type=NVIDIA_TESLA_T4 --accelerator_count=2 --dry_run
    python -m experiments.vertex --strategy=tpu --dry_run     # cloud-tpu, TPU_V3 x 8
    python -m experiments.vertex --strategy=auto --plan_profile=PROFILE.json \
        --plan_cluster=CLUSTER.json --dry_run   # the planner's best (experiments/config/auto.py)
    python -m experiments.vertex --strategy=auto --num_workers=3 --num_ps=1 --dry_run
        # no profile: the job's chief, workers and ps plan on themselves (adaptive/on_workers.py)
    python -m experiments.vertex --strategy=multi_worker_mirrored --num_workers=2 --format=tfjob \
        --image_uri=IMAGE --base_output_dir=gs://B/run1
    python -m experiments.vertex ... --image_uri=IMAGE --base_output_dir=gs://B/run1 \
        --nodry_run --project=P --region=us-central1   # submits (pip install -e '.[vertex]')

Flags after `--` go to experiments.run unchanged, e.g. `-- --model=cnn --epochs=5`. Your own
model or data (`-- --model=my_pkg.nets:build --dataset=my_pkg.data:load`) must be in the image:
every pool runs the same command in it.

`--format=tfjob` prints plain YAML (no anchors or aliases) with `runPolicy.cleanPodPolicy:
Running`, so PSS servers are deleted when the job ends; the Kubeflow training SDK
(`pip install -e '.[tfjob]'`) accepts it as a KubeflowOrgV1TFJob.

Submission needs a staging bucket (the SDK's CustomJob refuses to exist without one):
`--staging_bucket`, else `--base_output_dir`. A TFJob (printed to be applied) and a submission
refuse the placeholder image unless `--allow_placeholder_image`; a Vertex dry run prints it.
A TFJob needs somewhere for its records that outlives the pods: `--base_output_dir` (every
container gets Vertex's AIP_* directories under it) or `-- --results_dir=gs://...`.
"""
import json
import sys

from experiments.engine import tf_settings

tf_settings.apply()  # before TensorFlow loads: quiet start-up, the toolkit's kernels

from absl import app, flags  # noqa: E402

from experiments.config import ConfigError, auto  # noqa: E402
from experiments.config.cli import bad_input, parse_flags  # noqa: E402
from experiments.config.run_config import AUTO  # noqa: E402

from experiments.cloud.jobspec import (DEFAULT_MACHINE, PLACEHOLDER_IMAGE, TPU_MACHINE, JobSpec,
                                       is_placeholder_image)
from experiments.cloud.tfjob import tfjob, tfjob_yaml  # noqa: E402
from experiments.cloud.vertex_job import build_custom_job, vertex_custom_job  # noqa: E402
from strategies import STRATEGIES, kind  # noqa: E402
from experiments.config import planned_run  # noqa: E402

_STRATEGY = flags.DEFINE_enum("strategy", "multi_worker_mirrored", [*STRATEGIES, AUTO],
                              "Strategy; auto: the planner's best configuration of "
                              "--plan_profile on --plan_cluster (it sets the counts too); "
                              "without --plan_profile the job (a chief, --num_workers workers, "
                              "--num_ps ps) plans on its own tasks.")
_PLAN_PROFILE = flags.DEFINE_string("plan_profile", "", "--strategy=auto: the workload profile.")
_PLAN_CLUSTER = flags.DEFINE_string("plan_cluster", "", "--strategy=auto: the cluster spec.")
_WORKERS = flags.DEFINE_integer("num_workers", 2, "Workers.", lower_bound=1)
_PS = flags.DEFINE_integer("num_ps", 1, "Parameter servers (parameter_server).", lower_bound=1)
_REPLICAS = flags.DEFINE_integer("num_replicas", 1, "GPUs for mirrored or central_storage.",
                                 lower_bound=1)
_IMAGE = flags.DEFINE_string("image_uri", PLACEHOLDER_IMAGE, "Training image (see Dockerfile; "
                             "GPUs need the image built with --build-arg VARIANT=gpu).")
_MACHINE = flags.DEFINE_string("machine_type", "", f"Vertex machine type (empty: "
                               f"{DEFAULT_MACHINE}; {TPU_MACHINE} for --strategy=tpu).")
_ACCEL = flags.DEFINE_string("accelerator_type", "", "e.g. NVIDIA_TESLA_T4 (empty: CPU); "
                             "--strategy=tpu: TPU_V3 (default) or TPU_V2, 8 cores.")
_ACCEL_N = flags.DEFINE_integer("accelerator_count", 0, "Accelerators per replica.", lower_bound=0)
_OUTPUT = flags.DEFINE_string("base_output_dir", "", "gs:// dir for the job's outputs: records in "
                              "<dir>/model, checkpoints in <dir>/checkpoints, TensorBoard in "
                              "<dir>/logs (Vertex's AIP_* dirs; a TFJob gets them as env).")
_NAME = flags.DEFINE_string("display_name", "tfdist-compare", "Job name.")
_FORMAT = flags.DEFINE_enum("format", "vertex", ["vertex", "tfjob"], "Vertex CustomJob or TFJob.")
_DRY_RUN = flags.DEFINE_bool("dry_run", True, "Print the job instead of submitting it.")
_PROJECT = flags.DEFINE_string("project", "", "GCP project (submission).")
_REGION = flags.DEFINE_string("region", "us-central1", "Vertex region (submission).")
_STAGING = flags.DEFINE_string("staging_bucket", "", "gs:// staging bucket for submission "
                               "(default: --base_output_dir).")
_ALLOW_PLACEHOLDER = flags.DEFINE_bool("allow_placeholder_image", False,
                                       "Print a TFJob or submit a job whose --image_uri is still "
                                       "the placeholder (PROJECT).")


def _submit(job, staging_bucket):
    try:
        from google.cloud import aiplatform  # noqa: F401
    except ImportError:
        bad_input("submitting needs the Vertex SDK: pip install -e '.[vertex]' (or use --dry_run)")
    try:
        custom_job = build_custom_job(job, staging_bucket, project=_PROJECT.value or None,
                                      location=_REGION.value)
        custom_job.submit()
    except Exception as e:  # credentials, quota, project: the SDK's own message says which
        bad_input(f"Vertex submission failed: {str(e).splitlines()[0]}")
    print(f"submitted {custom_job.resource_name}")


def _check_gcs(flag, value):
    if value and not value.startswith("gs://"):
        bad_input(f"--{flag}={value!r} must be a gs:// path (Vertex reads and writes Cloud "
                  f"Storage)")


def _check_image(what):
    if is_placeholder_image(_IMAGE.value) and not _ALLOW_PLACEHOLDER.value:
        bad_input(f"--image_uri={_IMAGE.value} is the placeholder: build and push the image (see "
                  f"Dockerfile) and pass its URI, or --allow_placeholder_image to {what} anyway")


def main(argv):
    run_args = argv[1:]
    bad = [a for a in run_args if a.split("=")[0] in ("--strategy", "--num_workers", "--num_ps",
                                                       "--num_replicas")]
    if bad:
        bad_input(f"{bad[0]} after -- is set by this command's own flag; pass it before --")
    strategy, workers, ps, replicas = _STRATEGY.value, _WORKERS.value, _PS.value, _REPLICAS.value
    said = ""  # what auto chose: said once every check has passed
    if strategy == AUTO:
        chosen_here = [a for a in run_args if a.split("=")[0][2:] in planned_run.TRAINING]
        if chosen_here:
            bad_input(f"{chosen_here[0]} after --: with --strategy=auto the plan chooses it")
    if strategy == AUTO and not _PLAN_PROFILE.value:
        # no profile here: the job's own tasks meet, profile and plan, and train the choice
        # (experiments/adaptive/on_workers.py)
        if _PLAN_CLUSTER.value:
            bad_input(f"--plan_cluster={_PLAN_CLUSTER.value} plans here, with --plan_profile; "
                      f"without one the job plans on its own tasks and measures their links")
        if _ACCEL_N.value > 1:  # the tasks plan one device each (on_workers.cluster_spec)
            bad_input(f"--accelerator_count={_ACCEL_N.value}: a job that plans on its own tasks "
                      f"plans one device per task; give --plan_profile (planned here) for "
                      f"machines of several GPUs")
        said = (f"auto: the job plans on its own tasks (a chief, {workers} worker(s), {ps} ps): "
                f"they meet, the chief profiles and measures the links, and each trains its "
                f"part of the plan's choice or exits")
    elif strategy == AUTO:
        try:
            values, plan = auto.choose(_PLAN_PROFILE.value, _PLAN_CLUSTER.value)
        except ConfigError as e:
            bad_input(e)
        strategy, workers, ps, replicas = (values["strategy"], values["num_workers"],
                                           values["num_ps"], values["num_replicas"])
        run_args = run_args + [f"--{k}={values[k]}" for k in planned_run.TRAINING
                               if values[k] != planned_run.TRAINING[k]]
        if not any(a.startswith(("--batch_size_per_replica=", "--global_batch_size="))
                   for a in run_args):  # the batch the predictions are for
            run_args.append(f"--batch_size_per_replica={plan['profile_batch']}")
        chosen = plan["chosen"]
        devices = chosen["devices_per_task"]
        if devices > 1 and _ACCEL_N.value != devices:
            bad_input(f"--strategy=auto chose {chosen['configuration']}, {devices} devices per "
                      f"task: give --accelerator_type=... --accelerator_count={devices}")
        model = next((a.split("=", 1)[1] for a in run_args if a.startswith("--model=")), "cnn")
        said = (f"auto: {chosen['configuration']} ({chosen['predicted_examples_per_sec']:.0f} "
                f"examples/s predicted for {plan['profile_model']}, best of "
                f"{plan['configurations']})"
                + ("" if model == plan["profile_model"] else
                   f"; this job trains {model}: the predictions are the profile's"))
    on_workers = strategy == AUTO  # still auto: planned on the job's tasks
    on_tpu = not on_workers and kind(strategy).accelerator == "tpu"
    if bool(_ACCEL.value) != bool(_ACCEL_N.value) and not on_tpu:
        bad_input(f"--accelerator_type={_ACCEL.value!r} and --accelerator_count={_ACCEL_N.value} "
                  f"go together: give both or neither")
    tpu_type = _ACCEL.value.startswith("TPU_")
    if on_tpu and _ACCEL.value and not tpu_type:
        bad_input(f"--accelerator_type={_ACCEL.value} is not a TPU; --strategy=tpu takes TPU_V3 "
                  f"or TPU_V2 (or empty: TPU_V3 x 8)")
    if tpu_type and not on_tpu:
        bad_input(f"--accelerator_type={_ACCEL.value} is a TPU: use --strategy=tpu (got "
                  f"--strategy={strategy})")
    if not on_workers and kind(strategy).local_replicas and _ACCEL_N.value and \
            replicas > _ACCEL_N.value:
        bad_input(f"--num_replicas={replicas} exceeds --accelerator_count={_ACCEL_N.value}: "
                  f"{strategy} runs one replica per GPU of its machine")
    _check_gcs("base_output_dir", _OUTPUT.value)
    _check_gcs("staging_bucket", _STAGING.value)
    pss = on_workers or kind(strategy).parameter_servers  # auto's tasks may run PSS
    if pss and not on_workers:
        run_args = [f"--num_ps={ps}"] + run_args  # validated by each task
    spec = JobSpec(strategy=strategy, run_args=run_args, image_uri=_IMAGE.value,
                   num_workers=workers, num_ps=ps if pss else 0, num_replicas=replicas,
                   machine_type=_MACHINE.value,
                   accelerator_type=_ACCEL.value, accelerator_count=_ACCEL_N.value,
                   display_name=_NAME.value, base_output_dir=_OUTPUT.value)
    if _FORMAT.value == "tfjob":
        try:
            manifest = tfjob(spec, name=_NAME.value)
        except ValueError as e:
            bad_input(e)
        _check_image("print it")
        if not _OUTPUT.value and not any(a.split("=")[0] == "--results_dir" for a in run_args):
            bad_input("a TFJob's pods keep no files: give --base_output_dir=gs://... (or "
                      "-- --results_dir=gs://...) so the records outlive them")
        _say(said)
        print(tfjob_yaml(manifest))
        return
    job = vertex_custom_job(spec)
    if _DRY_RUN.value:
        _say(said)
        print(json.dumps(job, indent=2))
        return
    _check_image("submit it")
    staging_bucket = _STAGING.value or _OUTPUT.value
    if not staging_bucket:
        bad_input("submitting needs --staging_bucket=gs://... or --base_output_dir=gs://... "
                  "(the Vertex SDK stages the job there)")
    _say(said)
    _submit(job, staging_bucket)


def _say(line):
    """auto's choice, on stderr, once every check has passed (an error stays one line)."""
    if line:
        sys.stderr.write(line + "\n")


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)
