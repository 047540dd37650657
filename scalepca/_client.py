"""The distributed client that dask computations run on now, if any.

One lookup for the whole package (linalg and models alike), at the bottom of the
layering: it imports nothing of scalepca.
"""

from __future__ import annotations

import dask

__all__ = ["current_client"]


def current_client():
    """The running distributed ``Client`` that ``dask.compute`` would use now, or None.

    That is the client whose ``get`` is the current scheduler (the default client),
    or the client of a scheduler object that runs graphs on one:
    :func:`scalepca.app.cluster.progress` sets such an object, with a ``client``
    attribute, to draw progress bars. Threaded and synchronous schedulers give None.
    """
    try:
        from distributed import Client
    except ImportError:
        return None
    sched = dask.base.get_scheduler()
    owner = getattr(sched, "__self__", None)
    if owner is None:
        owner = getattr(sched, "client", None)
    return owner if isinstance(owner, Client) and owner.status == "running" else None
