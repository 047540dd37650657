"""The one cluster-memory probe the estimators share (``models._resources``)."""

from __future__ import annotations

import psutil
import pytest

from scalepca.models import _resources
from scalepca.models import kernel_pca as kpca_mod
from scalepca.models import robust_pca as rpca_mod


def test_both_estimators_use_the_one_probe():
    assert (
        kpca_mod.available_memory
        is rpca_mod.available_memory
        is _resources.available_memory
    )


def test_without_a_client_this_machine():
    from distributed import default_client

    with pytest.raises(ValueError):
        default_client()  # no client in this test
    total, where = _resources.available_memory()
    assert where == "this machine's available memory"
    assert 0 < total <= psutil.virtual_memory().total


@pytest.mark.distributed
def test_with_a_client_the_workers_limits():
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=False,
            memory_limit="3GiB",
            dashboard_address=":0",
        ) as cluster,
        Client(cluster),
    ):
        assert _resources.available_memory() == (
            2 * 3 * 2**30,
            "the cluster's 2 worker(s)",
        )


@pytest.mark.distributed
def test_one_client_lookup_also_under_progress_bars():
    """linalg (RobustPCA's persisted factor pieces), the minibatch read-ahead and the
    memory probe ask one function for the client; under the CLI's progress scheduler
    it is that scheduler's client (a lookup of the scheduler's ``__self__`` alone
    found none)."""
    import dask
    from distributed import Client, LocalCluster

    from scalepca import _client
    from scalepca.app.cluster import progress
    from scalepca.linalg import svt
    from scalepca.models import _sparse_dictionary

    assert (
        svt.current_client
        is _sparse_dictionary.current_client
        is _client.current_client
    )
    assert _resources.current_client is _client.current_client
    with dask.config.set(scheduler="threads"):
        assert _client.current_client() is None
    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=False,
            memory_limit="1GiB",
            dashboard_address=":0",
        ) as cluster,
        Client(cluster) as client,
    ):
        assert _client.current_client() is client
        with progress(client=client, stream=open("/dev/null", "w")):  # noqa: SIM115
            assert _client.current_client() is client
            assert _resources.available_memory() == (2**30, "the cluster's 1 worker(s)")
