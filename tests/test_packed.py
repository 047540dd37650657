"""The packed .bed products (scalepca.linalg.packed): decoding the 2-bit calls straight
into ``Z V``, ``Zᵀ U`` and the Gram operator ``Zᵀ Z V`` equals decoding to float64 then
multiplying, on a .bed with missing calls and a sample count not a multiple of 4, under
several chunkings and sample/SNP subsets; a Krylov fit of a .bed reads its later passes
packed and equals the PCA of the standardised matrix by LAPACK."""

from __future__ import annotations

import numpy as np
import pytest

import scalepca
from scalepca.io._bed import packed_blocks
from scalepca.linalg.krylov import gram_times
from scalepca.linalg.packed import (
    HAVE_KERNEL,
    PackedRows,
    decode,
    packed_gram_times,
    packed_t_times,
    packed_times,
)
from scalepca.linalg.scaling import ColumnScaling

from .support.compare import assert_close

bed_reader = pytest.importorskip("bed_reader")
pytestmark = pytest.mark.skipif(not HAVE_KERNEL, reason="the packed kernels need numba")

N, D = 203, 57  # 203 = 4 · 50 + 3: the last byte of each SNP holds 3 samples


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    """A random .bed: counts 0, 1, 2, 5 % missing calls, one SNP without any call."""
    rng = np.random.default_rng(7)
    p = rng.uniform(0.05, 0.95, D)
    X = rng.binomial(2, p, size=(N, D)).astype(np.float64)
    X[rng.random((N, D)) < 0.05] = np.nan
    X[:, 11] = np.nan
    path = tmp_path_factory.mktemp("packed") / "g.bed"
    bed_reader.to_bed(path, X, properties={"fid": [f"f{i % 3}" for i in range(N)]})
    return path, X


def _scaling(X):
    """Each SNP's centre 2p and scale √(2p(1−p)) over its calls (p = ½ if none)."""
    calls = (~np.isnan(X)).sum(axis=0)
    p = np.where(calls > 0, np.nansum(X, axis=0) / np.maximum(calls, 1) / 2, 0.5)
    return ColumnScaling(2 * p, np.sqrt(2 * p * (1 - p)), fill=True)


def _standardised(X, scaling):
    Z = (X - scaling.centre) / scaling.scale
    Z[np.isnan(Z)] = 0.0
    return Z


@pytest.mark.parametrize("rows", [4, 52, 100, None])
def test_block_products_equal_decode_then_multiply(bed, rows):
    """Per packed block: the counts decode as bed-reader reads them, and ``Z V``,
    ``Zᵀ U`` equal the float64 products of the decoded, standardised block."""
    path, X = bed
    A = scalepca.open_matrix(
        path, chunks=None if rows is None else {0: rows}, dtype="float64"
    )
    blocks, positions = packed_blocks(A.data)
    sc = _scaling(X)
    rng = np.random.default_rng(0)
    V = rng.standard_normal((D, 6))
    start = 0
    for block, at in zip(blocks, positions, strict=True):
        packed = block.compute()
        mine = X[start : start + len(at)]
        np.testing.assert_array_equal(decode(packed, at), mine)
        Z = _standardised(mine, sc)
        assert_close(packed_times(packed, at, sc, V), Z @ V, 1e-12)
        U = rng.standard_normal((len(at), 5))
        assert_close(packed_t_times(packed, at, sc, U), Z.T @ U, 1e-12)
        start += len(at)
    assert start == N


@pytest.mark.parametrize("rows", [4, 36, 88, None])
def test_gram_pass_equals_decode_then_multiply_in_any_chunking(bed, rows):
    """One pass of the Gram operator read packed equals ``Zᵀ Z V`` in float64 to 1e-12,
    and the float blocks' pass with the same column scaling."""
    path, X = bed
    A = scalepca.open_matrix(
        path, chunks=None if rows is None else {0: rows}, dtype="float64"
    )
    P = PackedRows(*packed_blocks(A.data), shape=A.shape)
    sc = _scaling(X)
    V = np.random.default_rng(1).standard_normal((D, 9))
    Z = _standardised(X, sc)
    ref = Z.T @ (Z @ V)
    assert_close(packed_gram_times(P, V, sc, split_every=3), ref, 1e-12)
    assert_close(gram_times(P, V, None, scaling=sc), ref, 1e-12)
    assert_close(gram_times(A.data, V, None, scaling=sc), ref, 1e-10)


def test_subsets_of_samples_and_snps_read_packed(bed, tmp_path):
    """A keep file (samples not contiguous, not starting on a byte) and the SNPs of a
    column mask: the packed blocks hold those samples and SNPs, in the matrix's
    order."""
    path, X = bed
    rows = np.r_[1, 2, 3, 7, 30:61, 90, 150:203]
    keep = tmp_path / "keep.txt"
    keep.write_text("".join(f"f{r % 3} iid{r + 1}\n" for r in rows))
    A = scalepca.open_matrix(path, keep=keep, chunks={0: 24}, dtype="float64")
    np.testing.assert_array_equal(A.values, X[rows])
    columns = np.ones(D, dtype=bool)
    columns[[0, 11, 30, 31, 56]] = False
    P = PackedRows(*packed_blocks(A.data, columns), shape=(len(rows), columns.sum()))
    Xs = X[rows][:, columns]
    sc = _scaling(Xs[:, :])
    V = np.random.default_rng(2).standard_normal((columns.sum(), 4))
    Z = _standardised(Xs, sc)
    assert_close(packed_gram_times(P, V, sc), Z.T @ (Z @ V), 1e-12)


def test_only_a_bed_matrix_as_opened_reads_packed(bed):
    """Another chunking of the .bed's matrix, or an array of the same values, has no
    packed blocks: its products read the float blocks."""
    path, X = bed
    A = scalepca.open_matrix(path, chunks={0: 40})
    assert packed_blocks(A.data) is not None
    assert packed_blocks(A.data.persist()) is not None  # persist keeps the name
    assert packed_blocks(A.data.rechunk({0: 20})) is None
    assert packed_blocks(A.data + 0) is None


def _dense_pca(X, k):
    calls = (~np.isnan(X)).sum(axis=0)
    p = np.nansum(X, axis=0) / np.maximum(calls, 1) / 2
    keep = (calls > 0) & (p > 0) & (p < 1)
    Z = (X[:, keep] - 2 * p[keep]) / np.sqrt(2 * p[keep] * (1 - p[keep]))
    Z[np.isnan(Z)] = 0.0
    Zc = Z - Z.mean(axis=0)
    _, s, vt = np.linalg.svd(Zc, full_matrices=False)
    return s[:k] ** 2 / (len(X) - 1), vt[:k], keep


@pytest.mark.parametrize("rows", [36, None])
def test_krylov_fit_of_a_bed_reads_packed_and_equals_lapack(bed, rows):
    """Block Krylov on a .bed (missing calls, an uncalled SNP): its passes after the
    first read the packed calls, and once the basis spans every kept SNP the fit equals
    the PCA of the standardised matrix by LAPACK to 1e-10, as the same counts read as
    floats do."""
    path, X = bed
    ev, Vt, keep = _dense_pca(X, 4)
    A = scalepca.open_matrix(
        path, chunks=None if rows is None else {0: rows}, dtype="float64"
    )
    assert packed_blocks(A.data) is not None
    kw = dict(svd_solver="randomized", n_oversamples=11, n_power_iter=4, random_state=0)
    m = scalepca.PCA(4, standardize="genotype", **kw).fit(A)
    f = scalepca.PCA(4, standardize="genotype", **kw).fit(A.data.rechunk({0: 50}))
    for fit in (m, f):  # float64 counts: the float blocks are multiplied in float64
        np.testing.assert_allclose(fit.explained_variance_, ev, rtol=1e-10)
        C = fit.components_[:, keep]
        C = C * np.sign(np.sum(C * Vt, axis=1))[:, None]
        np.testing.assert_allclose(C, Vt, atol=1e-10)
    assert m.n_passes_ == f.n_passes_
