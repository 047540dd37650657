"""Where the time of a ``scalepca run`` went: per stage, and per pass of the fit.

:class:`RunTimings` is filled while the run works and read by the report's timing table::

    timings = RunTimings()
    with timings.passes():                      # every pass the estimator announces
        with timings.stage("data generation"):
            ...
        with timings.stage("fit"):
            est.fit(X)
    timings.total()

Stages also label the progress of the computations run inside them that are not a fit's
pass (:func:`scalepca.app.progress.stage`).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

from ._bars import stage as _progress_stage
from ._passlog import listen_passes

__all__ = ["RunTimings"]


@dataclass
class RunTimings:
    """Seconds per stage (in order) and per pass:
    ``(estimator, pass number, label, seconds)``."""

    stages: dict[str, float] = field(default_factory=dict)
    pass_times: list[tuple[str, int, str, float]] = field(default_factory=list)
    t0: float = field(default_factory=time.perf_counter)

    @contextlib.contextmanager
    def stage(self, name: str):
        """Time the block as stage ``name`` (added to an earlier stage of the same
        name)."""
        t0 = time.perf_counter()
        try:
            with _progress_stage(name):
                yield
        finally:
            self.stages[name] = self.stages.get(name, 0.0) + time.perf_counter() - t0

    @contextlib.contextmanager
    def passes(self):
        """Record every pass that ends inside the block."""

        def on_pass(info):
            if info.get("event") == "end":
                self.pass_times.append(
                    (
                        info["estimator"],
                        info["index"],
                        info["label"],
                        float(info["seconds"]),
                    )
                )

        with listen_passes(on_pass):
            yield

    def total(self) -> float:
        """Seconds since the timings were created."""
        return time.perf_counter() - self.t0
