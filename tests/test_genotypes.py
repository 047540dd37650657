"""PLINK .bed genotypes (issue 33 item 7): the lazy reader, ``PCA(standardize="genotype")``
against the dense NumPy reference, population structure, missing calls (mean imputation and
PPCA's EM), save/load, the Balding–Nichols generator and bad input."""

from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np
import pytest

import scalepca
from scalepca.cli import EXIT_OK, EXIT_USER_ERROR, main
from scalepca.datasets.genotypes import make_genotypes, write_bed

bed_reader = pytest.importorskip("bed_reader")

N, D, K = 240, 300, 3


def _dense_reference(X: np.ndarray):
    """Standardised genotypes by hand: p over the calls, kept SNPs polymorphic, missing 0."""
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


def _aligned(A, B):
    """``A`` with each row's sign that of the matching row of ``B``."""
    return A * np.sign(np.sum(A * B, axis=1))[:, None]


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    """A Balding–Nichols .bed (K populations, F = 0.1, 2 % missing) plus a monomorphic SNP and a
    SNP without any call; returns (path, dense matrix with NaN, population labels)."""
    g = make_genotypes(N, D, n_populations=K, fst=0.1, missing=0.02, seed=3, chunk_snps=64,
                       dtype="float64")
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
    np.testing.assert_allclose(_aligned(C, V), V, atol=1e-10)
    assert np.isnan(m.components_[:, ~keep]).all()
    np.testing.assert_allclose(m.allele_frequency_[keep], p[keep], rtol=1e-12)
    np.testing.assert_allclose(m.scale_[keep], np.sqrt(2 * p[keep] * (1 - p[keep])), rtol=1e-12)
    assert m.n_monomorphic_ == 1 and (~keep).sum() == 2
    assert m.n_passes_ == 2  # the moments (allele frequencies), then the solver's pass
    assert list(m.feature_names_in_[:2]) == ["sid1", "sid2"]
    scores = m.transform(A)
    np.testing.assert_allclose(_aligned(scores.values.T, (Z @ V.T).T),
                               (Z @ V.T).T, atol=1e-9)
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
        scipy.sparse.csr_matrix, dtype=X.dtype, meta=scipy.sparse.csr_matrix((0, 0)))


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
    """Block Krylov, the sketch and the snapshot method run the genotype map inside their
    per-block products (dense row panels, 2-D blocks, column strips, CSR blocks) and equal
    the PCA of the standardised matrix by LAPACK to 1e-10 once their basis spans every kept
    SNP (on strips: the samples' range), in the passes they take on that layout. A missing
    call makes the sketch refuse (see
    :func:`test_sketch_refuses_missing_calls_at_the_first_block_read`)."""
    path, X, _ = bed
    X = (X if missing else _complete(X))[:, :40]
    Z, _, keep = _dense_reference(X)
    ev, V, total = _pca(Z, 5)
    if layout == "csr":
        A = _as_csr(X)
    else:
        A = da.from_array(X, chunks={"bed-rows": (37, -1), "bed-2d": (60, 16),
                                     "strips": (-1, 8)}[layout])
    m = scalepca.PCA(5, standardize="genotype", random_state=0, **WIDE_EXACT[solver])
    if solver == "sketch" and missing:
        with pytest.raises(ValueError, match="'sketch' with standardize='genotype' needs "
                                             "data without missing calls"):
            m.fit(A)
        return
    m.fit(A)
    np.testing.assert_allclose(m.explained_variance_, ev[:5], rtol=1e-10)
    np.testing.assert_allclose(m.explained_variance_ratio_, ev[:5] / total, rtol=1e-10)
    C = m.components_[:, keep]
    np.testing.assert_allclose(_aligned(C, V), V, atol=1e-10)
    assert np.isnan(m.components_[:, ~keep]).all()
    # on strips (all samples in each block) Krylov runs on the 240 × 240 sample Gram, each
    # strip mapped in its task: exact operator from the first pass, 5 products of 12 columns
    # span its 38-dimensional range, one more pass for the axes
    krylov = 5 + 1 if layout == "strips" else 4 + missing
    assert m.n_passes_ == {"snapshot": 2, "randomized": krylov, "sketch": 1}[solver]
    scores = m.transform(A)
    np.testing.assert_allclose(_aligned(np.asarray(scores.compute()).T, (Z @ V.T).T),
                               (Z @ V.T).T, atol=1e-9)


def test_sketch_refuses_missing_calls_at_the_first_block_read(bed):
    """The one-pass sketch cannot mean-impute a call before the pass has read the mean: its
    pass stops at the first row block holding a missing call (one block read of twelve, on the
    synchronous scheduler), and the failed fit leaves nothing fitted. A SNP without any call
    is no missing call of a fitted SNP: it is left out, as by the other solvers; a SNP missing
    in every row of one block but called elsewhere is found by the pass's count instead."""
    path, X, _ = bed
    reads = []

    def read(block):
        reads.append(block.shape)
        return block

    A = da.from_array(X[:, :40], chunks=(20, -1)).map_blocks(read, dtype=X.dtype,
                                                             meta=np.empty((0, 0)))
    m = scalepca.PCA(5, standardize="genotype", svd_solver="sketch", random_state=0)
    with dask.config.set(scheduler="synchronous"), pytest.raises(
            ValueError, match="'sketch' with standardize='genotype' needs data without missing "
                              "calls"):
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
    with pytest.raises(ValueError, match="'sketch' with standardize='genotype' needs data "
                                         "without missing calls"):
        m.fit(da.from_array(Y, chunks=(20, -1)))


def test_krylov_on_genotypes_same_passes_and_accuracy_as_standardised_data(bed):
    """The default solver (block Krylov, 6 passes) on allele counts with missing calls and
    SNPs left out reaches the accuracy it reaches on the dense standardised matrix itself
    (the structured K − 1 components), in the same passes; ``tol`` stops at the first pass
    that meets it, with the eigenvalues to 1e-10."""
    path, X, _ = bed
    Z, _, keep = _dense_reference(X)
    ev, V, _ = _pca(Z, 3)
    A = scalepca.open_matrix(path, chunks={0: 50}, dtype="float64")

    def sines(m):
        C = m.components_[:, keep] if m.components_.shape[1] > keep.sum() else m.components_
        return np.sqrt(np.maximum(0.0, 1 - np.sum(C * V[: len(C)], axis=1) ** 2))

    kw = dict(svd_solver="randomized", random_state=0)
    geno = scalepca.PCA(3, standardize="genotype", **kw).fit(A)
    dense = scalepca.PCA(3, **kw).fit(da.from_array(Z, chunks=(50, -1)))
    assert geno.n_passes_ == dense.n_passes_ == 6
    assert sines(geno)[: K - 1].max() < 1e-5 and sines(dense)[: K - 1].max() < 1e-5
    assert sines(geno)[: K - 1].max() < 10 * sines(dense)[: K - 1].max()
    np.testing.assert_allclose(geno.explained_variance_[: K - 1], ev[: K - 1], rtol=1e-9)
    assert (geno.residual_norms_ > 0).all()
    # tol: stops early, every residual within tol of its eigenvalue
    t = scalepca.PCA(K - 1, standardize="genotype", tol=1e-10, n_power_iter=30, **kw).fit(A)
    assert t.n_passes_ < 32
    assert (t.residual_norms_ <= 1e-10 * t.explained_variance_).all()
    np.testing.assert_allclose(t.explained_variance_, ev[: K - 1], rtol=1e-10)
    C = t.components_[:, keep]  # (the sine's floor is √ε ≈ 1.5e-8: compare the vectors)
    np.testing.assert_allclose(_aligned(C, V[: K - 1]), V[: K - 1], atol=1e-9)


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
        A.isel(sample=fit_rows))
    m.save(tmp_path / "model.zarr")
    loaded = scalepca.load(tmp_path / "model.zarr")
    assert loaded.standardize == "genotype"
    # by hand, with the fit's allele frequencies: new samples' missing calls at the mean
    Xf = X[fit_rows]
    _, p, keep = _dense_reference(Xf)
    Xn = X[new_rows][:, keep]
    Zn = (np.where(np.isnan(Xn), 2 * p[keep], Xn) - 2 * p[keep]) / np.sqrt(
        2 * p[keep] * (1 - p[keep]))
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
    """The same genotypes with and without 5 % missing calls: mean imputation (the genotype
    standardisation) and PPCA's EM both stay close to the complete data's subspace."""
    g = make_genotypes(400, 200, n_populations=3, fst=0.1, missing=0.0, seed=5, dtype="float64")
    full = g.data.compute()
    rng = np.random.default_rng(0)
    X = full.copy()
    X[rng.random(X.shape) < 0.05] = np.nan
    bed_reader.to_bed(tmp_path / "m.bed", X)
    A = scalepca.open_matrix(tmp_path / "m.bed", chunks={0: 64}, dtype="float64")
    assert int(np.isnan(A.data).sum().compute()) == int(np.isnan(X).sum())

    def angle(V, W):  # sin of the largest principal angle between row spaces
        qv, qw = np.linalg.qr(V.T)[0], np.linalg.qr(W.T)[0]
        return float(np.sqrt(max(0.0, 1 - np.linalg.svd(qv.T @ qw)[1].min() ** 2)))

    k = 2
    truth = scalepca.PCA(k, svd_solver="covariance_eigh").fit(full).components_
    imputed = scalepca.PCA(k, svd_solver="covariance_eigh", standardize="genotype").fit(A)
    # the same subspace once unscaled: PCA of mean-imputed counts, by hand
    Xi = np.where(np.isnan(X), np.nanmean(X, axis=0), X)
    by_hand = scalepca.PCA(k, svd_solver="covariance_eigh").fit(Xi).components_
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        em = scalepca.PPCA(k, solver="em", missing="em", max_iter=200, tol=1e-8).fit(A)
    assert angle(em.components_, truth) < 0.05
    assert angle(by_hand, truth) < 0.1
    assert angle(imputed.components_, truth) < 0.2  # scaled by √(2p(1−p)): another metric
    # EM uses the observed entries only: at least as close to the complete data
    assert angle(em.components_, truth) <= angle(by_hand, truth) + 1e-3
    assert em.transform(A).shape == (400, k)


def test_ppca_refuses_the_genotype_standardisation(bed):
    A = scalepca.open_matrix(bed[0])
    with pytest.raises(TypeError, match="standardize must be True or False"):
        scalepca.PPCA(2, standardize="genotype").fit(A)


def test_generator_is_chunkwise_and_written_block_by_block(tmp_path):
    a = make_genotypes(50, 90, n_populations=2, missing=0.1, seed=1, chunk_snps=20,
                       dtype="int8")
    b = make_genotypes(50, 90, n_populations=2, missing=0.1, seed=1, chunk_snps=20,
                       dtype="float32")
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
    (tmp_path / "d.bed").mkdir()  # a folder named .bed: refused by name, not IsADirectoryError
    with pytest.raises(FileExistsError, match="not a PLINK .bed"):
        write_bed(a, tmp_path / "d.bed", overwrite=True)


def test_make_data_cli_writes_a_bed_with_populations(tmp_path, capsys):
    out = tmp_path / "sim.bed"
    rc = main(["make-data", str(out), "--kind", "genotypes", "--n-samples", "90",
               "--n-features", "120", "--set", "n_populations=3", "--set", "missing=0.05",
               "--no-progress"])
    assert rc == EXIT_OK
    A = scalepca.open_matrix(out)
    assert A.shape == (90, 120)
    assert sorted(set(A["fid"].values)) == ["pop0", "pop1", "pop2"]
    assert np.isnan(A.values).any()
    assert main(["info", str(out)]) == EXIT_OK
    assert "90 samples × 120 SNPs" in capsys.readouterr().out
    assert main(["make-data", str(out), "--kind", "genotypes", "--n-samples", "9"]) == \
        EXIT_USER_ERROR
    assert "pass --overwrite" in capsys.readouterr().err
    assert main(["make-data", str(tmp_path / "g.zarr"), "--kind", "genotypes"]) == \
        EXIT_USER_ERROR
    assert "path ending in .bed" in capsys.readouterr().err


def _run_config(path, tmp_path):
    """A genotype PCA config of the .bed at ``path``, outputs under
    ``tmp_path / "out"``, one in-process worker: ``tmp_path / "run.yaml"``."""
    import yaml

    cfg = {"data": {"path": str(path)},
           "model": {"method": "pca", "n_components": 2, "standardize": "genotype"},
           "cluster": {"kind": "local", "n_workers": 1, "processes": False},
           "output": {"store": str(tmp_path / "out")}, "progress": False}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    return tmp_path / "run.yaml"


def test_config_run_and_cli_transform(bed, tmp_path, capsys):
    path = bed[0]
    assert main(["run", str(_run_config(path, tmp_path))]) == EXIT_OK
    model = scalepca.load(tmp_path / "out" / "model.zarr")
    assert model.standardize == "genotype"
    assert main(["transform", str(tmp_path / "out" / "model.zarr"), str(path), "--out",
                 str(tmp_path / "scores.zarr"), "--no-processes", "--n-workers", "1",
                 "--no-progress"]) == EXIT_OK
    import xarray as xr

    got = xr.open_zarr(tmp_path / "scores.zarr")["scores"].values
    np.testing.assert_allclose(got, model.transform(scalepca.open_matrix(path)).values,
                               rtol=1e-5, atol=1e-5)


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

    cfg = {"data": {"path": str(lonely)}, "model": {"method": "pca", "n_components": 2},
           "cluster": {"kind": "local", "n_workers": 1}, "output": {"store": str(tmp_path / "o")}}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["validate", str(tmp_path / "bad.yaml")]) != EXIT_OK
    said = capsys.readouterr()
    assert "no .bim file" in said.out + said.err


def test_reader_reads_each_block_by_a_ranged_read(bed, monkeypatch):
    """No task reads more than its block: every read asks bed-reader for one block's range."""
    path, X, _ = bed
    seen = []
    real = bed_reader.open_bed.read

    def spy(self, index=None, **kw):
        seen.append(index)
        return real(self, index=index, **kw)

    monkeypatch.setattr(bed_reader.open_bed, "read", spy)
    A = scalepca.open_matrix(path, chunks={0: 60}, dtype="float64")
    assert A.chunks == ((60,) * 4, (D,))
    with dask.config.set(scheduler="sync"):
        got = A.values
    np.testing.assert_array_equal(got, X)
    assert sorted((r.start, r.stop) for r, _ in seen) == [(i, i + 60) for i in range(0, N, 60)]
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
    argv = [sys.executable, "-m", "scalepca.cli", "run", "-q",
            str(_run_config(path, tmp_path))]
    r = subprocess.run(argv, capture_output=True, text=True, cwd=repo, timeout=300,
                       env={**os.environ, "PYTHONPATH": repo})
    assert r.returncode == EXIT_OK, r.stderr
    assert "INFO:" not in r.stderr, r.stderr
    model = scalepca.load(tmp_path / "out" / "model.zarr")
    ref = scalepca.PCA(2, standardize="genotype").fit(scalepca.open_matrix(path))
    np.testing.assert_allclose(model.explained_variance_, ref.explained_variance_,
                               rtol=1e-5)
