"""The one cluster-memory probe the estimators share (``models._resources``)."""

from __future__ import annotations

import psutil
import pytest

from scalepca.models import _resources
from scalepca.models import kernel_pca as kpca_mod
from scalepca.models import robust_pca as rpca_mod


def test_both_estimators_use_the_one_probe():
    assert kpca_mod.available_memory is rpca_mod.available_memory is _resources.available_memory


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

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, memory_limit="3GiB",
                      dashboard_address=":0") as cluster, Client(cluster):
        assert _resources.available_memory() == (2 * 3 * 2**30, "the cluster's 2 worker(s)")
