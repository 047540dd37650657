"""Connect to a Dask cluster: embedded LocalCluster by default, or an existing scheduler.

Estimators never create clusters; the user (or the CLI) calls :func:`connect` once.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

__all__ = ["connect"]


def connect(
    config: dict | None = None,
    *,
    address: str | None = None,
    n_workers: int | None = None,
    threads_per_worker: int | None = None,
    memory_limit: str | int | None = "auto",
    dashboard_address: str | None = ":0",
    processes: bool = True,
    quiet: bool = False,
    **kwargs,
):
    """Return a ``distributed.Client``.

    Parameters
    ----------
    config : dict, optional
        A ``cluster`` config section: ``{"kind": "local"|"address", ...}`` with the keyword
        arguments below as keys.
    address : str, optional
        Scheduler address (``tcp://host:8786``) of an existing cluster; if not given an
        embedded ``LocalCluster`` is started.
    n_workers, threads_per_worker, memory_limit, dashboard_address, processes
        ``LocalCluster`` settings.

    The client is a context manager: ``with scalepca.connect() as client: ...`` closes it
    (and the embedded cluster) on exit.
    """
    from distributed import Client, LocalCluster

    if config:
        config = dict(config)
        kind = config.pop("kind", "local")
        if kind == "address":
            address = config.pop("address")
        params = {**config, **kwargs}
        n_workers = params.pop("n_workers", n_workers)
        threads_per_worker = params.pop("threads_per_worker", threads_per_worker)
        memory_limit = params.pop("memory_limit", memory_limit)
        dashboard_address = params.pop("dashboard_address", dashboard_address)
        processes = params.pop("processes", processes)
        kwargs = params
    if address is not None:
        client = Client(address, **kwargs)
    else:
        cluster = LocalCluster(
            n_workers=n_workers,
            threads_per_worker=threads_per_worker,
            memory_limit=memory_limit,
            dashboard_address=dashboard_address,
            processes=processes,
            **kwargs,
        )
        client = Client(cluster)
        # closing the client also closes the embedded cluster
        client._scalepca_owned_cluster = cluster
        _orig_close = client.close

        def close(*a, **k):
            out = _orig_close(*a, **k)
            cluster.close()
            return out

        client.close = close
    if not quiet:
        logger.info("dask dashboard: %s", client.dashboard_link)
    return client
