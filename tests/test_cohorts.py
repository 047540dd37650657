"""Growing genotype cohorts (issue 49 item 4): a list of ``.bed`` files read as one
matrix, ``partial_fit`` with the genotype standardisation equal to the fit on every
sample (1e-12), and ``scalepca run --update`` of a list of ``.bed`` files."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest

import scalepca
from scalepca.cli import EXIT_OK, EXIT_USER_ERROR, main

from .support.compare import assert_same_components

bed_reader = pytest.importorskip("bed_reader")

#: float64: the allele moments are exact integer sums, so the merged moments equal the
#: one-pass ones bitwise; what remains is the rounding of one eigh (λ₁ ≈ 3, gaps ≥ 0.05)
TOL = 1e-12


def _genotypes(seed=0, n=300, d=60, missing=0.05):
    """Allele counts of three populations, ``missing`` calls NaN, SNP 3 monomorphic in
    the first 100 samples only and SNP 7 without any call in them."""
    rng = np.random.default_rng(seed)
    pops = rng.integers(0, 3, n)
    p = np.clip(rng.uniform(0.05, 0.95, d) + rng.normal(0, 0.15, (3, d)), 0.02, 0.98)
    X = rng.binomial(2, p[pops]).astype(np.float64)
    X[rng.random((n, d)) < missing] = np.nan
    X[:100, 3] = 0.0
    X[:100, 7] = np.nan
    return X


def _dense_reference(X: np.ndarray, k: int):
    """The standardised genotypes by hand (LAPACK's SVD): eigenvalues and components."""
    calls = (~np.isnan(X)).sum(axis=0)
    p = np.nansum(X, axis=0) / np.maximum(calls, 1) / 2
    keep = (calls > 0) & (p > 0) & (p < 1)
    Z = (X[:, keep] - 2 * p[keep]) / np.sqrt(2 * p[keep] * (1 - p[keep]))
    Z[np.isnan(Z)] = 0.0
    _, s, vt = np.linalg.svd(Z - Z.mean(axis=0), full_matrices=False)
    comps = np.full((k, X.shape[1]), np.nan)
    comps[:, keep] = vt[:k]
    return s[:k] ** 2 / (len(X) - 1), comps


def _pca(k=4):
    return scalepca.PCA(k, standardize="genotype", svd_solver="covariance_eigh")


def _fit(X, chunks=40):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # SNPs left out of the fit
        return _pca().fit(da.from_array(X, chunks=(chunks, -1)))


def _batches(model, X, cuts, chunks=30):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for a, b in zip(cuts, cuts[1:], strict=False):
            model.partial_fit(da.from_array(X[a:b], chunks=(chunks, -1)))
    return model


# -- partial_fit with standardize="genotype" ---
def test_one_pass_genotype_fit_equals_the_dense_reference():
    X = _genotypes()
    est = _fit(X)
    ev, comps = _dense_reference(X, 4)
    # the allele moments: no pass of its own for the frequencies
    assert est.n_passes_ == 1
    np.testing.assert_allclose(est.explained_variance_, ev, rtol=1e-12)
    assert_same_components(est.components_, comps, atol=1e-10)
    np.testing.assert_array_equal(np.isnan(est.components_[0]), np.isnan(comps[0]))


def test_dosages_are_multiplied_in_float64():
    """Integer counts are multiplied in float32 slices (exact); other values (dosages)
    in float64: both equal the dense reference."""
    X = _genotypes(seed=6, n=5000, d=30)  # more rows than one slice of the products
    X = np.clip(X + np.random.default_rng(0).uniform(-0.3, 0.3, X.shape), 0, 2)
    est = _fit(X, chunks=2500)
    ev, comps = _dense_reference(X, 4)
    np.testing.assert_allclose(est.explained_variance_, ev, rtol=1e-12)
    assert_same_components(est.components_, comps, atol=1e-10)


@pytest.mark.parametrize("cuts", [(0, 100, 300), (0, 100, 170, 171, 300), (0, 37, 300)])
def test_partial_fit_of_batches_equals_the_fit_on_all_samples(cuts):
    """The first batch has a monomorphic SNP and a SNP without any call that the later
    ones make polymorphic: the frequencies, the SNPs kept and the scales are those of
    the merged moments."""
    X = _genotypes()
    full = _fit(X)
    inc = _batches(_pca(), X, cuts)
    assert inc.n_samples_seen_ == full.n_samples_ == len(X)
    np.testing.assert_allclose(
        inc.explained_variance_, full.explained_variance_, rtol=TOL
    )
    for name in ("mean_", "scale_", "allele_frequency_"):
        np.testing.assert_allclose(
            getattr(inc, name), getattr(full, name), rtol=TOL, atol=0, equal_nan=True
        )
    assert_same_components(inc.components_, full.components_, atol=TOL)
    ev, comps = _dense_reference(X, 4)
    np.testing.assert_allclose(inc.explained_variance_, ev, rtol=1e-12)
    assert_same_components(inc.components_, comps, atol=1e-10)


def test_first_batch_alone_leaves_out_the_snps_it_cannot_use():
    X = _genotypes()
    inc = _batches(_pca(), X, (0, 100))
    assert np.isnan(inc.components_[:, [3, 7]]).all()
    inc = _batches(inc, X, (100, 300))
    assert np.isfinite(inc.components_[:, [3, 7]]).all()


def test_update_after_save_and_load(tmp_path):
    X = _genotypes(seed=1)
    inc = _batches(_pca(), X, (0, 150))
    inc.save(tmp_path / "m.zarr")
    back = _batches(scalepca.load(tmp_path / "m.zarr"), X, (150, 300))
    full = _fit(X)
    np.testing.assert_allclose(
        back.explained_variance_, full.explained_variance_, rtol=TOL
    )
    assert_same_components(back.components_, full.components_, atol=TOL)


def test_numpy_batches_with_missing_calls_are_taken():
    X = _genotypes(seed=2)
    full = _fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        inc = _pca().partial_fit(X[:120]).partial_fit(X[120:])
    np.testing.assert_allclose(
        inc.explained_variance_, full.explained_variance_, rtol=TOL
    )


def test_batch_with_an_infinite_value_is_refused_and_the_model_kept():
    X = _genotypes(seed=3)
    inc = _batches(_pca(), X, (0, 200))
    before = inc.explained_variance_.copy()
    bad = X[200:].copy()
    bad[4, 10] = np.inf
    with pytest.raises(ValueError, match="infinite"):
        inc.partial_fit(da.from_array(bad, chunks=(50, -1)))
    np.testing.assert_array_equal(inc.explained_variance_, before)
    assert inc.n_samples_seen_ == 200


# -- a list of .bed files as one matrix ---
def _write(path, X, iids, fid="f", bim=None):
    props = {"fid": [fid] * len(X), "iid": list(iids)}
    if bim is not None:
        props.update(bim)
    bed_reader.to_bed(path, X, properties=props)
    return path


@pytest.fixture
def cohorts(tmp_path):
    """The same SNPs in two .bed files (200 and 100 samples); returns (paths, X)."""
    X = _genotypes(seed=4)
    a = _write(tmp_path / "batch1.bed", X[:200], [f"a{i}" for i in range(200)])
    b = _write(tmp_path / "batch2.bed", X[200:], [f"b{i}" for i in range(100)])
    return [a, b], X


def test_list_of_beds_is_one_matrix(cohorts):
    paths, X = cohorts
    M = scalepca.open_matrix([str(p) for p in paths], dtype="float64")
    assert M.shape == X.shape
    np.testing.assert_array_equal(M.values, X)
    assert list(M["sample"].values[:2]) == ["a0", "a1"]
    assert list(M["sample"].values[-1:]) == ["b99"]
    # each file's blocks are read from that file: its row chunks come first, unchanged
    one = scalepca.open_matrix(paths[0], dtype="float64")
    assert M.data.chunks[0][: len(one.data.chunks[0])] == one.data.chunks[0]


def test_fit_on_a_list_equals_fit_on_the_whole(cohorts):
    paths, X = cohorts
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        got = _pca().fit(scalepca.open_matrix(paths, dtype="float64"))
        inc = _pca().partial_fit(scalepca.open_matrix(paths[0], dtype="float64"))
        inc.partial_fit(scalepca.open_matrix(paths[1], dtype="float64"))
    ref = _fit(X)
    np.testing.assert_allclose(
        got.explained_variance_, ref.explained_variance_, rtol=TOL
    )
    np.testing.assert_allclose(
        inc.explained_variance_, ref.explained_variance_, rtol=TOL
    )
    assert_same_components(inc.components_, ref.components_, atol=TOL)


def test_list_with_other_snps_is_refused_naming_files_and_snp(cohorts, tmp_path):
    paths, X = cohorts
    bim = {"sid": [f"rs{j}" for j in range(X.shape[1])]}
    bim["sid"][17] = "rs_other"
    c = _write(tmp_path / "other.bed", X[:10], [f"c{i}" for i in range(10)], bim=bim)
    first = _write(
        tmp_path / "first.bed",
        X[:10],
        [f"d{i}" for i in range(10)],
        bim={"sid": [f"rs{j}" for j in range(X.shape[1])]},
    )
    with pytest.raises(ValueError) as err:
        scalepca.open_matrix([first, c])
    msg = str(err.value)
    assert "other.bed" in msg and "first.bed" in msg
    assert (
        "SNP 18 rs_other" in msg
        and "rs17" in msg
        and "same SNPs in the same order" in msg
    )
    short = _write(
        tmp_path / "short.bed",
        np.ascontiguousarray(X[:10, :50]),
        [f"e{i}" for i in range(10)],
    )
    with pytest.raises(ValueError, match=r"short.bed.* has 50 SNPs .* 60"):
        scalepca.open_matrix([paths[0], short])


def test_list_with_a_sample_twice_or_another_kind_is_refused(cohorts, tmp_path):
    paths, X = cohorts
    again = _write(tmp_path / "again.bed", X[:5], ["b0", "x1", "x2", "x3", "x4"])
    with pytest.raises(ValueError, match=r"sample f b0 .*batch2.bed.*again.bed"):
        scalepca.open_matrix([paths[1], again])
    with pytest.raises(ValueError, match="PLINK .bed files only.*'x.zarr' is not"):
        scalepca.open_matrix([str(paths[0]), "x.zarr"])


def test_keep_file_across_a_list(cohorts, tmp_path):
    paths, X = cohorts
    keep = tmp_path / "keep.txt"
    keep.write_text("f a3\nf b5\nf a150\n")
    M = scalepca.open_matrix(paths, dtype="float64", keep=keep)
    assert list(M["sample"].values) == ["a3", "a150", "b5"]
    np.testing.assert_array_equal(M.values, X[[3, 150, 205]])


# -- scalepca run --update with a list of .bed files ---
def _config(tmp_path, path, name="run.yaml"):
    import yaml

    cfg = {
        "data": {"path": path},
        "model": {
            "method": "pca",
            "n_components": 3,
            "standardize": "genotype",
            "svd_solver": "covariance_eigh",
        },
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        "output": {"store": str(tmp_path / "out")},
        "progress": False,
    }
    (tmp_path / name).write_text(yaml.safe_dump(cfg))
    return str(tmp_path / name)


def test_run_update_with_a_list_equals_the_full_fit(cohorts, tmp_path, capsys):
    import xarray as xr

    paths, X = cohorts
    paths = [str(p) for p in paths]
    assert main(["run", _config(tmp_path, [paths[0]]), "--quiet"]) == EXIT_OK
    first = scalepca.load(tmp_path / "out" / "model.zarr")
    assert first.n_samples_seen_ == 200
    assert main(["run", _config(tmp_path, paths), "--update", "--quiet"]) == EXIT_OK
    model = scalepca.load(tmp_path / "out" / "model.zarr")
    assert model.n_samples_seen_ == 300
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = scalepca.PCA(3, standardize="genotype", svd_solver="covariance_eigh").fit(
            da.from_array(X, chunks=(64, -1))
        )
    np.testing.assert_allclose(
        model.explained_variance_, ref.explained_variance_, rtol=TOL
    )
    assert_same_components(model.components_, ref.components_, atol=TOL)
    scores = xr.open_zarr(tmp_path / "out" / "scores.zarr")["scores"]
    assert scores.shape == (300, 3)
    assert list(scores["sample"].values[[0, 299]]) == ["a0", "b99"]
    # the new cohort's scores are the updated model's; the old rows keep the first
    # model's
    new = model.transform(scalepca.open_matrix(paths[1], dtype="float64")).values
    np.testing.assert_allclose(scores.values[200:], new, rtol=1e-5, atol=1e-5)


def test_run_with_a_plain_bed_then_update_with_the_list(cohorts, tmp_path):
    paths, X = cohorts
    paths = [str(p) for p in paths]
    assert main(["run", _config(tmp_path, paths[0]), "--quiet"]) == EXIT_OK
    assert main(["run", _config(tmp_path, paths), "--update", "--quiet"]) == EXIT_OK
    assert scalepca.load(tmp_path / "out" / "model.zarr").n_samples_seen_ == 300


def test_update_with_the_batches_in_another_order_is_refused(cohorts, tmp_path, capsys):
    paths, _ = cohorts
    paths = [str(p) for p in paths]
    assert main(["run", _config(tmp_path, [paths[0]]), "--quiet"]) == EXIT_OK
    capsys.readouterr()
    code = main(["run", _config(tmp_path, paths[::-1]), "--update", "--quiet"])
    assert code == EXIT_USER_ERROR
    assert "rows the model has seen changed" in capsys.readouterr().err


def test_validate_refuses_a_list_of_other_files(tmp_path, capsys):
    cfg = _config(tmp_path, [str(tmp_path / "a.bed"), str(tmp_path / "b.zarr")])
    assert main(["validate", cfg]) == EXIT_USER_ERROR
    assert ".bed files only" in capsys.readouterr().err


def test_transform_cli_takes_a_list_of_beds(cohorts, tmp_path, capsys):
    """``scalepca transform MODEL a.bed b.bed`` scores the list as one matrix (the
    samples of both files, PLINK's .eigenvec with their ids); a list holding another
    kind of store is refused by name before a cluster starts."""
    import xarray as xr

    paths, X = cohorts
    paths = [str(p) for p in paths]
    assert main(["run", _config(tmp_path, paths[0]), "--quiet"]) == EXIT_OK
    model = str(tmp_path / "out" / "model.zarr")
    out = str(tmp_path / "both.zarr")
    args = ["--out", out, "--plink", "--no-progress", "--no-processes", "-q"]
    assert main(["transform", model, *paths, *args]) == EXIT_OK
    got = xr.open_zarr(out)["scores"]
    fitted = scalepca.load(model)
    expected = fitted.transform(scalepca.open_matrix(paths, dtype="float64")).values
    np.testing.assert_allclose(got.values, expected, rtol=1e-12, atol=1e-12)
    lines = (tmp_path / "both.eigenvec").read_text().splitlines()
    ids = [line.split()[1] for line in lines if not line.startswith("#")]
    assert ids[0] == "a0" and ids[-1] == "b99" and len(ids) == len(X)
    capsys.readouterr()
    other = ["--out", str(tmp_path / "x.zarr"), "-q"]
    code = main(["transform", model, paths[0], str(tmp_path / "new.zarr"), *other])
    assert code == EXIT_USER_ERROR
    assert "is not a .bed file" in capsys.readouterr().err


# -- missing calls by EM on a .bed, end to end (issue 49 item 5) ---
def test_ppca_em_on_a_bed_in_python_in_a_config_and_by_transform(tmp_path):
    """The .bed's missing calls reach EM as NaN (never mean-imputed on the way): the fit
    on the default float32 read equals the fit on the matrix in memory, and ``run`` and
    ``scalepca transform`` of the .bed give the Python model's scores."""
    import xarray as xr
    import yaml

    X = _genotypes(seed=5, n=240, d=40, missing=0.1)
    X[:100, 7] = 1.0  # every SNP called somewhere: nothing left out
    path = _write(tmp_path / "m.bed", X, [f"s{i}" for i in range(len(X))])
    A = scalepca.open_matrix(path, chunks={0: 64})
    assert A.dtype == np.float32
    assert int(np.isnan(A.data).sum().compute()) == int(np.isnan(X).sum())
    # persist: each EM iteration reads the data again, and bed-reader opens the file for
    # every block of every read; held in memory, the .bed is read once
    params = dict(
        n_components=3,
        missing="em",
        max_iter=200,
        tol=1e-6,
        random_state=0,
        persist=True,
    )
    em = scalepca.PPCA(**params).fit(A)
    ref = scalepca.PPCA(**params).fit(da.from_array(X, chunks=(64, -1)))
    assert em.n_iter_ > 1 and em.n_passes_ == 1 + em.n_iter_
    np.testing.assert_allclose(em.noise_variance_, ref.noise_variance_, rtol=1e-6)
    assert_same_components(em.components_, ref.components_, atol=1e-5)
    cfg = {
        "data": {"path": str(path), "chunks": 64},
        "model": {"method": "ppca", **params},
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        "output": {"store": str(tmp_path / "out")},
        "progress": False,
    }
    (tmp_path / "em.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["run", str(tmp_path / "em.yaml"), "--quiet"]) == EXIT_OK
    model = scalepca.load(tmp_path / "out" / "model.zarr")
    assert_same_components(model.components_, em.components_, atol=1e-6)
    scores = xr.open_zarr(tmp_path / "out" / "scores.zarr")["scores"].values
    want = em.transform(A).values
    signs = np.sign(np.sum(model.components_ * em.components_, axis=1))
    np.testing.assert_allclose(scores * signs, want, rtol=1e-4, atol=1e-4)
    assert (
        main(
            [
                "transform",
                str(tmp_path / "out" / "model.zarr"),
                str(path),
                "--out",
                str(tmp_path / "t.zarr"),
                "--no-processes",
                "--n-workers",
                "1",
                "--no-progress",
                "--quiet",
            ]
        )
        == EXIT_OK
    )
    again = xr.open_zarr(tmp_path / "t.zarr")["scores"].values
    np.testing.assert_allclose(again, scores, rtol=1e-4, atol=1e-4)


def test_update_of_one_bed_says_to_list_the_files(cohorts, tmp_path, capsys):
    import yaml

    paths, _ = cohorts
    cfg = yaml.safe_load(open(_config(tmp_path, str(paths[0]))))
    cfg["output"]["update"] = True
    (tmp_path / "u.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["validate", str(tmp_path / "u.yaml")]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "is one PLINK .bed file" in err and "list the files" in err
