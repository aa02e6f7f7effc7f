"""Job specs that run an `experiments.run` command on a platform that sets TF_CONFIG itself.

What every platform's job shares (JobSpec, the container's command) and the platforms, one file
each: vertex_job.py (Vertex AI CustomJob), tfjob.py (Kubeflow TFJob).

Accelerators: every container of a pool that gets GPUs runs with `--require_gpus=N` (N = GPUs per
replica), so a task that TensorFlow shows fewer GPUs (a CPU-only image, a node without drivers)
stops with exit 2 and one line instead of training on the CPU while the GPUs are paid for.

Your own model or data (--model=MODULE:FUNCTION, --dataset=MODULE:FUNCTION, PATH.keras,
PATH.npz after `--`): every container runs the same command, so the module or file must be in
the image (copied next to the toolkit, or on the image's PYTHONPATH), or the file on gs://.

Outputs: Vertex sets AIP_MODEL_DIR / AIP_CHECKPOINT_DIR / AIP_TENSORBOARD_LOG_DIR under
`base_output_dir`; Kubernetes sets nothing, so a TFJob with `base_output_dir` gets the same three
variables in its containers' env (the same layout), and experiments.run reads them either way.
"""
import dataclasses

from strategies import kind

# experiments.run's --strategy=auto, when every task of the job plans on the job's own workers
# (experiments/adaptive/on_workers.py): pools for a chief, workers and ps, the plan choosing
# which of them train
PLANNED_ON_WORKERS = "auto"

# The image the flags default to: a job with it cannot start (no such registry project).
PLACEHOLDER_PROJECT = "PROJECT"
PLACEHOLDER_IMAGE = f"us-docker.pkg.dev/{PLACEHOLDER_PROJECT}/tfdist/tfdist-compare:latest"
DEFAULT_MACHINE = "n1-standard-8"
TPU_MACHINE = "cloud-tpu"  # Vertex's machine type for TPU v2/v3 ...
TPU_DEFAULT_ACCELERATOR, TPU_CORES = "TPU_V3", 8  # ... with 8 cores of one of these


@dataclasses.dataclass
class JobSpec:
    strategy: str
    run_args: list  # the experiments.run flags, without --strategy/--num_workers/--num_ps
    image_uri: str
    num_workers: int = 1
    num_ps: int = 0
    num_replicas: int = 1
    machine_type: str = ""  # "": DEFAULT_MACHINE, or TPU_MACHINE for strategy "tpu"
    accelerator_type: str = ""  # e.g. NVIDIA_TESLA_T4 or TPU_V3; empty: CPU only (tpu: TPU_V3)
    accelerator_count: int = 0
    display_name: str = "tfdist-compare"
    base_output_dir: str = ""


def is_placeholder_image(image_uri):
    """True for an image URI that still names the placeholder project (nothing can pull it)."""
    return PLACEHOLDER_PROJECT in image_uri.split("/")


def output_dirs(base_output_dir):
    """The AIP_* directories Vertex derives from a job's base output directory."""
    base = base_output_dir.rstrip("/")
    return {"AIP_MODEL_DIR": f"{base}/model", "AIP_CHECKPOINT_DIR": f"{base}/checkpoints",
            "AIP_TENSORBOARD_LOG_DIR": f"{base}/logs"}


def run_command(spec, gpus=0):
    """The container command: the same entry point and flags as a local run. `gpus` > 0: the
    container's machine has that many GPUs, and the run refuses to start without them."""
    args = [f"--strategy={spec.strategy}"]
    if spec.strategy != PLANNED_ON_WORKERS and kind(spec.strategy).local_replicas:
        args.append(f"--num_replicas={spec.num_replicas}")
    if gpus:
        args.append(f"--require_gpus={gpus}")
    return ["python", "-m", "experiments.run"], args + list(spec.run_args)
