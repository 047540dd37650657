"""A matrix made by ``open_matrix`` is known as prepared by what it is, never by its
values.

Dask names an array by a hash of its values and steps, so two unrelated arrays of the
same values share a name. The description of how a matrix was made (weights, dims)
must follow the object ``open_matrix`` returned (and its rows, rechunks, persisted
and pickled copies), not every array that holds the same numbers.
"""

from __future__ import annotations

import pickle

import dask.array as da
import numpy as np
import pytest

import scalepca

from .support.compare import assert_same_components


@pytest.fixture
def data():
    rng = np.random.default_rng(38)
    X = rng.standard_normal((60, 8)) @ rng.standard_normal((8, 8)) + rng.uniform(
        -2, 2, 8
    )
    w = rng.uniform(0.3, 2.0, 8)
    return X, w


def _reference(X, w):
    return scalepca.PCA(3).fit(X * w)


def test_same_values_other_preparation(data):
    """An AnnData fitted earlier does not make a dask array of the same values
    unweighted."""
    import anndata as ad

    X, w = data
    scalepca.PCA(3).fit(ad.AnnData(X))
    scalepca.PCA(3).fit(scalepca.open_matrix(da.from_array(X, chunks=(-1, -1))))
    model = scalepca.PCA(3).fit(
        scalepca.open_matrix(da.from_array(X, chunks=(-1, -1)), weights=w)
    )
    ref = _reference(X, w)
    assert_same_components(
        model.transform(da.from_array(X, chunks=(-1, -1))).compute(),
        ref.transform(X * w),
        rtol=1e-10,
        atol=1e-10,
        mode_axis=1,
    )
    # two matrices of the same values, weighted differently, are two inputs
    m2 = scalepca.PCA(3).fit(
        scalepca.open_matrix(da.from_array(X, chunks=(-1, -1)), weights=2 * w)
    )
    assert_same_components(
        m2.transform(da.from_array(X, chunks=(-1, -1))).compute(),
        scalepca.PCA(3).fit(X * 2 * w).transform(X * 2 * w),
        rtol=1e-10,
        atol=1e-10,
        mode_axis=1,
    )
    with pytest.raises(ValueError, match="weighted by other given weights"):
        model.transform(
            scalepca.open_matrix(da.from_array(X, chunks=(-1, -1)), weights=2 * w)
        )


def test_raw_array_equal_to_a_prepared_one_is_weighted(data):
    """Data in their own units are weighted, even when they equal (name for name) the
    matrix open_matrix made of other data: ``X * w`` written by the user is not
    ``open_matrix``'s."""
    X, w = data
    dX = da.from_array(X, chunks=(20, -1))
    model = scalepca.PCA(3).fit(scalepca.open_matrix(dX, weights=w))
    ref = _reference(X, w)
    assert_same_components(
        model.transform(dX * w).compute(),
        ref.transform(X * w * w),
        rtol=1e-10,
        atol=1e-10,
        mode_axis=1,
    )
    assert_same_components(
        model.transform(dX).compute(),
        ref.transform(X * w),
        rtol=1e-10,
        atol=1e-10,
        mode_axis=1,
    )


def test_computed_from_a_matrix_is_refused(data):
    """An array computed from the matrix (``Y / w``, a reconstruction) may or may not be
    prepared still: refused before any compute, never guessed."""
    X, w = data
    Y = scalepca.open_matrix(da.from_array(X, chunks=(20, -1)), weights=w)
    model = scalepca.PCA(3).fit(Y)
    for derived in (
        Y / w,
        model.inverse_transform(model.transform(Y)),
        Y - Y.mean(axis=0),
    ):
        with pytest.raises(
            ValueError, match="computed from a matrix made by open_matrix"
        ):
            model.transform(derived)


def test_rows_persisted_and_pickled_copies_keep_the_description(data):
    X, w = data
    Y = scalepca.open_matrix(da.from_array(X, chunks=(20, -1)), weights=w)
    model = scalepca.PCA(3).fit(Y)
    Z = _reference(X, w).transform(X * w)
    assert_same_components(
        model.transform(Y.persist()).compute(), Z, rtol=1e-10, atol=1e-10, mode_axis=1
    )
    assert_same_components(
        model.transform(pickle.loads(pickle.dumps(Y))).compute(),
        Z,
        rtol=1e-10,
        atol=1e-10,
        mode_axis=1,
    )
    assert_same_components(
        model.transform(Y.rechunk((7, -1))[5:30]).compute(),
        Z[5:30],
        rtol=1e-10,
        atol=1e-10,
        mode_axis=1,
    )
    np.testing.assert_allclose(
        np.abs(model.transform(Y[5:30].astype(np.float32)).compute()),
        np.abs(Z[5:30]),
        rtol=1e-5,
        atol=1e-5 * np.abs(Z).max(),
    )
    assert_same_components(
        model.transform(Y.blocks[1]).compute(),
        Z[20:40],
        rtol=1e-10,
        atol=1e-10,
        mode_axis=1,
    )


def test_the_record_travels_to_another_process(data, tmp_path):
    """A pickled matrix fitted in a new Python process is weighted as the one that
    opened it: the record goes with the matrix."""
    import subprocess
    import sys

    X, w = data
    Y = scalepca.open_matrix(da.from_array(X, chunks=(20, -1)), weights=w)
    (tmp_path / "Y.pickle").write_bytes(pickle.dumps(Y))
    script = (
        "import pickle, sys, numpy as np, scalepca\n"
        "Y = pickle.loads(open(sys.argv[1] + '/Y.pickle', 'rb').read())\n"
        "m = scalepca.PCA(3).fit(Y[:50])\n"
        "np.save(sys.argv[1] + '/w.npy', m._preprocessing.weights)\n"
        "np.save(sys.argv[1] + '/ev.npy', m.explained_variance_)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True)
    np.testing.assert_array_equal(np.load(tmp_path / "w.npy"), w)
    np.testing.assert_allclose(
        np.load(tmp_path / "ev.npy"),
        scalepca.PCA(3).fit(X[:50] * w).explained_variance_,
        rtol=1e-10,
    )


def test_stacked_field_data_keeps_the_description(data):
    """The dask array of a stacked, weighted field is known as prepared on its own."""
    import xarray as xr

    X, w = data
    field = xr.DataArray(X.reshape(60, 2, 4), dims=("time", "y", "x"), name="v").chunk()
    weights = xr.DataArray(w.reshape(2, 4), dims=("y", "x"))
    M = scalepca.open_matrix(field, sample_dims=("time",), weights=weights)
    model = scalepca.PCA(3).fit(M)
    assert_same_components(
        model.transform(M.data).compute(),
        _reference(X, w).transform(X * w),
        rtol=1e-10,
        atol=1e-10,
        mode_axis=1,
    )


def test_a_field_computed_from_a_matrix_is_refused_as_its_array_is(data):
    """xarray keeps a DataArray's attributes through arithmetic, so ``M / 2`` of a
    stacked, weighted field still holds the record in its attrs: it is refused as the
    bare dask array ``M.data / 2`` is, never taken as prepared; rows and rechunks of
    the field keep it."""
    import xarray as xr

    X, w = data
    field = xr.DataArray(X.reshape(60, 2, 4), dims=("time", "y", "x"), name="v").chunk()
    weights = xr.DataArray(w.reshape(2, 4), dims=("y", "x"))
    M = scalepca.open_matrix(field, sample_dims=("time",), weights=weights)
    model = scalepca.PCA(3).fit(M)
    for derived in (M / 2, M * 1, M - M.mean("time")):
        with pytest.raises(
            ValueError, match="computed from a matrix made by open_matrix"
        ):
            model.transform(derived)
    reference = _reference(X, w).transform(X * w)
    for kept in (M.isel(time=slice(0, 30)), M.chunk({"time": 15})):
        assert_same_components(
            np.asarray(model.transform(kept)),
            reference[: kept.sizes["time"]],
            rtol=1e-10,
            atol=1e-10,
            mode_axis=1,
        )


def test_transforms_do_not_crowd_out_the_matrix(data):
    """Transforms of raw data (weighted inside the model) and other matrices opened
    meanwhile leave a matrix its record: it is held by the matrix, not by a table of
    the newest matrices, however many are opened."""
    import anndata as ad

    X, w = data
    Y = scalepca.open_matrix(da.from_array(X, chunks=(20, -1)), weights=w)
    model = scalepca.PCA(3).fit(Y)
    on_cells = scalepca.PCA(3).fit(ad.AnnData(X))
    for _ in range(3):
        model.transform(da.from_array(X, chunks=(20, -1)))
        on_cells.transform(ad.AnnData(X))
        model.transform(Y)  # used: kept
        scalepca.open_matrix(da.from_array(X, chunks=(20, -1)), weights=2 * w)
    for _ in range(300):
        scalepca.open_matrix(da.from_array(X, chunks=(20, -1)), weights=2 * w)
    assert_same_components(
        model.transform(Y.persist()).compute(),
        _reference(X, w).transform(X * w),
        rtol=1e-10,
        atol=1e-10,
        mode_axis=1,
    )


def test_dask_protocol_copies_hold_the_record(data):
    """dask's own copies of the matrix (``dask.persist``, ``dask.optimize``,
    ``clone``, ``copy.deepcopy``) hold its record; an array computed from it does
    not."""
    import copy

    import dask
    from dask.graph_manipulation import clone

    from scalepca.preprocessing._steps import carried

    X, w = data
    Y = scalepca.open_matrix(da.from_array(X, chunks=(20, -1)), weights=w)
    for kept in (
        dask.persist(Y)[0],
        dask.optimize(Y)[0],
        clone(Y),
        copy.deepcopy(Y),
    ):
        assert carried(kept) is Y.preparation
        np.testing.assert_array_equal(kept.compute(), X * w)
    assert carried(Y * 1.0) is None


def test_numpy_matrix_copies_hold_the_record(data):
    """A NumPy matrix made by open_matrix holds its record as a dask one does: its
    copies (``M.copy()``, ``copy.deepcopy``, a pickle), rows and views are weighted
    once, and fitting one gives the model the record (never weighted twice)."""
    import copy

    X, w = data
    M = scalepca.open_matrix(X, weights=w)
    assert isinstance(M, np.ndarray)
    model = scalepca.PCA(3).fit(M)
    ppca = scalepca.PPCA(3).fit(M)
    np.testing.assert_allclose(ppca.score(M), ppca.score(X), rtol=1e-10)
    ref = _reference(X, w)
    Z = ref.transform(X * w)
    for kept, rows in (
        (M.copy(), slice(None)),
        (copy.copy(M), slice(None)),
        (copy.deepcopy(M), slice(None)),
        (pickle.loads(pickle.dumps(M)), slice(None)),
        (M[5:30], slice(5, 30)),
        (M.astype(np.float32).astype(np.float64), slice(None)),
    ):
        out = model.transform(kept)
        assert type(out) is np.ndarray  # NumPy in, NumPy out
        assert_same_components(out, Z[rows], rtol=1e-6, atol=1e-6, mode_axis=1)
        refit = scalepca.PCA(3).fit(kept)
        np.testing.assert_array_equal(refit.preprocessing_.weights, w)
        np.testing.assert_allclose(
            ppca.score(kept), ppca.score(M[rows]), rtol=1e-5, atol=0
        )
        assert_same_components(
            refit.transform(X[rows]),
            scalepca.PCA(3).fit(X[rows] * w).transform(X[rows] * w),
            rtol=1e-6,
            atol=1e-6,
            mode_axis=1,
        )


def test_numpy_computed_from_a_matrix_is_refused(data):
    """An array computed from a NumPy matrix of open_matrix is refused as a dask
    one's is; a plain NumPy array (``np.array(M)``, ``np.asarray(M)``, as
    ``Y.compute()`` of a dask matrix) is data in their own units, weighted by the
    model."""
    X, w = data
    M = scalepca.open_matrix(X, weights=w)
    model = scalepca.PCA(3).fit(M)
    for derived in (M / w, M - M.mean(axis=0), M * 1.0):
        with pytest.raises(
            ValueError, match="computed from a matrix made by open_matrix"
        ):
            model.transform(derived)
    for plain in (np.array(M), np.asarray(M)):
        assert type(plain) is np.ndarray
        assert_same_components(
            model.transform(plain),
            _reference(X, w).transform(X * w * w),
            rtol=1e-10,
            atol=1e-10,
            mode_axis=1,
        )


def test_prepared_counts_in_memory_hold_their_record():
    """Counts in memory prepared by single-cell steps are a CSR matrix holding their
    record: a copy, rows or a pickle of it are not prepared twice, and a matrix
    computed from it is refused."""
    import copy

    import scipy.sparse as sp

    from scalepca.analysis.singlecell import prepared_matrix

    rng = np.random.default_rng(5)
    X = sp.random(
        300,
        40,
        density=0.3,
        random_state=5,
        format="csr",
        data_rvs=lambda k: rng.integers(1, 9, k).astype(np.float64),
    )
    M = prepared_matrix(X, {"normalize_total": True, "log1p": True})
    model = scalepca.PCA(3).fit(M)
    Z = model.transform(X)
    assert type(Z) is np.ndarray
    np.testing.assert_allclose(model.transform(M), Z, rtol=1e-10, atol=1e-10)
    for kept, rows in (
        (M.copy(), slice(None)),
        (copy.deepcopy(M), slice(None)),
        (pickle.loads(pickle.dumps(M)), slice(None)),
        (M[10:50], slice(10, 50)),
    ):
        np.testing.assert_allclose(model.transform(kept), Z[rows], atol=1e-10)
    with pytest.raises(ValueError, match="computed from a matrix made by open_matrix"):
        model.transform(M * 2.0)
