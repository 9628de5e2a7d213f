"""Cloud job tools: what a Vertex AI job is made of, what it costs, and what it leaves behind.

The job-spec core (`specs`: worker pools, machine catalog, validation), prices and cost, the
trainer image's commands, buckets, settings and local paths, set-up checks, the SDK's
`aiplatform.init` for either mode (`vertex`) and cleanup. The same code serves both modes:
in local mode the endpoint and the bucket are the local platform's.

May import: the standard library, `labkit.i18n`, and each other. `labkit.local` only inside
a local-mode code path (cleanup stops the local service; `vertex` starts it), never at import
time, so that `labkit spec validate` and `labkit cost` load nothing of the platform.
"""
