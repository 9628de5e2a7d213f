"""The local platform: what stands in for Google Cloud when the lab runs offline.

The local Vertex AI service that the unchanged SDK drives (`emulator`), its console page
(`console`), the multi-worker cluster runner (`cluster`), the supervisor that runs a group of
replica processes as one unit (`supervisor`), and the environment Vertex gives each replica
(`vertex_env`).

May import: the standard library, `labkit.i18n` and `labkit.cloud` (the job-spec core validates
what the service accepts; paths and settings say where its state lives). Never
`labkit.course`: the platform does not know about notebooks.
"""
