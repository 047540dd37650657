"""``n_components`` as scikit-learn users write it: int, None, a float in (0, 1), "mle".

The float and "mle" forms choose k from the full spectrum of the same pass(es) the
fit makes; the k chosen must be scikit-learn's PCA's on the same (real) data, for any
chunking and for NumPy and dask input. GridSearchCV over PPCA's ``n_components`` with
its ``score`` must pick scikit-learn's PCA's k.
"""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits, load_iris
from sklearn.decomposition import PCA as SkPCA
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.preprocessing import StandardScaler

import scalepca
from scalepca._validation import (
    check_n_components,
    choose_n_components,
    minka_dimension,
)

from .support.counting import counted_dask


def _datasets():
    return {
        "digits": load_digits().data,
        "breast_cancer_std": StandardScaler().fit_transform(load_breast_cancer().data),
        "iris": load_iris().data,
    }


DATA = _datasets()
FORMS = [0.3, 0.5, 0.8, 0.9, 0.95, 0.99, "mle"]


def _fit(cls, X, n_components, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore", UserWarning
        )  # PPCA at the data's rank warns σ² = 0
        return cls(n_components, **kw).fit(X)


@pytest.mark.parametrize("name", list(DATA))
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("solver", ["covariance_eigh", "tsqr"])
@pytest.mark.parametrize("cls", [scalepca.PCA, scalepca.PPCA])
def test_k_matches_scikit_learn(cls, solver, form, name):
    X = DATA[name]
    ref = SkPCA(form, svd_solver="full").fit(X)
    est = _fit(cls, X, form, svd_solver=solver)
    assert est.n_components_ == ref.n_components_
    k = ref.n_components_
    assert est.components_.shape == (k, X.shape[1])
    assert est.explained_variance_.shape == (k,)
    np.testing.assert_allclose(
        est.explained_variance_ratio_,
        ref.explained_variance_ratio_,
        rtol=1e-8,
        atol=1e-12,
    )
    if (
        cls is scalepca.PCA
    ):  # scikit-learn's noise_variance_ convention, for the k chosen
        np.testing.assert_allclose(
            est.noise_variance_, ref.noise_variance_, rtol=1e-8, atol=1e-12
        )


@pytest.mark.parametrize("name", list(DATA))
@pytest.mark.parametrize("form", FORMS)
def test_k_does_not_depend_on_chunking_or_input_kind(form, name):
    X = DATA[name]
    n = X.shape[0]
    ks = {_fit(scalepca.PCA, X, form).n_components_}
    for rows in (n, 97, 13):
        ks.add(
            _fit(scalepca.PCA, da.from_array(X, chunks=(rows, -1)), form).n_components_
        )
        ks.add(
            _fit(scalepca.PPCA, da.from_array(X, chunks=(rows, -1)), form).n_components_
        )
    ks.add(
        _fit(
            scalepca.PCA, da.from_array(X, chunks=(29, -1)), form, svd_solver="tsqr"
        ).n_components_
    )
    assert ks == {SkPCA(form, svd_solver="full").fit(X).n_components_}


@pytest.mark.parametrize("form", [0.9, "mle"])
def test_fraction_and_mle_cost_no_extra_pass(form):
    X = DATA["breast_cancer_std"]
    arr, counter = counted_dask(X, chunks=(50, -1))
    est = scalepca.PCA(form, svd_solver="covariance_eigh").fit(arr)
    assert est.n_passes_ == 1
    assert counter.reads == arr.numblocks[0]


def test_standardize_matches_a_standard_scaler_pipeline():
    X = load_breast_cancer().data
    ref = SkPCA(0.9, svd_solver="full").fit(StandardScaler().fit_transform(X))
    est = scalepca.PCA(0.9, standardize=True).fit(da.from_array(X, chunks=(100, -1)))
    assert est.n_components_ == ref.n_components_


@pytest.mark.parametrize("form", [0.9, "mle"])
def test_randomized_refuses_spectrum_forms_before_reading(form):
    X = DATA["digits"]
    arr, counter = counted_dask(X, chunks=(200, -1))
    with pytest.raises(ValueError, match="full spectrum.*svd_solver='randomized'"):
        scalepca.PCA(form, svd_solver="randomized").fit(arr)
    with pytest.raises(ValueError, match="svd_solver='auto' chooses 'randomized'"):
        scalepca.PCA(form).fit(da.zeros((6000, 5000), chunks=(1000, 5000)))
    with pytest.raises(ValueError, match="only solver='closed_form'"):
        scalepca.PPCA(form, solver="em").fit(arr)
    assert counter.reads == 0


@pytest.mark.parametrize(
    ("value", "error", "words"),
    [
        (1.0, TypeError, "strictly between 0 and 1"),
        (0.0, TypeError, "strictly between 0 and 1"),
        (-0.5, TypeError, "strictly between 0 and 1"),
        (np.float64(1.5), TypeError, "strictly between 0 and 1"),
        ("MLE", ValueError, "the only string accepted is 'mle'"),
        ("auto", ValueError, "the only string accepted is 'mle'"),
        (True, TypeError, "an integer, a float in (0, 1), 'mle' or None"),
        ([3], TypeError, "an integer, a float in (0, 1), 'mle' or None"),
    ],
)
def test_bad_forms_raise_before_reading(value, error, words):
    arr, counter = counted_dask(DATA["iris"], chunks=(50, -1))
    for cls in (scalepca.PCA, scalepca.PPCA):
        with pytest.raises(error) as err:
            cls(value).fit(arr)
        assert words in str(err.value)
    assert counter.reads == 0


def test_mle_needs_at_least_as_many_samples_as_features():
    with pytest.raises(ValueError, match="'mle' needs n_samples >= n_features"):
        scalepca.PCA("mle").fit(DATA["digits"][:40])


def test_float_form_refused_where_k_cannot_be_chosen_from_a_spectrum():
    with pytest.raises(TypeError, match="an integer or None"):
        check_n_components(0.5, 10, 5)
    with pytest.raises(TypeError, match="an integer or None"):
        scalepca.SparsePCA(0.5).fit(DATA["iris"])
    assert check_n_components(0.5, 10, 5, fraction=True) == 0.5
    assert check_n_components(None, 10, 5, fraction=True) == 5
    assert check_n_components(np.int64(3), 10, 5, fraction=True) == 3


def test_choice_rule_at_the_threshold():
    # cumulative ratios 0.5, 0.8, 1.0: reaching 0.8 exactly needs more than two
    # components, as in scikit-learn (side="right": the kept variance must exceed the
    # fraction)
    ev = np.array([5.0, 3.0, 2.0])
    ratio = ev / ev.sum()
    assert choose_n_components(0.8, ev, ratio, 100) == 3
    assert choose_n_components(0.79, ev, ratio, 100) == 2
    assert choose_n_components(0.2, ev, ratio, 100) == 1
    assert choose_n_components(0.999999999999, ev, ratio, 100) == 3  # never past d


def test_minka_wrapper_reaches_scikit_learn_private_function():
    """The one place scalepca uses a private scikit-learn name: it must still be
    there and give scikit-learn's answer (if this fails after an upgrade, see
    minka_dimension)."""
    from sklearn.decomposition._pca import _infer_dimension

    rng = np.random.default_rng(0)
    W = rng.standard_normal((12, 3)) * [5.0, 3.0, 2.0]
    X = rng.standard_normal((500, 3)) @ W.T + 0.5 * rng.standard_normal((500, 12))
    spectrum = np.linalg.eigvalsh(np.cov(X.T))[::-1]
    assert minka_dimension(spectrum, 500) == int(_infer_dimension(spectrum, 500)) == 3


# -- GridSearchCV over PPCA's n_components, scored by its average log-likelihood -------
def _low_rank_plus_noise():
    # breast_cancer's first 5 standardised principal directions carry the signal;
    # isotropic noise on top, so the likelihood has an interior maximum at k = 5
    Xs = DATA["breast_cancer_std"]
    _, s, Vt = np.linalg.svd(Xs - Xs.mean(0), full_matrices=False)
    rng = np.random.default_rng(7)
    Z = rng.standard_normal((400, 5)) * s[:5] / np.sqrt(Xs.shape[0])
    return Z @ Vt[:5] + 0.5 * rng.standard_normal((400, Xs.shape[1]))


@pytest.mark.parametrize("name", ["digits", "low_rank_plus_noise"])
def test_grid_search_picks_scikit_learn_k(name):
    if name == "digits":
        X, grid = DATA["digits"], [2, 5, 10, 20, 30, 40]
    else:
        X, grid = _low_rank_plus_noise(), [1, 2, 3, 4, 5, 6, 8, 12, 20]
    cv = KFold(4, shuffle=True, random_state=0)
    ref = GridSearchCV(SkPCA(svd_solver="full"), {"n_components": grid}, cv=cv).fit(X)
    ours = GridSearchCV(scalepca.PPCA(), {"n_components": grid}, cv=cv).fit(X)
    assert ours.best_params_ == ref.best_params_
    np.testing.assert_allclose(
        ours.cv_results_["mean_test_score"],
        ref.cv_results_["mean_test_score"],
        rtol=1e-8,
    )
    if name == "low_rank_plus_noise":
        assert ours.best_params_ == {"n_components": 5}
    # score is the average log-likelihood, the quantity scikit-learn's PCA.score gives
    assert ours.best_estimator_.score(X) == pytest.approx(
        ref.best_estimator_.score(X), rel=1e-8
    )
