"""Metadata-only checks of ``scalepca._validation``: random_state forms, sparse input
refused by name (in memory, and dask arrays whose blocks are sparse, seen from
``_meta`` without a compute)."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.sparse

import scalepca
from scalepca._validation import check_matrix, check_random_state_seed

ACCEPTED = (
    "random_state must be None, a non-negative int, a numpy RandomState or Generator"
)


@pytest.mark.parametrize(
    "value",
    [
        None,
        0,
        7,
        2**40,
        np.int64(3),
        np.random.RandomState(0),
        np.random.default_rng(0),
        np.random.SeedSequence(5),
    ],
    ids=[
        "None",
        "0",
        "7",
        "big",
        "np.int64",
        "RandomState",
        "Generator",
        "SeedSequence",
    ],
)
def test_accepted_random_states(value):
    assert isinstance(check_random_state_seed(value), np.random.SeedSequence)


def test_int_seed_is_reproducible():
    a, b = check_random_state_seed(7), check_random_state_seed(7)
    assert a.generate_state(4).tolist() == b.generate_state(4).tolist()


@pytest.mark.parametrize(
    "value, exc, fragment",
    [
        (-1, ValueError, "got the negative int -1"),
        (np.int32(-5), ValueError, "got the negative int -5"),
        (1.5, TypeError, "got 1.5 (float)"),
        ("0", TypeError, "got '0' (str)"),
        (True, TypeError, "got True (bool)"),
    ],
)
def test_refused_random_states_name_the_accepted_forms(value, exc, fragment):
    with pytest.raises(exc) as info:
        check_random_state_seed(value)
    assert ACCEPTED in str(info.value) and fragment in str(info.value)


def test_estimator_random_state_minus_one(rng):
    X = rng.standard_normal((60, 5))
    with pytest.raises(ValueError, match=ACCEPTED):
        scalepca.KernelPCA(2, n_features=20, random_state=-1).fit(X)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_scipy_sparse_refused_by_name(fmt):
    X = scipy.sparse.random(40, 6, density=0.3, format=fmt, random_state=0)
    with pytest.raises(
        TypeError,
        match=rf"X is a scipy.sparse {fmt}_matrix; sparse input is "
        r"not supported yet — densify it with X.toarray\(\)",
    ):
        check_matrix(X)
    # estimators that take sparse input (issue 20) fit it; RobustPCA refuses it by name
    assert scalepca.PCA(2).fit(scipy.sparse.csr_array(X)).components_.shape == (2, 6)
    with pytest.raises(TypeError, match=r"RobustPCA does not take sparse input"):
        scalepca.RobustPCA().fit(scipy.sparse.csr_array(X))


def test_dask_of_sparse_blocks_refused_from_meta(raise_if_dask_computes):
    X = da.from_array(
        scipy.sparse.random(40, 6, density=0.3, format="csr", random_state=0),
        chunks=(10, 6),
    )
    with pytest.raises(
        TypeError,
        match=r"dask array of scipy.sparse csr_matrix blocks; sparse input is not "
        r"supported yet — densify its blocks with X.map_blocks",
    ):
        check_matrix(X)
    with (
        raise_if_dask_computes(0),
        pytest.raises(ValueError, match=r"PPCA\(solver='em'\) needs dense blocks"),
    ):
        scalepca.PPCA(2, solver="em").fit(X)


def test_pydata_sparse_refused_by_name(raise_if_dask_computes):
    import sparse  # pydata sparse: in the test extras

    X = sparse.random((40, 6), density=0.3, random_state=0)
    with pytest.raises(TypeError, match=r"X is a pydata sparse COO; .*X.todense\(\)"):
        check_matrix(X)
    with (
        raise_if_dask_computes(0),
        pytest.raises(
            TypeError, match=r"dask array of pydata sparse COO blocks; .*b.todense\(\)"
        ),
    ):
        check_matrix(da.from_array(X, chunks=(10, 6), asarray=False))
    with (
        raise_if_dask_computes(0),
        pytest.raises(TypeError, match=r"RobustPCA does not take"),
    ):
        scalepca.RobustPCA().fit(da.from_array(X, chunks=(10, 6), asarray=False))


def test_dense_input_still_accepted(rng):
    X = rng.standard_normal((30, 4))
    assert check_matrix(X).shape == (30, 4)
    assert check_matrix(da.from_array(X, chunks=10)).shape == (30, 4)


def test_none_and_random_state_draw_through_scikit_learn():
    """None and a RandomState are read as scikit-learn reads them
    (check_random_state): None is numpy's global RandomState, so np.random.seed makes
    a None fit reproducible; a RandomState instance gives the same draw as before
    (one randint), and advances."""
    from sklearn.utils import check_random_state

    np.random.seed(11)
    a = check_random_state_seed(None).entropy
    np.random.seed(11)
    assert (
        check_random_state_seed(None).entropy
        == a
        == check_random_state(11).randint(2**31)
    )
    rs = np.random.RandomState(5)
    first = check_random_state_seed(rs).entropy
    assert first == np.random.RandomState(5).randint(2**31)
    assert check_random_state_seed(rs).entropy != first
    # ints seed the sequence directly (not numpy's legacy generator): results per seed
    # kept
    assert check_random_state_seed(7).entropy == 7
