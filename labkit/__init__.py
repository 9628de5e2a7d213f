"""The lab's own tools: settings, sample data, the local cluster, the local Vertex AI
service, job specs, cost, cleanup and plots.

Nothing in here goes into the training container; that is `trainer/`'s job.
"""

KIT_LABEL_KEY = "lab"
KIT_LABEL_VALUE = "cassava"
RUN_LABEL_KEY = "lab-run"
