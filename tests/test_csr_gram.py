"""The CSR Gram kernel (``scalepca.linalg._csr_gram``) against dense LAPACK-free
references.

The kernel must give ``xᵀ x`` of any CSR block in float64: exactly for integer
counts, to rounding otherwise; whatever the slab size, the index width, the storage
order of the entries, and for empty rows, empty blocks and rows longer than a slab.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("numba")

from scalepca.linalg import _csr_gram  # noqa: E402
from scalepca.linalg._csr_gram import csr_gram  # noqa: E402
from scalepca.linalg.moments import _gram_sparse, block_moments  # noqa: E402


def _counts(n, d, density, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    x = sp.random(
        n, d, density=density, format="csr", random_state=rng, dtype=np.float64
    )
    x.data = np.floor(rng.exponential(20.0, x.nnz)) + 1.0
    return x.astype(dtype)


def _dense_gram(x):
    a = x.toarray().astype(np.float64)
    return a.T @ a


@pytest.mark.parametrize("density", [0.0, 0.001, 0.02, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("slab_nnz", [1, 7, 1000, _csr_gram.SLAB_NNZ])
def test_counts_exact(density, slab_nnz):
    """Integer counts: every entry of the Gram is an exact integer sum, whatever the
    slabs."""
    x = _counts(300, 40, density, seed=int(density * 1000) + slab_nnz)
    g = csr_gram(x, slab_nnz=slab_nnz)
    ref = x.astype(np.int64).T @ x.astype(np.int64)
    np.testing.assert_array_equal(g, ref.toarray().astype(np.float64))
    assert g.dtype == np.float64 and g.flags.c_contiguous


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_real_values_to_rounding(dtype):
    rng = np.random.default_rng(3)
    x = sp.random(500, 60, density=0.15, format="csr", random_state=rng, dtype=dtype)
    x.data = (rng.standard_normal(x.nnz) * 1e3).astype(dtype)
    g = csr_gram(x, slab_nnz=500)
    ref = _dense_gram(x)
    scale = np.sqrt(np.outer(np.diag(ref), np.diag(ref)))
    assert np.max(np.abs(g - ref) / np.where(scale > 0, scale, 1)) < 1e-14
    np.testing.assert_array_equal(g, g.T)


def test_index_width_and_storage_order_do_not_matter():
    x = _counts(200, 30, 0.2, seed=5, dtype=np.float64)
    ref = _dense_gram(x)
    wide = sp.csr_matrix(
        (x.data, x.indices.astype(np.int64), x.indptr.astype(np.int64)), shape=x.shape
    )
    np.testing.assert_array_equal(csr_gram(wide), ref)
    # unsorted indices and duplicate entries: summed first, as scipy would
    rng = np.random.default_rng(1)
    coo = x.tocoo()
    order = rng.permutation(coo.nnz)
    rows, cols, vals = coo.row[order], coo.col[order], coo.data[order]
    half = vals / 2
    messy = sp.csr_matrix(
        (
            np.concatenate([half, half]),
            (np.concatenate([rows, rows]), np.concatenate([cols, cols])),
        ),
        shape=x.shape,
    )
    messy = sp.csr_matrix((messy.data, messy.indices, messy.indptr), shape=x.shape)
    messy.has_canonical_format = False
    np.testing.assert_allclose(csr_gram(messy), ref, rtol=1e-15, atol=0)


def test_long_rows_and_empty_blocks():
    x = _counts(50, 400, 0.9, seed=2)  # every row longer than the slab below
    np.testing.assert_array_equal(csr_gram(x, slab_nnz=16), _dense_gram(x))
    empty = sp.csr_matrix((0, 7), dtype=np.float32)
    np.testing.assert_array_equal(csr_gram(empty), np.zeros((7, 7)))
    zeros = sp.csr_matrix((10, 7), dtype=np.float32)
    np.testing.assert_array_equal(csr_gram(zeros), np.zeros((7, 7)))


def test_moments_route_equals_library_routes(monkeypatch):
    """``_gram_sparse`` gives the same Gram with the kernel as by scipy's product or the
    densified slabs (the routes without numba)."""
    moments = importlib.import_module(
        "scalepca.linalg.moments"
    )  # the module, not the function

    x = _counts(3000, 120, 0.1, seed=9, dtype=np.float64)
    with_kernel = _gram_sparse(x)
    monkeypatch.setattr(moments, "_csr_gram_kernel", lambda: None)
    without = _gram_sparse(x)
    np.testing.assert_array_equal(with_kernel, without)
    m = block_moments(x)
    dense = block_moments(x.toarray())
    np.testing.assert_allclose(
        m["m2"], dense["m2"], rtol=1e-12, atol=1e-12 * np.abs(dense["m2"]).max()
    )


def test_grouped_blocks_equal_the_blocks_merged_one_by_one():
    """A group of consecutive CSR blocks (one task of the sparse Gram pass) gives the
    moments of the blocks stacked: exact on counts, with non-finite values counted,
    an empty block, and a block too dense for the kernel (then the blocks' own
    moments are merged)."""
    from scalepca.linalg.moments import _merge_list, full_gram, group_moments_sparse

    blocks = [
        _counts(50, 30, rho, seed=i) for i, rho in enumerate([0.05, 0.0, 0.1, 0.02])
    ]
    bad = blocks[2].copy()
    bad.data[:3] = [np.nan, np.inf, np.nan]
    for group in (
        blocks,
        [blocks[0], bad, blocks[3]],
        [blocks[0], _counts(50, 30, 0.9)],
    ):
        packed = group_moments_sparse(group)
        assert "m2" not in packed and packed["m2p"].shape == (30 * 31 // 2,)
        got = full_gram(packed)
        want = _merge_list([block_moments(b) for b in group])
        assert got["n"] == want["n"] and got["bad"] == want["bad"]
        np.testing.assert_allclose(got["mean"], want["mean"], rtol=0, atol=1e-12)
        np.testing.assert_allclose(got["m2"], want["m2"], rtol=1e-12, atol=1e-9)
        np.testing.assert_array_equal(
            got.get("nan_features", 0), want.get("nan_features", 0)
        )
        np.testing.assert_allclose(got["m2"], got["m2"].T, rtol=1e-14, atol=1e-9)


def test_the_sparse_gram_pass_sends_a_partial_per_group_of_blocks():
    """The moments pass of a dask array of CSR blocks reads the blocks in groups
    (fewer d × d partials), and its result does not depend on the grouping or the
    chunking."""
    import dask
    import dask.array as da

    mom_mod = importlib.import_module(
        "scalepca.linalg.moments"
    )  # the package names a function so
    x = _counts(6400, 25, 0.05, seed=3, dtype=np.float64)
    ref = x.toarray()
    ref_m2 = (ref - ref.mean(0)).T @ (ref - ref.mean(0))
    for rows in (100, 400, 6400):
        X = da.from_array(x, chunks=(rows, 25)).map_blocks(sp.csr_matrix)
        graph = mom_mod.moments_graph(X)
        leaves = [
            k for k in dict(graph.__dask_graph__()) if "group_moments_sparse" in str(k)
        ]
        assert len(leaves) == len(mom_mod.block_groups(X.numblocks[0]))
        (got,) = dask.compute(graph)
        np.testing.assert_allclose(got["m2"], ref_m2, rtol=1e-12, atol=1e-8)


def test_packed_gram_partials_equal_the_full_ones():
    """The kernel's packed output, packed centring and packed merges give the d × d
    Gram."""
    from scalepca.linalg._csr_gram import csr_gram_add, packed_size
    from scalepca.linalg.moments import _merge_list, full_gram, packed_gram

    x = _counts(300, 41, 0.2, seed=7)
    g = np.zeros(packed_size(41))
    csr_gram_add(x, g, packed=True)
    dense = x.toarray().astype(np.float64)
    np.testing.assert_array_equal(
        g, (dense.T @ dense)[np.triu_indices(41)]
    )  # counts: exact
    with pytest.raises(ValueError, match="d \\(d \\+ 1\\) / 2"):
        csr_gram_add(x, np.zeros((41, 41)), packed=True)
    parts = [
        block_moments(_counts(60, 41, rho, seed=i))
        for i, rho in enumerate([0.1, 0.3, 0.05])
    ]
    want = _merge_list(parts)
    got = full_gram(_merge_list([packed_gram(p) for p in parts]))
    assert got["m2"].flags.c_contiguous
    np.testing.assert_allclose(got["m2"], want["m2"], rtol=1e-13, atol=1e-10)
    np.testing.assert_allclose(got["mean"], want["mean"], rtol=1e-15)
    for p in parts:  # a merge never writes into a part
        assert "m2" in p and "m2p" not in p


def test_block_groups_cover_every_block_in_order_and_taper():
    from scalepca.linalg.moments import SPARSE_GROUP_BLOCKS, block_groups

    for n in (1, 7, 16, 31, 32, 47, 64, 100, 101, 1000):
        groups = block_groups(n)
        assert [i for g in groups for i in g] == list(range(n))
        sizes = [len(g) for g in groups]
        assert max(sizes) <= SPARSE_GROUP_BLOCKS
        if n >= SPARSE_GROUP_BLOCKS * 16:
            assert sizes[-SPARSE_GROUP_BLOCKS:] == [1] * SPARSE_GROUP_BLOCKS
            assert sizes[0] == SPARSE_GROUP_BLOCKS
