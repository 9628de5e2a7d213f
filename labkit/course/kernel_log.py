"""The notebook kernels' own messages go to the run's log file, not the learner's screen.

A kernel is a process of its own: what it writes to its descriptor 2 outside any cell
(ipykernel's "[IPKernelApp] WARNING | Kernel is running over TCP without encryption ...",
TensorFlow's C++ start-up lines before the kit's settings send them to a file, the local
services a notebook starts, which inherit the descriptor) would land on the terminal of
`python -m labkit lab` between the kit's progress lines. papermill hands ``kernel_manager_class``
to nbclient, and jupyter_client's `_async_launch_kernel` is the documented place to change
how the kernel process is started ("override in a subclass"): this subclass opens the log
file for the kernel's stdout and stderr. Cell outputs travel over the kernel's sockets and
are untouched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager

LOG_FILE = "lab.log"


def logging_kernel_manager(log_path: Path) -> type[AsyncKernelManager]:
    """A kernel manager class whose kernels write their own output to ``log_path`` (appended:
    one file for every notebook of a run, each kernel's lines after the previous one's)."""

    class LoggingKernelManager(AsyncKernelManager):
        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            # the kernel process gets its own descriptor for the file; ours closes at once
            with log_path.open("ab") as log:
                kw["stdout"] = log
                kw["stderr"] = log
                await super()._async_launch_kernel(kernel_cmd, **kw)

    return LoggingKernelManager
