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
pass (:func:`scalepca.app.progress.stage`). A computation outside the fit that reads the
whole data (the scores written) is counted too, under its stage::

    with timings.stage("writing outputs"), timings.data_pass("writing scores.zarr"):
        ...
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

from ._bars import stage as _progress_stage
from ._passlog import listen_passes

__all__ = ["RunTimings", "data_pass"]


@dataclass
class RunTimings:
    """Seconds per stage (in order), per pass of the fit
    (``(estimator, pass number, label, seconds)``) and per pass over the data outside
    the fit (``(stage, label, seconds)``)."""

    stages: dict[str, float] = field(default_factory=dict)
    pass_times: list[tuple[str, int, str, float]] = field(default_factory=list)
    data_passes: list[tuple[str, str, float]] = field(default_factory=list)
    t0: float = field(default_factory=time.perf_counter)
    _current: str | None = None

    @contextlib.contextmanager
    def stage(self, name: str):
        """Time the block as stage ``name`` (added to an earlier stage of the same
        name)."""
        t0, outer = time.perf_counter(), self._current
        self._current = name
        try:
            with _progress_stage(name):
                yield
        finally:
            self._current = outer
            self.stages[name] = self.stages.get(name, 0.0) + time.perf_counter() - t0

    @contextlib.contextmanager
    def data_pass(self, label: str):
        """Count the block as one pass over the data outside the fit (the scores
        written), under the current stage; a block that raises is no pass."""
        t0 = time.perf_counter()
        yield
        self.data_passes.append((self._current or "", label, time.perf_counter() - t0))

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


def data_pass(timings: RunTimings | None, label: str, reads: bool = True):
    """``timings.data_pass(label)`` when there are timings and the block ``reads`` the
    data; otherwise a block that counts nothing."""
    if timings is None or not reads:
        return contextlib.nullcontext()
    return timings.data_pass(label)
