"""The lab's own tools, in four subpackages that show the architecture:

- `labkit.cloud`: cloud job tools used in both modes (the job-spec core, cost, images,
  storage, settings, paths, set-up checks, cleanup);
- `labkit.local`: the local platform (the Vertex AI service, its console page, the cluster
  runner, the supervisor, Vertex's replica environment, the SDK's `aiplatform.init`);
- `labkit.course`: what the notebooks call and what runs them;
- `labkit.i18n`: the English and zh-CN editions.

Layering: `i18n` <- `cloud` <- `local` <- `course` (tests/test_layout.py). Here only the
kit's labels, which every layer writes or reads. Nothing in labkit goes into the training
container; that is `trainer/`'s job.
"""

KIT_LABEL_KEY = "lab"
KIT_LABEL_VALUE = "cassava"
RUN_LABEL_KEY = "lab-run"
