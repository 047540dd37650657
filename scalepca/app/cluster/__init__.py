"""Connect to a Dask cluster (:func:`connect`, :func:`make_cluster`; batch jobs in ``_jobs``)
and show progress bars while it works (:func:`progress`)."""

from ._connect import connect, make_cluster
from ._progress import progress

__all__ = ["connect", "make_cluster", "progress"]
