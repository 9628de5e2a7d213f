"""What notebook 04 prints of a local job's logs: the replicas' own lines, not TF's C++ start-up."""

from __future__ import annotations

from labkit.local import vertex

CPP_START_UP = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
    "I0000 00:00:1796395219.232801    3054 cudart_stub.cc:31] Could not find cuda drivers\n"
)


def test_job_logs_leave_out_cpp_start_up_lines_and_say_where_they_are(monkeypatch, capsys):
    class Job:
        resource_name = "projects/p/locations/us-central1/customJobs/7"

    logs = {"chief-0": CPP_START_UP + "[trainer] task=chief:0 replicas=2\n", "worker-0": "ok\n"}
    monkeypatch.setattr(vertex, "job_logs", lambda job, tail=None, **_: logs)
    vertex.print_job_logs(Job())
    out = capsys.readouterr().out
    assert "[trainer] task=chief:0 replicas=2" in out and "ok" in out
    assert "cudart_stub" not in out and "absl::InitializeLog" not in out
    assert "2 TensorFlow start-up log lines left out" in out
    assert "labkit emulator logs projects/p/locations/us-central1/customJobs/7" in out
    assert out.count("left out") == 1  # the worker's section had nothing to leave out
