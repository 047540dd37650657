"""The sparse gate: sparse input of every accepted kind becomes dask CSR row blocks,
unchanged."""

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

from scalepca._validation import as_csr_blocks, check_matrix, is_sparse

sparse = pytest.importorskip("sparse")


def _dense(arr: da.Array) -> np.ndarray:
    """The blocks of a CSR dask array stacked and densified (small test sizes only)."""
    blocks = [
        arr.blocks[i, j].compute()
        for i in range(arr.numblocks[0])
        for j in range(arr.numblocks[1])
    ]
    assert all(isinstance(b, sp.csr_matrix) for b in blocks)
    return sp.vstack(blocks).toarray() if arr.numblocks[1] == 1 else None


@pytest.fixture
def X():
    return sp.random(500, 40, density=0.1, format="csr", random_state=0)


@pytest.mark.parametrize(
    "form", ["csr", "csc", "coo", "csr_array", "pydata", "dask_pydata", "dask_csr"]
)
def test_every_sparse_kind_becomes_csr_row_blocks(X, form):
    inp = {
        "csr": X,
        "csc": X.tocsc(),
        "coo": X.tocoo(),
        "csr_array": sp.csr_array(X),
        "pydata": sparse.COO.from_scipy_sparse(X),
        "dask_pydata": da.from_array(
            sparse.COO.from_scipy_sparse(X), chunks=(64, 16), asarray=False
        ),
        "dask_csr": da.from_array(X, chunks=(100, 40), asarray=False),
    }[form]
    arr = check_matrix(inp, accept_sparse=True)
    assert is_sparse(arr) and isinstance(arr._meta, sp.csr_matrix)
    assert arr.shape == X.shape and len(arr.chunks[1]) == 1
    np.testing.assert_array_equal(_dense(arr), X.toarray())


def test_in_memory_sparse_is_cut_by_stored_bytes():
    n = 20_000
    X = sp.random(n, 50, density=0.2, format="csr", random_state=1, dtype=np.float64)
    per_row = X.nnz / n * 12 + 8
    assert as_csr_blocks(X).numblocks[0] == 1  # 2.4 MB < SPARSE_BLOCK_BYTES: one block
    arr = as_csr_blocks(X, block_bytes=2**18)
    assert arr.numblocks[0] > 1
    assert max(arr.chunks[0]) * per_row <= 2**18 * 1.01
    np.testing.assert_array_equal(_dense(arr), X.toarray())


def test_integer_counts_are_widened_with_a_warning(X):
    counts = X.copy()
    counts.data = np.ceil(counts.data * 10).astype(np.int32)
    with pytest.warns(UserWarning, match="int32; converting to float64"):
        arr = check_matrix(counts, accept_sparse=True)
    assert arr.dtype == np.float64 and isinstance(
        arr.blocks[0, 0].compute(), sp.csr_matrix
    )


def test_sparse_is_refused_by_name_where_not_accepted(X):
    with pytest.raises(
        TypeError, match="scipy.sparse csr_matrix; sparse input is not supported"
    ):
        check_matrix(X)
    with pytest.raises(TypeError, match="dask array of scipy.sparse csr_matrix blocks"):
        check_matrix(da.from_array(X, chunks=(100, 40), asarray=False))


def test_complex_sparse_is_refused(X):
    with pytest.raises(ValueError, match="Complex data not supported"):
        check_matrix(X.astype(np.complex128), accept_sparse=True)
