"""What the estimators may ask of the machine they run on: the memory available to hold
arrays.

Private to :mod:`scalepca.models`; the one place where an estimator looks at the
cluster.
"""

from __future__ import annotations

from .._client import current_client

__all__ = ["available_memory"]


def available_memory() -> tuple[int, str]:
    """``(bytes, where)``: the summed memory limits of the distributed cluster in use,
    else what this machine has available (``psutil``).

    ``where`` names the source for error messages ("the cluster's 4 worker(s)" or
    "this machine's available memory"). Workers without a memory limit count as 0; a
    cluster where no worker has one falls back to this machine.
    """
    client = current_client()
    try:
        if client is None:
            raise ValueError("no distributed client")
        workers = client.scheduler_info(n_workers=-1)["workers"].values()
        total = sum(int(w.get("memory_limit") or 0) for w in workers)
        if total > 0:
            return total, f"the cluster's {len(workers)} worker(s)"
    except (ImportError, ValueError, TypeError, KeyError):
        pass  # no distributed client (threaded or synchronous scheduler)
    import psutil

    return int(psutil.virtual_memory().available), "this machine's available memory"
