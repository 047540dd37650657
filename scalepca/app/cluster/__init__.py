"""Connect to a Dask cluster (:func:`connect`, :func:`make_cluster`; batch jobs in
``_jobs``) and show the progress of its work (:func:`progress`, from
``scalepca.app.progress``)."""

from ..progress import progress
from ._connect import (
    WorkersLost,
    connect,
    make_cluster,
    reporting_lost_workers,
    starting_line,
)

__all__ = [
    "WorkersLost",
    "connect",
    "make_cluster",
    "progress",
    "reporting_lost_workers",
    "starting_line",
]
