# The trainer image that every worker pool of the Vertex AI custom job runs.
#
# Base: the official TensorFlow image of the same release as the kit's pins
# (tensorflow==2.21.0 in pyproject.toml), GPU build: it carries CUDA and cuDNN for pools
# with GPUs and runs unchanged on CPU-only machines. tests/test_dockerfile.py fails when
# this tag and the pins disagree.
FROM tensorflow/tensorflow:2.21.0-gpu

# Labels: cleanup finds what the kit made by lab=cassava; the build adds lab-run=<run id>.
ARG LAB_RUN=unknown
LABEL lab="cassava" \
      lab-run="${LAB_RUN}" \
      org.opencontainers.image.title="cassava-mwms-trainer" \
      org.opencontainers.image.description="ResNet50 transfer learning on cassava with MultiWorkerMirroredStrategy"

# TF_USE_LEGACY_KERAS: tf.keras means tf-keras (Keras 2); Keras 3 fails under MWMS here.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TF_USE_LEGACY_KERAS=1

# `python -m trainer.task` finds the package in the working directory.
WORKDIR /app

# What the trainer needs besides the base's TensorFlow: trainer/requirements.txt, the one
# list (tests/test_pins.py keeps pyproject.toml and environment.yml in step with it). Copied
# alone first, so a change to the code alone does not reinstall it. No pip cache in the layer.
COPY trainer/requirements.txt /app/trainer/requirements.txt
RUN python -m pip install --no-cache-dir -r /app/trainer/requirements.txt

# Only the trainer goes into the image; labkit, notebooks and tests stay outside.
COPY trainer /app/trainer

ENTRYPOINT ["python", "-m", "trainer.task"]
