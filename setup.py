"""Install: `pip install -e .[test]` (the Makefile does this inside .venv)."""
from setuptools import find_packages, setup

VERTEX = ["google-cloud-aiplatform==2.7.0"]
# The Kubeflow training SDK: its KubeflowOrgV1TFJob validates the printed TFJob (tests).
TFJOB = ["kubeflow-training==1.9.4"]

setup(
    name="tfdist-compare",
    version="0.1.0",
    description="Compare tf.distribute strategies (one device, Mirrored, MultiWorkerMirrored, "
    "ParameterServer) on the same Keras model: time, throughput, scaling, accuracy.",
    python_requires=">=3.10,<3.13",
    packages=find_packages(include=["strategies*", "models*", "experiments*", "tf_config*",
                                    "results*"]),
    # Versions verified together on this machine (Python 3.11, 2 vCPU, no GPU).
    install_requires=[
        "tensorflow==2.21.0",
        "keras==3.15.1",
        "tensorflow-datasets==4.9.10",
        "matplotlib==3.11.2",
        "absl-py==2.5.1",
        "psutil==7.2.2",
        "pyyaml==6.0.3",
        "tensorboard==2.21.0",
    ],
    extras_require={
        # The Vertex tests build the SDK's own CustomJob (offline) and the TFJob tests load the
        # manifest with the Kubeflow training SDK, so the tests need both.
        # pytest-xdist: `make test` runs two tests at a time (Makefile).
        "test": ["pytest==9.0.3", "pytest-xdist==3.8.0", *VERTEX, *TFJOB],
        # NVIDIA's CUDA/cuDNN wheels for TensorFlow: the GPU image (Dockerfile, VARIANT=gpu).
        "gpu": ["tensorflow[and-cuda]==2.21.0"],
        # Submitting Vertex jobs (experiments.vertex --nodry_run); training images do not need it.
        "vertex": VERTEX,
        # Checking TFJob manifests (experiments.vertex --format=tfjob) with the Kubeflow SDK.
        "tfjob": TFJOB,
        # TensorBoard's Profile tab for --profile_steps traces (pip resolved it against
        # tensorboard 2.21 without changing any pinned package).
        "profile": ["tensorboard-plugin-profile==2.24.2"],
        # Driving headless Chromium (Debian's chromium package) for TensorBoard screenshots:
        # experiments/bench/tensorboard_shot.py.
        "browser": ["playwright==1.63.0"],
    },
)
