"""``scalepca.pp.pca`` refuses counts it cannot prepare, counting and naming what is
wrong (NaN, infinite, negative; values that are not whole numbers as a hint) in
``pp.pca``'s words, in the first pass that reads the counts — never an extra one."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

import scalepca
from scalepca._validation import as_csr_blocks

N_CELLS, N_GENES, BLOCK = 600, 50, 100


def _counts(**spoil):
    """Counts in CSR row blocks of BLOCK cells, with stored values replaced: ``spoil``
    maps a kind (``nan``, ``inf``, ``negative``, ``fraction``) to stored positions."""
    rng = np.random.default_rng(5)
    X = sp.random(
        N_CELLS,
        N_GENES,
        density=0.3,
        random_state=5,
        format="csr",
        data_rvs=lambda k: rng.integers(1, 9, k).astype(np.float64),
    )
    value = {"nan": np.nan, "inf": np.inf, "negative": -2.0, "fraction": 0.5}
    for kind, where in spoil.items():
        X.data[where] = value[kind]
    blocks = [X[i : i + BLOCK] for i in range(0, N_CELLS, BLOCK)]
    return da.concatenate([as_csr_blocks(b) for b in blocks])


#: positions of stored values in different row blocks (totals are summed over blocks)
FAR = [3, 3000]

STEPS = {
    "median target": {
        "normalize_total": True,
        "log1p": True,
    },  # a pass of counts per cell
    "seurat": {
        "normalize_total": True,
        "log1p": True,
        "flavor": "seurat",
        "n_top_genes": 20,
    },
    "scale": {"log1p": True, "scale": True},  # the gene moments' pass first
    "no pass of the steps": {"normalize_total": True, "target_sum": 1e4, "log1p": True},
}


@pytest.mark.parametrize("steps", list(STEPS))
def test_one_nan_is_one_nan(steps, raise_if_dask_computes):
    X = _counts(nan=[3])
    with raise_if_dask_computes(max_computes=1):  # refused in the first pass
        with pytest.raises(ValueError, match=r"^X contains 1 NaN value\b") as err:
            scalepca.pp.pca(X, 5, **STEPS[steps])
    assert "PPCA" not in str(err.value) and "missing" not in str(err.value)


@pytest.mark.parametrize("steps", list(STEPS))
def test_one_negative_count_is_named_negative(steps, raise_if_dask_computes):
    X = _counts(negative=[3])
    with raise_if_dask_computes(max_computes=1):
        with pytest.raises(ValueError, match=r"^X contains 1 negative value\b") as err:
            scalepca.pp.pca(X, 5, **STEPS[steps])
    message = str(err.value)
    assert "NaN" not in message and "PPCA" not in message
    assert "raw counts" in message and "layer=" in message


@pytest.mark.parametrize("steps", ["median target", "seurat", "scale"])
def test_the_kinds_are_counted_over_every_block(steps):
    X = _counts(nan=FAR, inf=[10], negative=[20, 4000, 5000], fraction=[30, 31])
    with pytest.raises(ValueError) as err:
        scalepca.pp.pca(X, 5, **STEPS[steps])
    message = str(err.value)
    assert message.startswith("X contains 2 NaN, 1 infinite and 3 negative values")
    assert "2 values are not whole numbers" in message


def test_without_steps_only_nan_and_inf_are_refused_in_pp_pcas_words():
    """Without steps the matrix is analysed as it is: negative and fractional values are
    data, NaN is not (nor is PPCA's treatment of it pp.pca's to offer)."""
    model = scalepca.pp.pca(_counts(negative=FAR, fraction=[7]), 5)
    assert np.isfinite(model.explained_variance_).all()
    with pytest.raises(ValueError, match=r"^X contains 1 NaN value\b") as err:
        scalepca.pp.pca(_counts(nan=[3]), 5)
    assert "PPCA" not in str(err.value)


def test_new_cells_are_checked_as_the_fitted_ones():
    model = scalepca.pp.pca(_counts(), 5, **STEPS["seurat"])
    with pytest.raises(ValueError, match=r"contains 1 negative value\b"):
        np.asarray(model.transform(_counts(negative=[3])))


def test_the_names_of_an_anndata_layer(tmp_path):
    anndata = pytest.importorskip("anndata")
    X = _counts(negative=[3]).compute()
    a = anndata.AnnData(sp.csr_matrix(X.shape))
    a.layers["counts"] = X
    with pytest.raises(
        ValueError, match=r"^layer 'counts' contains 1 negative value\b"
    ):
        scalepca.pp.pca(a, 5, layer="counts", **STEPS["median target"])
