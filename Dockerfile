# Training image for Vertex AI custom jobs and Kubeflow TFJobs: the same `experiments.run` entry
# point as a local run. Build and push (experiments.vertex --image_uri=... then names it):
#   docker build -t us-docker.pkg.dev/PROJECT/tfdist/tfdist-compare:cpu .
#   docker build --build-arg VARIANT=gpu -t us-docker.pkg.dev/PROJECT/tfdist/tfdist-compare:gpu .
#   docker push us-docker.pkg.dev/PROJECT/tfdist/tfdist-compare:cpu   (and/or :gpu)
# VARIANT=cpu (default): TensorFlow alone. VARIANT=gpu: '.[gpu]', i.e. tensorflow[and-cuda], which
# brings NVIDIA's CUDA and cuDNN as pip wheels, so the host needs only the NVIDIA driver (Vertex
# GPU machines and GKE GPU nodes provide it). experiments.vertex gives every GPU pool
# --require_gpus=N: a task that sees fewer GPUs (the CPU image on a GPU machine) exits 2 with one
# line instead of training on the CPU.
# No '.[vertex]': the SDK submits jobs from your machine; the training container never calls it.
# .dockerignore keeps .venv, runs/ and .git out of the build context.
FROM python:3.11-slim
ARG VARIANT=cpu
WORKDIR /app
COPY setup.py ./
COPY experiments experiments
COPY models models
COPY strategies strategies
COPY tf_config tf_config
COPY results results
# The example of your own model and data (examples/README.md); copy your own module the same way
# (COPY my_pkg my_pkg): every pool of a job imports it from the working directory, /app.
COPY examples examples
RUN case "$VARIANT" in \
        cpu) target="." ;; \
        gpu) target=".[gpu]" ;; \
        *) echo "VARIANT=$VARIANT: choose cpu or gpu" >&2; exit 2 ;; \
    esac \
    && pip install --no-cache-dir -e "$target"
ENV PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2
# Jobs give the command (experiments.vertex's pools and TFJob containers set it); bare
# `docker run IMAGE` prints experiments.run's flags and exits 0.
ENTRYPOINT []
CMD ["python", "-m", "experiments.run", "--help"]
