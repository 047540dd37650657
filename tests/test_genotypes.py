"""PLINK .bed genotypes (issue 33 item 7): the lazy reader,
``PCA(standardize="genotype")`` against the dense NumPy reference, population
structure, missing calls (mean imputation and PPCA's EM), save/load, the
Balding–Nichols generator and bad input."""

from __future__ import annotations

import shutil
import subprocess
import warnings
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest

import scalepca
from scalepca.cli import EXIT_OK, EXIT_USER_ERROR, main
from scalepca.datasets.genotypes import make_genotypes, write_bed

from .support.compare import align_signs, subspace_sine

bed_reader = pytest.importorskip("bed_reader")

N, D, K = 240, 300, 3


def _dense_reference(X: np.ndarray):
    """Standardised genotypes by hand: p over the calls, kept SNPs polymorphic,
    missing 0."""
    calls = (~np.isnan(X)).sum(axis=0)
    p = np.nansum(X, axis=0) / np.maximum(calls, 1) / 2
    keep = (calls > 0) & (p > 0) & (p < 1)
    Z = (X[:, keep] - 2 * p[keep]) / np.sqrt(2 * p[keep] * (1 - p[keep]))
    Z[np.isnan(Z)] = 0.0
    return Z, p, keep


def _pca(Z: np.ndarray, k: int):
    Zc = Z - Z.mean(axis=0)
    _, s, vt = np.linalg.svd(Zc, full_matrices=False)
    return s**2 / (len(Z) - 1), vt[:k], (Zc**2).sum() / (len(Z) - 1)


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    """A Balding–Nichols .bed (K populations, F = 0.1, 2 % missing) plus a
    monomorphic SNP and a SNP without any call; returns (path, dense matrix with NaN,
    population labels)."""
    g = make_genotypes(
        N,
        D,
        n_populations=K,
        fst=0.1,
        missing=0.02,
        seed=3,
        chunk_snps=64,
        dtype="float64",
    )
    X = g.data.compute()
    X[:, 5] = 2.0  # monomorphic
    X[:, 9] = np.nan  # no call
    path = tmp_path_factory.mktemp("bed") / "geno.bed"
    bed_reader.to_bed(path, X, properties={"fid": g.fid()})
    return path, X, g.populations


@pytest.mark.parametrize("solver", ["covariance_eigh", "tsqr"])
@pytest.mark.parametrize("chunks", [None, {0: 37}, 1])
def test_exact_pca_of_standardised_genotypes(bed, solver, chunks):
    path, X, _ = bed
    Z, p, keep = _dense_reference(X)
    ev, V, total = _pca(Z, 5)
    A = scalepca.open_matrix(path, chunks=chunks, dtype="float64")
    m = scalepca.PCA(5, svd_solver=solver, standardize="genotype").fit(A)
    np.testing.assert_allclose(m.explained_variance_, ev[:5], rtol=1e-10)
    np.testing.assert_allclose(m.explained_variance_ratio_, ev[:5] / total, rtol=1e-10)
    C = m.components_[:, keep]
    np.testing.assert_allclose(align_signs(C, V), V, atol=1e-10)
    assert np.isnan(m.components_[:, ~keep]).all()
    np.testing.assert_allclose(m.allele_frequency_[keep], p[keep], rtol=1e-12)
    np.testing.assert_allclose(
        m.scale_[keep], np.sqrt(2 * p[keep] * (1 - p[keep])), rtol=1e-12
    )
    assert m.n_monomorphic_ == 1 and (~keep).sum() == 2
    # tsqr: the allele frequencies, then its pass; covariance_eigh: one pass of allele
    # moments that give the covariance at the frequencies they give
    assert m.n_passes_ == {"covariance_eigh": 1, "tsqr": 2}[solver]
    assert list(m.feature_names_in_[:2]) == ["sid1", "sid2"]
    scores = m.transform(A)
    np.testing.assert_allclose(
        align_signs(scores.values.T, (Z @ V.T).T), (Z @ V.T).T, atol=1e-9
    )
    assert list(scores["sample"].values[:2]) == ["iid1", "iid2"]


def _complete(X: np.ndarray) -> np.ndarray:
    """``X`` without missing calls: each set to 1 (the uncalled SNP becomes all 0)."""
    Y = np.where(np.isnan(X), 1.0, X)
    Y[:, 9] = 0.0
    return Y


def _as_csr(X):
    """Allele counts ``X`` (NaN missing) as dask CSR row blocks of 50."""
    import scipy.sparse

    return da.from_array(X, chunks=(50, -1)).map_blocks(
        scipy.sparse.csr_matrix, dtype=X.dtype, meta=scipy.sparse.csr_matrix((0, 0))
    )


WIDE_EXACT = {  # parameters that make each wide solver exact on 40 SNPs (38 kept)
    "snapshot": dict(svd_solver="snapshot"),
    # blocks of 10: 4 products span all 38 kept SNPs (with missing calls the first pass
    # only starts the basis: 4 products after it)
    "randomized": dict(svd_solver="randomized", n_oversamples=7, n_power_iter=3),
    # 40 probes span them too
    "sketch": dict(svd_solver="sketch", n_oversamples=37),
}


@pytest.mark.parametrize("missing", [True, False], ids=["missing-calls", "complete"])
@pytest.mark.parametrize("layout", ["bed-rows", "bed-2d", "strips", "csr"])
@pytest.mark.parametrize("solver", list(WIDE_EXACT))
def test_wide_solvers_equal_the_dense_reference(bed, solver, layout, missing):
    """Block Krylov, the sketch and the snapshot method run the genotype map inside
    their per-block products (dense row panels, 2-D blocks, column strips, CSR
    blocks) and equal the PCA of the standardised matrix by LAPACK to 1e-10 once
    their basis spans every kept SNP (on strips: the samples' range), in the passes
    they take on that layout. A missing call makes the sketch refuse (see
    :func:`test_sketch_refuses_missing_calls_at_the_first_block_read`)."""
    path, X, _ = bed
    X = (X if missing else _complete(X))[:, :40]
    Z, _, keep = _dense_reference(X)
    ev, V, total = _pca(Z, 5)
    if layout == "csr":
        A = _as_csr(X)
    else:
        A = da.from_array(
            X,
            chunks={"bed-rows": (37, -1), "bed-2d": (60, 16), "strips": (-1, 8)}[
                layout
            ],
        )
    m = scalepca.PCA(5, standardize="genotype", random_state=0, **WIDE_EXACT[solver])
    if solver == "sketch" and missing:
        with pytest.raises(
            ValueError,
            match="'sketch' with standardize='genotype' needs "
            "data without missing calls",
        ):
            m.fit(A)
        return
    m.fit(A)
    np.testing.assert_allclose(m.explained_variance_, ev[:5], rtol=1e-10)
    np.testing.assert_allclose(m.explained_variance_ratio_, ev[:5] / total, rtol=1e-10)
    C = m.components_[:, keep]
    np.testing.assert_allclose(align_signs(C, V), V, atol=1e-10)
    assert np.isnan(m.components_[:, ~keep]).all()
    # on strips (all samples in each block) Krylov runs on the 240 × 240 sample Gram,
    # each strip mapped in its task: exact operator from the first pass, 5 products of
    # 12 columns span its 38-dimensional range, one more pass for the axes
    krylov = 5 + 1 if layout == "strips" else 4 + missing
    assert m.n_passes_ == {"snapshot": 2, "randomized": krylov, "sketch": 1}[solver]
    scores = m.transform(A)
    np.testing.assert_allclose(
        align_signs(np.asarray(scores.compute()).T, (Z @ V.T).T), (Z @ V.T).T, atol=1e-9
    )


def test_sketch_refuses_missing_calls_at_the_first_block_read(bed):
    """The one-pass sketch cannot mean-impute a call before the pass has read the
    mean: its pass stops at the first row block holding a missing call (one block
    read of twelve, on the synchronous scheduler), and the failed fit leaves nothing
    fitted. A SNP without any call is no missing call of a fitted SNP: it is left
    out, as by the other solvers; a SNP missing in every row of one block but called
    elsewhere is found by the pass's count instead."""
    path, X, _ = bed
    reads = []

    def read(block):
        reads.append(block.shape)
        return block

    A = da.from_array(X[:, :40], chunks=(20, -1)).map_blocks(
        read, dtype=X.dtype, meta=np.empty((0, 0))
    )
    m = scalepca.PCA(5, standardize="genotype", svd_solver="sketch", random_state=0)
    with (
        dask.config.set(scheduler="synchronous"),
        pytest.raises(
            ValueError,
            match="'sketch' with standardize='genotype' needs data without missing "
            "calls",
        ),
    ):
        m.fit(A)
    assert len(reads) == 1 < A.numblocks[0]
    assert not hasattr(m, "components_") and not hasattr(m, "scale_")

    Y = _complete(X)[:, :40]
    Y[:, 9] = np.nan  # no call: left out
    Z, _, keep = _dense_reference(Y)
    ev, V, _ = _pca(Z, 5)
    m = scalepca.PCA(5, standardize="genotype", random_state=0, **WIDE_EXACT["sketch"])
    m.fit(da.from_array(Y, chunks=(20, -1)))
    np.testing.assert_allclose(m.explained_variance_, ev[:5], rtol=1e-10)
    assert m.n_passes_ == 1 and not keep[9] and np.isnan(m.components_[:, 9]).all()
    Y[:20, 3] = np.nan  # every row of the first block, called in the others
    with pytest.raises(
        ValueError,
        match="'sketch' with standardize='genotype' needs data without missing calls",
    ):
        m.fit(da.from_array(Y, chunks=(20, -1)))


def test_krylov_on_genotypes_same_passes_and_accuracy_as_standardised_data(bed):
    """The default solver (block Krylov, 6 passes) on allele counts with missing calls
    and
    SNPs left out reaches the accuracy it reaches on the dense standardised matrix itself
    (the structured K − 1 components), in the same passes; ``tol`` stops at the first
    pass that meets it, with the eigenvalues to 1e-10."""
    path, X, _ = bed
    Z, _, keep = _dense_reference(X)
    ev, V, _ = _pca(Z, 3)
    A = scalepca.open_matrix(path, chunks={0: 50}, dtype="float64")

    def sines(m):
        C = (
            m.components_[:, keep]
            if m.components_.shape[1] > keep.sum()
            else m.components_
        )
        return np.sqrt(np.maximum(0.0, 1 - np.sum(C * V[: len(C)], axis=1) ** 2))

    kw = dict(svd_solver="randomized", random_state=0)
    geno = scalepca.PCA(3, standardize="genotype", **kw).fit(A)
    dense = scalepca.PCA(3, **kw).fit(da.from_array(Z, chunks=(50, -1)))
    assert geno.n_passes_ == dense.n_passes_ == 6
    assert sines(geno)[: K - 1].max() < 1e-5 and sines(dense)[: K - 1].max() < 1e-5
    assert sines(geno)[: K - 1].max() < 10 * sines(dense)[: K - 1].max()
    np.testing.assert_allclose(
        geno.explained_variance_[: K - 1], ev[: K - 1], rtol=1e-9
    )
    assert (geno.residual_norms_ > 0).all()
    # tol: stops early, every residual within tol of its eigenvalue
    t = scalepca.PCA(
        K - 1, standardize="genotype", tol=1e-10, n_power_iter=30, **kw
    ).fit(A)
    assert t.n_passes_ < 32
    assert (t.residual_norms_ <= 1e-10 * t.explained_variance_).all()
    np.testing.assert_allclose(t.explained_variance_, ev[: K - 1], rtol=1e-10)
    C = t.components_[:, keep]  # (the sine's floor is √ε ≈ 1.5e-8: compare the vectors)
    np.testing.assert_allclose(align_signs(C, V[: K - 1]), V[: K - 1], atol=1e-9)


def test_populations_recovered_from_the_top_pcs(bed):
    path, _, pops = bed
    A = scalepca.open_matrix(path)  # float32, default chunks
    m = scalepca.PCA(K - 1, standardize="genotype").fit(A)
    T = m.transform(A).values
    labels = np.asarray(A["fid"].values)
    assert (labels == np.array([f"pop{k}" for k in pops])).all()
    # nearest centroid of each population on the top K − 1 PCs
    cent = np.stack([T[labels == f"pop{k}"].mean(axis=0) for k in range(K)])
    pred = np.argmin(((T[:, None, :] - cent[None]) ** 2).sum(axis=2), axis=1)
    assert np.mean(pred == pops) >= 0.99
    from sklearn.cluster import KMeans
    from sklearn.metrics import adjusted_rand_score

    km = KMeans(K, n_init=10, random_state=0).fit_predict(T)
    assert adjusted_rand_score(pops, km) >= 0.97


def test_transform_of_new_samples_after_save_and_load(bed, tmp_path):
    path, X, _ = bed
    A = scalepca.open_matrix(path, dtype="float64")
    fit_rows, new_rows = np.arange(0, N, 2), np.arange(1, N, 2)
    m = scalepca.PCA(4, svd_solver="covariance_eigh", standardize="genotype").fit(
        A.isel(sample=fit_rows)
    )
    m.save(tmp_path / "model.zarr")
    loaded = scalepca.load(tmp_path / "model.zarr")
    assert loaded.standardize == "genotype"
    # by hand, with the fit's allele frequencies: new samples' missing calls at the mean
    Xf = X[fit_rows]
    _, p, keep = _dense_reference(Xf)
    Xn = X[new_rows][:, keep]
    Zn = (np.where(np.isnan(Xn), 2 * p[keep], Xn) - 2 * p[keep]) / np.sqrt(
        2 * p[keep] * (1 - p[keep])
    )
    expected = Zn @ m.components_[:, keep].T
    for model in (m, loaded):
        got = model.transform(A.isel(sample=new_rows)).values
        np.testing.assert_allclose(got, expected, atol=1e-10)
        with pytest.warns(UserWarning, match="valid feature names"):  # as scikit-learn
            got_np = model.transform(X[new_rows])  # a NumPy matrix of the same SNPs
        np.testing.assert_allclose(got_np, expected, atol=1e-10)
    with pytest.raises(ValueError, match="features"):
        loaded.transform(A.isel(sample=new_rows, snp=slice(0, D - 1)))


def test_missing_calls_mean_imputation_and_em(tmp_path):
    """The same genotypes with and without 5 % missing calls: mean imputation (the
    genotype standardisation) and PPCA's EM both stay close to the complete data's
    subspace."""
    g = make_genotypes(
        400, 200, n_populations=3, fst=0.1, missing=0.0, seed=5, dtype="float64"
    )
    full = g.data.compute()
    rng = np.random.default_rng(0)
    X = full.copy()
    X[rng.random(X.shape) < 0.05] = np.nan
    bed_reader.to_bed(tmp_path / "m.bed", X)
    A = scalepca.open_matrix(tmp_path / "m.bed", chunks={0: 64}, dtype="float64")
    assert int(np.isnan(A.data).sum().compute()) == int(np.isnan(X).sum())

    k = 2
    truth = scalepca.PCA(k, svd_solver="covariance_eigh").fit(full).components_
    imputed = scalepca.PCA(k, svd_solver="covariance_eigh", standardize="genotype").fit(
        A
    )
    # the same subspace once unscaled: PCA of mean-imputed counts, by hand
    Xi = np.where(np.isnan(X), np.nanmean(X, axis=0), X)
    by_hand = scalepca.PCA(k, svd_solver="covariance_eigh").fit(Xi).components_
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        em = scalepca.PPCA(k, solver="em", missing="em", max_iter=200, tol=1e-8).fit(A)
    assert subspace_sine(em.components_, truth) < 0.05
    assert subspace_sine(by_hand, truth) < 0.1
    assert (
        subspace_sine(imputed.components_, truth) < 0.2
    )  # scaled by √(2p(1−p)): another metric
    # EM uses the observed entries only: at least as close to the complete data
    assert subspace_sine(em.components_, truth) <= subspace_sine(by_hand, truth) + 1e-3
    assert em.transform(A).shape == (400, k)


def test_ppca_refuses_the_genotype_standardisation(bed):
    A = scalepca.open_matrix(bed[0])
    with pytest.raises(TypeError, match="standardize must be True or False"):
        scalepca.PPCA(2, standardize="genotype").fit(A)


def test_generator_is_chunkwise_and_written_block_by_block(tmp_path):
    a = make_genotypes(
        50, 90, n_populations=2, missing=0.1, seed=1, chunk_snps=20, dtype="int8"
    )
    b = make_genotypes(
        50, 90, n_populations=2, missing=0.1, seed=1, chunk_snps=20, dtype="float32"
    )
    xa, xb = a.data.compute(), b.data.compute()
    assert set(np.unique(xa)) <= {-127, 0, 1, 2}
    np.testing.assert_array_equal(np.where(xa == -127, np.nan, xa), xb)
    assert 0.05 < np.isnan(xb).mean() < 0.15
    path = write_bed(a, tmp_path / "g.bed")
    # each block computed once, written SNP by SNP
    back = scalepca.open_matrix(path).values
    np.testing.assert_array_equal(back, xb)
    with pytest.raises(FileExistsError, match="overwrite"):
        write_bed(a, tmp_path / "g.bed")
    (tmp_path / "x.bed").write_text("not genotypes")
    with pytest.raises(FileExistsError, match="not a PLINK .bed"):
        write_bed(a, tmp_path / "x.bed", overwrite=True)
    (
        tmp_path / "d.bed"
    ).mkdir()  # a folder named .bed: refused by name, not IsADirectoryError
    with pytest.raises(FileExistsError, match="not a PLINK .bed"):
        write_bed(a, tmp_path / "d.bed", overwrite=True)


def test_make_data_cli_writes_a_bed_with_populations(tmp_path, capsys):
    out = tmp_path / "sim.bed"
    rc = main(
        [
            "make-data",
            str(out),
            "--kind",
            "genotypes",
            "--n-samples",
            "90",
            "--n-features",
            "120",
            "--set",
            "n_populations=3",
            "--set",
            "missing=0.05",
            "--no-progress",
        ]
    )
    assert rc == EXIT_OK
    A = scalepca.open_matrix(out)
    assert A.shape == (90, 120)
    assert sorted(set(A["fid"].values)) == ["pop0", "pop1", "pop2"]
    assert np.isnan(A.values).any()
    assert main(["info", str(out)]) == EXIT_OK
    assert "90 samples × 120 SNPs" in capsys.readouterr().out
    assert (
        main(["make-data", str(out), "--kind", "genotypes", "--n-samples", "9"])
        == EXIT_USER_ERROR
    )
    assert "pass --overwrite" in capsys.readouterr().err
    assert (
        main(["make-data", str(tmp_path / "g.zarr"), "--kind", "genotypes"])
        == EXIT_USER_ERROR
    )
    assert "path ending in .bed" in capsys.readouterr().err


def _run_config(path, tmp_path):
    """A genotype PCA config of the .bed at ``path``, outputs under
    ``tmp_path / "out"``, one in-process worker: ``tmp_path / "run.yaml"``."""
    import yaml

    cfg = {
        "data": {"path": str(path)},
        "model": {"method": "pca", "n_components": 2, "standardize": "genotype"},
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        "output": {"store": str(tmp_path / "out")},
        "progress": False,
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    return tmp_path / "run.yaml"


def test_config_run_and_cli_transform(bed, tmp_path, capsys):
    path = bed[0]
    assert main(["run", str(_run_config(path, tmp_path))]) == EXIT_OK
    model = scalepca.load(tmp_path / "out" / "model.zarr")
    assert model.standardize == "genotype"
    assert (
        main(
            [
                "transform",
                str(tmp_path / "out" / "model.zarr"),
                str(path),
                "--out",
                str(tmp_path / "scores.zarr"),
                "--no-processes",
                "--n-workers",
                "1",
                "--no-progress",
            ]
        )
        == EXIT_OK
    )
    import xarray as xr

    got = xr.open_zarr(tmp_path / "scores.zarr")["scores"].values
    np.testing.assert_allclose(
        got, model.transform(scalepca.open_matrix(path)).values, rtol=1e-5, atol=1e-5
    )


def test_bad_input_refused_clearly(bed, tmp_path, capsys):
    path, X, _ = bed
    # a .bed without its .bim
    lonely = tmp_path / "lonely.bed"
    bed_reader.to_bed(lonely, np.ascontiguousarray(X[:, :10]))
    (tmp_path / "lonely.bim").unlink()
    with pytest.raises(FileNotFoundError, match=r"no \.bim file at .*lonely\.bim"):
        scalepca.open_matrix(lonely)
    assert main(["info", str(lonely)]) == EXIT_USER_ERROR
    assert "no .bim file" in capsys.readouterr().err
    # a file named .bed that is not one
    fake = tmp_path / "fake.bed"
    fake.write_bytes(b"hello world")
    with pytest.raises(ValueError, match="not a SNP-major PLINK .bed file"):
        scalepca.open_matrix(fake)
    # a .bed whose .fam does not belong to it
    (tmp_path / "short.bed").write_bytes(path.read_bytes())
    (tmp_path / "short.bim").write_bytes(path.with_suffix(".bim").read_bytes())
    (tmp_path / "short.fam").write_text("a a 0 0 0 -9\n")
    with pytest.raises(ValueError, match="do not belong together"):
        scalepca.open_matrix(tmp_path / "short.bed")
    # options that do not apply
    with pytest.raises(ValueError, match="weights do not apply to a PLINK .bed"):
        scalepca.open_matrix(path, weights="sqrt_coslat")
    with pytest.raises(ValueError, match="variable do"):
        scalepca.open_matrix(path, variable="x")
    with pytest.raises(ValueError, match="dtype=.* applies to PLINK .bed files only"):
        scalepca.open_matrix(np.zeros((3, 3)), dtype="float64")
    with pytest.raises(TypeError, match="or 'genotype', for allele counts"):
        scalepca.PCA(2, standardize="genotypes").fit(scalepca.open_matrix(path))
    # the config's words
    import yaml

    cfg = {
        "data": {"path": str(lonely)},
        "model": {"method": "pca", "n_components": 2},
        "cluster": {"kind": "local", "n_workers": 1},
        "output": {"store": str(tmp_path / "o")},
    }
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["validate", str(tmp_path / "bad.yaml")]) != EXIT_OK
    said = capsys.readouterr()
    assert "no .bim file" in said.out + said.err


def _spied_reads(monkeypatch) -> list:
    """The ``index`` of every ``bed_reader.open_bed.read`` from now on, in order."""
    seen = []
    real = bed_reader.open_bed.read

    def spy(self, index=None, **kw):
        seen.append(index)
        return real(self, index=index, **kw)

    monkeypatch.setattr(bed_reader.open_bed, "read", spy)
    return seen


def test_reader_reads_each_block_by_a_ranged_read(bed, monkeypatch):
    """No task reads more than its block: every read asks bed-reader for one block's
    range."""
    path, X, _ = bed
    seen = _spied_reads(monkeypatch)
    A = scalepca.open_matrix(path, chunks={0: 60}, dtype="float64")
    assert A.chunks == ((60,) * 4, (D,))
    with dask.config.set(scheduler="sync"):
        got = A.values
    np.testing.assert_array_equal(got, X)
    assert sorted((r.start, r.stop) for r, _ in seen) == [
        (i, i + 60) for i in range(0, N, 60)
    ]
    with pytest.raises(ValueError, match="features, which always end in one chunk"):
        scalepca.open_matrix(path, chunks={1: 100})


def test_reading_a_bed_leaves_the_root_logger_as_it_was(bed, monkeypatch):
    """bed-reader logs its .fam/.bim reads by the module-level ``logging.info``, which
    on a root logger without handlers calls ``logging.basicConfig()``: opening a .bed
    gave root a stderr handler, and every INFO record of distributed's loggers was
    printed through it. The root logger keeps its handlers (none, or the user's) and
    its level."""
    import logging

    path, X, _ = bed
    root = logging.getLogger()
    level = root.level
    mine = logging.NullHandler()
    # none, as in a fresh process (pytest gives root its capture handlers); a user's
    for handlers in ([], [mine]):
        monkeypatch.setattr(root, "handlers", list(handlers))
        A = scalepca.open_matrix(path, dtype="float64")
        with dask.config.set(scheduler="threads"):
            got = A.values
        np.testing.assert_array_equal(got, X)
        assert root.handlers == handlers and root.level == level


def test_quiet_run_of_a_bed_prints_no_distributed_log(bed, tmp_path):
    """``scalepca run -q`` of a genotype config in a fresh process: no
    ``INFO:distributed`` lines (the scheduler's start, its address, its plugins, ...
    were printed, 24 lines)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    path = bed[0]
    repo = str(Path(__file__).parents[1])
    argv = [
        sys.executable,
        "-m",
        "scalepca.cli",
        "run",
        "-q",
        str(_run_config(path, tmp_path)),
    ]
    r = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        cwd=repo,
        timeout=300,
        env={**os.environ, "PYTHONPATH": repo},
    )
    assert r.returncode == EXIT_OK, r.stderr
    assert "INFO:" not in r.stderr, r.stderr
    model = scalepca.load(tmp_path / "out" / "model.zarr")
    ref = scalepca.PCA(2, standardize="genotype").fit(scalepca.open_matrix(path))
    np.testing.assert_allclose(
        model.explained_variance_, ref.explained_variance_, rtol=1e-5
    )


# -- PLINK habits (issue 49 item 3) ----------------------------------------------------
PLINK2 = shutil.which("plink2")
needs_plink2 = pytest.mark.skipif(
    PLINK2 is None,
    reason="plink2 is not installed (apt-get install plink2; CI installs it)",
)


def _plink2(*args, cwd):
    done = subprocess.run(
        [PLINK2, *map(str, args)], cwd=cwd, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _read_eigenvec(path):
    lines = Path(path).read_text().splitlines()
    rows = [line.split("\t") for line in lines[1:]]
    return (
        lines[0].split("\t"),
        [r[0] for r in rows],
        [r[1] for r in rows],
        np.array([[float(v) for v in r[2:]] for r in rows]),
    )


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """``make-data --kind genotypes`` (realistic .bim), complete calls: (path, X)."""
    out = tmp_path_factory.mktemp("sim") / "sim.bed"
    assert (
        main(
            [
                "make-data",
                str(out),
                "--kind",
                "genotypes",
                "--n-samples",
                "150",
                "--n-features",
                "400",
                "--set",
                "n_populations=3",
                "--set",
                "seed=4",
                "--no-progress",
            ]
        )
        == EXIT_OK
    )
    X = scalepca.open_matrix(out, dtype="float64").values
    return out, X


def test_make_data_writes_a_realistic_bim_read_back_by_bed_reader(sim):
    """Chromosomes 1–22 in order, in proportion to their GRCh37 lengths, positions
    increasing within each (inside the chromosome), two distinct alleles of ACGT: as
    bed-reader reads the .bim back (it was every SNP on chromosome 0 at position 0)."""
    from scalepca.datasets.genotypes import GRCH37_LENGTHS

    path, _ = sim
    with bed_reader.open_bed(path) as bed:
        chrom = bed.chromosome.astype(int)
        pos, a1, a2 = bed.bp_position, bed.allele_1, bed.allele_2
        assert list(bed.sid[:2]) == ["snp0", "snp1"]
    assert list(np.unique(chrom)) == list(range(1, 23))
    assert (np.diff(chrom) >= 0).all()
    lengths = np.asarray(GRCH37_LENGTHS)
    counts = np.bincount(chrom, minlength=23)[1:]
    assert np.abs(counts - 400 * lengths / lengths.sum()).max() <= 1
    for c in range(1, 23):
        p = pos[chrom == c]
        assert (np.diff(p) > 0).all() and p[0] >= 1 and p[-1] <= lengths[c - 1]
    assert set(a1) | set(a2) <= set("ACGT") and (a1 != a2).all()


@needs_plink2
def test_plink2_reads_the_bim_make_data_writes(sim, tmp_path):
    """plink2 loads the .bed set and writes the same .bim back."""
    path, _ = sim
    _plink2(
        "--bfile",
        path.with_suffix(""),
        "--make-bed",
        "--out",
        tmp_path / "copy",
        cwd=tmp_path,
    )
    mine = [line.split() for line in path.with_suffix(".bim").read_text().splitlines()]
    theirs = [line.split() for line in (tmp_path / "copy.bim").read_text().splitlines()]
    assert [[r[0], r[1], r[3], r[4], r[5]] for r in mine] == [
        [r[0], r[1], r[3], r[4], r[5]] for r in theirs
    ]


def _run_plink(tmp_path, path, **data):
    import yaml

    cfg = {
        "data": {"path": str(path), **data},
        "model": {
            "method": "pca",
            "n_components": 4,
            "standardize": "genotype",
            "svd_solver": "covariance_eigh",
        },
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        "output": {"store": str(tmp_path / "out"), "plink": True, "report": False},
        "progress": False,
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    return main(["run", str(tmp_path / "run.yaml")])


def _plink_reference(X):
    """PLINK's PCA by hand: the unit eigenvectors and the eigenvalues of Z Zᵀ / M."""
    Z, _, keep = _dense_reference(X)
    U, s, _ = np.linalg.svd(Z, full_matrices=False)
    return U, s**2 / keep.sum()


def test_run_writes_eigenvec_and_eigenval_in_plinks_convention(sim, tmp_path):
    """``output.plink: true``: ``pca.eigenvec`` (``#FID IID PC1 …`` tab-separated, the
    .fam's samples) holds the unit-length eigenvectors of the relationship matrix and
    ``pca.eigenval`` its eigenvalues S²/M, against LAPACK's SVD of the standardised
    genotypes."""
    path, X = sim
    assert _run_plink(tmp_path, path) == EXIT_OK
    head, fid, iid, V = _read_eigenvec(tmp_path / "out" / "pca.eigenvec")
    assert head == ["#FID", "IID", "PC1", "PC2", "PC3", "PC4"]
    with bed_reader.open_bed(path) as bed:
        assert fid == list(bed.fid) and iid == list(bed.iid)
    U, ev = _plink_reference(X)
    # run reads a .bed as float32: the fit to float32's rounding
    np.testing.assert_allclose(align_signs(V.T, U[:, :4].T), U[:, :4].T, atol=1e-6)
    val = np.loadtxt(tmp_path / "out" / "pca.eigenval")
    np.testing.assert_allclose(val, ev[:4], rtol=1e-6)
    # the same files of a float64 fit: to 1e-10
    from scalepca.io._bed import plink_pca, write_plink_pca

    A = scalepca.open_matrix(path, dtype="float64")
    m = scalepca.PCA(4, svd_solver="covariance_eigh", standardize="genotype").fit(A)
    files = write_plink_pca(
        str(tmp_path / "f64"),
        A["fid"].values,
        A["sample"].values,
        *plink_pca(m, m.transform(A)),
    )
    assert files == [str(tmp_path / "f64.eigenvec"), str(tmp_path / "f64.eigenval")]
    V = _read_eigenvec(files[0])[3]
    np.testing.assert_allclose(align_signs(V.T, U[:, :4].T), U[:, :4].T, atol=1e-10)
    np.testing.assert_allclose(np.loadtxt(files[1]), ev[:4], rtol=1e-10)


@needs_plink2
def test_plink2_pca_equals_and_reads_scalepcas_eigenvec(sim, tmp_path):
    """``plink2 --pca 4`` on the same .bed: the same header and FID/IID rows, the same
    eigenvectors up to sign and the same eigenvalues (to plink2's six printed digits);
    and plink2 reads scalepca's .eigenvec as covariates (``--covar``), values
    unchanged."""
    path, _ = sim
    assert _run_plink(tmp_path, path) == EXIT_OK
    mine = tmp_path / "out" / "pca.eigenvec"
    _plink2(
        "--bfile",
        path.with_suffix(""),
        "--pca",
        4,
        "--out",
        tmp_path / "ref",
        cwd=tmp_path,
    )
    head, fid, iid, V = _read_eigenvec(mine)
    rhead, rfid, riid, R = _read_eigenvec(tmp_path / "ref.eigenvec")
    assert (head, fid, iid) == (rhead, rfid, riid)
    np.testing.assert_allclose(align_signs(V.T, R.T), R.T, atol=2e-6)
    np.testing.assert_allclose(
        np.loadtxt(tmp_path / "out" / "pca.eigenval"),
        np.loadtxt(tmp_path / "ref.eigenval"),
        rtol=2e-5,
    )
    _plink2(
        "--bfile",
        path.with_suffix(""),
        "--covar",
        mine,
        "--write-covar",
        "--out",
        tmp_path / "back",
        cwd=tmp_path,
    )
    chead, cfid, ciid, C = _read_eigenvec(tmp_path / "back.cov")
    assert chead == head and (cfid, ciid) == (fid, iid)
    np.testing.assert_allclose(C, V, rtol=1e-5)


def _keep_file(tmp_path, rows, iid, fid):
    keep = tmp_path / "keep.txt"
    keep.write_text("#FID\tIID\n" + "".join(f"{fid[r]} {iid[r]}\n" for r in rows[::-1]))
    return keep


MHC = "chr6:28,477,797-33,448,354"


def test_subsets_equal_the_fit_on_the_subsetted_matrix(sim, tmp_path):
    """``keep`` (a keep file) and ``exclude_ranges`` (the MHC and all of chromosome 22)
    read exactly the rows and SNPs they name, and the fit equals the fit on the dense
    matrix subsetted by hand to 1e-12 (each task reads only its samples and SNPs)."""
    path, X = sim
    with bed_reader.open_bed(path) as bed:
        iid, fid = bed.iid, bed.fid
        chrom, pos = bed.chromosome, bed.bp_position
    rows = np.arange(0, 150, 3)
    cols = ~(((chrom == "6") & (pos >= 28477797) & (pos <= 33448354)) | (chrom == "22"))
    assert 0 < (~cols).sum() < 40 and ((chrom == "6") & ~cols).any()
    keep = _keep_file(tmp_path, rows, iid, fid)
    A = scalepca.open_matrix(
        path, dtype="float64", keep=keep, chunks={0: 16}, exclude_ranges=[MHC, "22"]
    )
    assert A.shape == (len(rows), cols.sum()) and A.data.numblocks[0] == 4
    assert list(A["sample"].values) == list(iid[rows])
    np.testing.assert_array_equal(A.values, X[rows][:, cols])
    m = scalepca.PCA(4, svd_solver="covariance_eigh", standardize="genotype").fit(A)
    ref = scalepca.PCA(4, svd_solver="covariance_eigh", standardize="genotype").fit(
        X[rows][:, cols]
    )
    np.testing.assert_allclose(
        m.explained_variance_, ref.explained_variance_, rtol=1e-12
    )
    Z, _, kept = _dense_reference(X[rows][:, cols])  # (a SNP monomorphic in the subset)
    assert (
        np.isnan(m.components_[:, ~kept]).all()
        and np.isnan(ref.components_[:, ~kept]).all()
    )
    np.testing.assert_allclose(
        align_signs(m.components_[:, kept], ref.components_[:, kept]),
        ref.components_[:, kept],
        atol=1e-12,
    )
    ev, _, _ = _pca(Z, 4)
    np.testing.assert_allclose(m.explained_variance_, ev[:4], rtol=1e-10)
    # the config's data.keep / data.exclude_ranges: the same rows and SNPs
    assert (
        _run_plink(tmp_path, path, keep=str(keep), exclude_ranges=[MHC, "22"])
        == EXIT_OK
    )
    model = scalepca.load(tmp_path / "out" / "model.zarr")
    # (run reads a .bed as float32: to float32's rounding)
    np.testing.assert_allclose(
        model.explained_variance_, ref.explained_variance_, rtol=1e-6
    )
    assert list(model.feature_names_in_) == list(A["snp"].values)
    _, _, got_iid, V = _read_eigenvec(tmp_path / "out" / "pca.eigenvec")
    assert got_iid == list(iid[rows])
    U, _ = _plink_reference(X[rows][:, cols])
    np.testing.assert_allclose(align_signs(V.T, U[:, :4].T), U[:, :4].T, atol=1e-6)


def test_transform_plink_and_keep(sim, tmp_path, capsys):
    """``transform --plink`` writes OUT's .eigenvec/.eigenval; a model fitted with
    ``exclude_ranges`` scores the whole .bed by its SNPs' ids; ``--keep`` reads the keep
    file's samples. The fitted samples' projection is their eigenvectors."""
    path, X = sim
    with bed_reader.open_bed(path) as bed:
        iid, fid = bed.iid, bed.fid
    rows = np.arange(1, 150, 2)
    keep = _keep_file(tmp_path, rows, iid, fid)
    assert _run_plink(tmp_path, path, keep=str(keep), exclude_ranges=[MHC]) == EXIT_OK
    _, _, _, fitted = _read_eigenvec(tmp_path / "out" / "pca.eigenvec")
    model = tmp_path / "out" / "model.zarr"
    argv = [
        "transform",
        str(model),
        str(path),
        "--no-processes",
        "--n-workers",
        "1",
        "--no-progress",
        "--plink",
    ]
    assert main(argv + ["--out", str(tmp_path / "all.zarr")]) == EXIT_OK
    assert "all.eigenvec" in capsys.readouterr().out
    _, _, got_iid, V = _read_eigenvec(tmp_path / "all.eigenvec")
    assert got_iid == list(iid)
    # run's scores come from the float32 read, transform's from float64
    np.testing.assert_allclose(V[rows], fitted, atol=1e-6)
    val = np.loadtxt(tmp_path / "all.eigenval")
    np.testing.assert_allclose(
        val, np.loadtxt(tmp_path / "out" / "pca.eigenval"), rtol=1e-12
    )
    assert (
        main(argv + ["--out", str(tmp_path / "kept.zarr"), "--keep", str(keep)])
        == EXIT_OK
    )
    _, _, got_iid, V = _read_eigenvec(tmp_path / "kept.eigenvec")
    assert got_iid == list(iid[rows])
    np.testing.assert_allclose(V, fitted, atol=1e-6)
    # a keep file naming a sample the .fam lacks: refused in the command line's words
    (tmp_path / "bad.txt").write_text("pop0 s0\npop0 nobody\n")
    assert (
        main(
            argv
            + ["--out", str(tmp_path / "bad.zarr"), "--keep", str(tmp_path / "bad.txt")]
        )
        == EXIT_USER_ERROR
    )
    assert "--keep: the keep file" in capsys.readouterr().err
    assert not (tmp_path / "bad.zarr").exists()
    # the files are replaced only with --overwrite
    assert main(argv + ["--out", str(tmp_path / "again.zarr")]) == EXIT_OK
    (tmp_path / "again.zarr").rename(tmp_path / "gone.zarr")
    assert main(argv + ["--out", str(tmp_path / "again.zarr")]) == EXIT_USER_ERROR
    assert "again.eigenvec' exists; set --overwrite" in capsys.readouterr().err


def test_bad_plink_options_refused_before_compute(
    sim, bed, tmp_path, capsys, raise_if_dask_computes
):
    """A keep file naming unknown samples, a range on a chromosome the .bim lacks, a
    malformed range and ``output.plink`` without the genotype standardisation are
    refused by ``validate`` and ``run`` in the config's words, and by ``open_matrix`` in
    Python's, with nothing computed."""
    import yaml

    path, _ = sim
    keep = tmp_path / "keep.txt"
    keep.write_text("pop0 s0\npop1 nobody\npop7 s1\n")
    with raise_if_dask_computes():
        with pytest.raises(
            ValueError,
            match=r"keep: the keep file .*keep\.txt' names 2 "
            r"sample\(s\) the \.fam does not have "
            r"\(pop1 nobody, pop7 s1\)",
        ):
            scalepca.open_matrix(path, keep=keep)
        with pytest.raises(
            ValueError,
            match="exclude_ranges: '23:1-5' names chromosome 23, "
            "which the .bim does not have",
        ):
            scalepca.open_matrix(path, exclude_ranges=["23:1-5"])
        with pytest.raises(ValueError, match="'6:28-' is not a range"):
            scalepca.open_matrix(path, exclude_ranges=["6:28-"])
        with pytest.raises(
            ValueError, match="keep='k.txt' applies to PLINK .bed files only"
        ):
            scalepca.open_matrix(np.zeros((3, 3)), keep="k.txt")

    def said(data=None, model=None, output=None):
        cfg = {
            "data": {"path": str(path), **(data or {})},
            "model": {
                "method": "pca",
                "n_components": 2,
                "standardize": "genotype",
                **(model or {}),
            },
            "cluster": {"kind": "local", "n_workers": 1, "processes": False},
            "output": {"store": str(tmp_path / "o"), **(output or {})},
            "progress": False,
        }
        (tmp_path / "bad.yaml").write_text(yaml.safe_dump(cfg))
        for cmd in ("validate", "run"):
            assert main([cmd, str(tmp_path / "bad.yaml")]) == EXIT_USER_ERROR
            out = capsys.readouterr()
            text = out.out + out.err
        assert not (tmp_path / "o").exists()
        return text

    assert "data.keep: the keep file" in said({"keep": str(keep)})
    assert "data.exclude_ranges: '23:1-5' names chromosome 23" in said(
        {"exclude_ranges": ["23:1-5"]}
    )
    assert (
        "output.plink: PLINK's .eigenvec and .eigenval hold the PCA of genotypes "
        "standardised by allele frequency"
        in said(model={"standardize": False}, output={"plink": True})
    )
    zarr_data = tmp_path / "x.zarr"
    assert (
        main(
            [
                "make-data",
                str(zarr_data),
                "--n-samples",
                "20",
                "--n-features",
                "12",
                "--no-progress",
            ]
        )
        == EXIT_OK
    )
    capsys.readouterr()
    text = said(
        {"path": str(zarr_data), "keep": str(keep)}, model={"standardize": False}
    )
    assert "'data.keep' apply to PLINK .bed data" in text


def test_subset_tasks_read_only_their_samples_and_snps(sim, monkeypatch):
    """With ``keep`` and ``exclude_ranges`` every task asks bed-reader for its own
    samples (a slice where they are contiguous) and the kept SNPs, nothing else."""
    path, X = sim
    with bed_reader.open_bed(path) as bed:
        iid, fid, chrom = bed.iid, bed.fid, bed.chromosome
    seen = _spied_reads(monkeypatch)
    keep = path.parent / "keep_tasks.txt"
    rows = np.r_[0:20, 40:45, 47]
    keep.write_text("".join(f"{fid[r]}\t{iid[r]}\n" for r in rows))
    A = scalepca.open_matrix(
        path, dtype="float64", keep=keep, chunks={0: 20}, exclude_ranges=["2", "chr5"]
    )
    with dask.config.set(scheduler="sync"):
        got = A.values
    cols = np.flatnonzero((chrom != "2") & (chrom != "5"))
    np.testing.assert_array_equal(got, X[rows][:, cols])
    assert len(seen) == 2
    first = [r for r, _ in seen if isinstance(r, slice)]
    other = [list(r) for r, _ in seen if not isinstance(r, slice)]
    assert first == [slice(0, 20)] and other == [[40, 41, 42, 43, 44, 47]]
    for _, c in seen:
        np.testing.assert_array_equal(c, cols)
