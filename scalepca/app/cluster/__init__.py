"""Connect to a Dask cluster (:func:`connect`, :func:`make_cluster`; batch jobs in ``_jobs``)
and show the progress of its work (:func:`progress`, from :mod:`scalepca.app.progress`)."""

from ..progress import progress
from ._connect import connect, make_cluster

__all__ = ["connect", "make_cluster", "progress"]
