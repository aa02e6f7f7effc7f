"""Vertex AI custom job (or Kubeflow TFJob manifest) for an experiments.run command.

    python -m experiments.vertex --strategy=multi_worker_mirrored --num_workers=2 --dry_run
    python -m experiments.vertex --strategy=parameter_server --num_workers=2 --num_ps=1 --dry_run
    python -m experiments.vertex --strategy=mirrored --num_replicas=2 \
        --accelerator_type=NVIDIA_TESLA_T4 --accelerator_count=2 --dry_run
    python -m experiments.vertex --strategy=multi_worker_mirrored --num_workers=2 --format=tfjob
    python -m experiments.vertex ... --nodry_run --project=P --region=us-central1 \
        --staging_bucket=gs://B          # submits (needs pip install -e '.[vertex]' and credentials)

Flags after `--` go to experiments.run unchanged, e.g. `-- --model=cnn --epochs=5`.
"""
import json

from absl import app, flags

from experiments.cli import bad_input, parse_flags

from experiments.jobspec import JobSpec, tfjob, vertex_custom_job
from strategies import STRATEGIES

_STRATEGY = flags.DEFINE_enum("strategy", "multi_worker_mirrored", list(STRATEGIES), "Strategy.")
_WORKERS = flags.DEFINE_integer("num_workers", 2, "Workers.", lower_bound=1)
_PS = flags.DEFINE_integer("num_ps", 1, "Parameter servers (parameter_server).", lower_bound=1)
_REPLICAS = flags.DEFINE_integer("num_replicas", 1, "GPUs for mirrored.", lower_bound=1)
_IMAGE = flags.DEFINE_string("image_uri", "us-docker.pkg.dev/PROJECT/tfdist/tfdist-compare:latest",
                             "Training image (see Dockerfile).")
_MACHINE = flags.DEFINE_string("machine_type", "n1-standard-8", "Vertex machine type.")
_ACCEL = flags.DEFINE_string("accelerator_type", "", "e.g. NVIDIA_TESLA_T4 (empty: CPU).")
_ACCEL_N = flags.DEFINE_integer("accelerator_count", 0, "Accelerators per replica.", lower_bound=0)
_OUTPUT = flags.DEFINE_string("base_output_dir", "", "gs:// dir; Vertex sets AIP_MODEL_DIR under it.")
_NAME = flags.DEFINE_string("display_name", "tfdist-compare", "Job name.")
_FORMAT = flags.DEFINE_enum("format", "vertex", ["vertex", "tfjob"], "Vertex CustomJob or TFJob.")
_DRY_RUN = flags.DEFINE_bool("dry_run", True, "Print the job instead of submitting it.")
_PROJECT = flags.DEFINE_string("project", "", "GCP project (submission).")
_REGION = flags.DEFINE_string("region", "us-central1", "Vertex region (submission).")
_STAGING = flags.DEFINE_string("staging_bucket", "", "gs:// staging bucket (submission).")


def _submit(job):
    try:
        from google.cloud import aiplatform
    except ImportError:
        bad_input("submitting needs the Vertex SDK: pip install -e '.[vertex]' (or use --dry_run)")
    try:
        aiplatform.init(project=_PROJECT.value or None, location=_REGION.value,
                        staging_bucket=_STAGING.value or None)
        custom_job = aiplatform.CustomJob(**job)
        custom_job.submit()
    except Exception as e:  # credentials, quota, project: the SDK's own message says which
        bad_input(f"Vertex submission failed: {str(e).splitlines()[0]}")
    print(f"submitted {custom_job.resource_name}")


def main(argv):
    run_args = argv[1:]
    bad = [a for a in run_args if a.split("=")[0] in ("--strategy", "--num_workers", "--num_ps",
                                                       "--num_replicas")]
    if bad:
        bad_input(f"{bad[0]} after -- is set by this command's own flag; pass it before --")
    strategy = _STRATEGY.value
    if strategy == "parameter_server":
        run_args = [f"--num_ps={_PS.value}"] + run_args  # validated by each task
    spec = JobSpec(strategy=strategy, run_args=run_args, image_uri=_IMAGE.value,
                   num_workers=_WORKERS.value, num_ps=_PS.value if strategy == "parameter_server"
                   else 0, num_replicas=_REPLICAS.value, machine_type=_MACHINE.value,
                   accelerator_type=_ACCEL.value, accelerator_count=_ACCEL_N.value,
                   display_name=_NAME.value, base_output_dir=_OUTPUT.value)
    if _FORMAT.value == "tfjob":
        import yaml

        try:
            print(yaml.safe_dump(tfjob(spec, name=_NAME.value), sort_keys=False))
        except ValueError as e:
            bad_input(e)
        return
    job = vertex_custom_job(spec)
    if _DRY_RUN.value:
        print(json.dumps(job, indent=2))
        return
    _submit(job)


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)
