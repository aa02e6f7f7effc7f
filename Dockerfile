# Training image for Vertex AI custom jobs and Kubeflow TFJobs: the same `experiments.run` entry
# point as a local run. Build and push (see README, "Beyond one machine"):
#   docker build -t us-docker.pkg.dev/PROJECT/tfdist/tfdist-compare:latest .
#   docker push us-docker.pkg.dev/PROJECT/tfdist/tfdist-compare:latest
# For GPUs build FROM an image with CUDA and install '.[gpu]'.
FROM python:3.11-slim
WORKDIR /app
COPY setup.py README.md ./
COPY experiments experiments
COPY models models
COPY strategies strategies
COPY tf_config tf_config
COPY results results
RUN pip install --no-cache-dir -e '.[vertex]'
ENV PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2
ENTRYPOINT []
CMD ["python", "-m", "experiments.run", "--help"]
