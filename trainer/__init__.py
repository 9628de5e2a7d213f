"""The cassava training job: the only code that goes into the container.

`python -m trainer.task` is the container's entrypoint; notebooks call `trainer.run(config)`
directly. Importing this package does not import TensorFlow, so MultiWorkerMirroredStrategy
can still be created before any other TensorFlow op.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainer.config import TrainConfig, parse_config

if TYPE_CHECKING:  # pragma: no cover
    from trainer.train import RunResult

__all__ = ["TrainConfig", "parse_config", "run", "RunResult"]


def run(config: TrainConfig) -> RunResult:
    """Train, save and report; see `trainer.train.run`."""
    from trainer.train import run as _run

    return _run(config)


def __getattr__(name: str) -> Any:
    if name == "RunResult":
        from trainer.train import RunResult

        return RunResult
    raise AttributeError(name)
