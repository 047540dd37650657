"""Updating a fitted model with more rows: ``partial_fit`` by merged moments.

The covariance fits (PCA and PPCA's closed form on the d × d covariance, kernel PCA's
Nyström and random Fourier features, sparse PCA's elastic net) read the data once, for
mergeable moments: the count, mean and centred Gram of the rows (of their kernel
features). The fitted model keeps those moments (``_moments_``; saved with it), so new
rows need only their own pass: their moments are merged into the kept ones by the same
pairwise update the one-pass fit merges its row blocks with
(:func:`scalepca.linalg.moments.merge_moments`, Chan et al.), and the model is solved
again from the merged moments on the client. After any sequence of calls the model is
the one-pass ``fit`` of every row seen, to rounding.

The first call is ``fit`` itself, after a check that the configuration can be updated
(before any pass). It fixes what the model owns: the preparation of raw data (weights,
the sample dims of a gridded field, the feature names), the land mask, the kernel's
landmarks or random features; later batches are taken as ``transform`` takes new data
and refused when their features differ. Standardisation is recomputed from the merged
moments (the scales are their diagonal), so the components follow it. The genotype
standardisation (``standardize="genotype"``) keeps moments of the raw allele counts
instead (their sums, Gram and missing-call cross terms,
:mod:`scalepca.linalg.allele_moments`), which merge by addition: the allele frequencies,
and the scales from them, are those of every sample seen.

Methods whose answer is not a function of such moments (the randomized, Krylov,
snapshot, sketch and TSQR solvers, PPCA's EM, robust PCA, exact kernel PCA) refuse
``partial_fit`` by name, before reading anything.
"""

from __future__ import annotations

import functools
import time
import types
from functools import partial

import dask
import numpy as np

from ..linalg import eigh_descending, flip_signs, merge_moments, moments_graph, passes
from ..linalg.allele_moments import (
    ALLELE_MOMENT_KEYS,
    allele_moments_graph,
    merge_allele_moments,
)
from ..linalg.kernels import _nystroem_block, _rff_block
from ..preprocessing._matrix import MatrixInput
from ..solvers.choice import describe, ppca_solver, resolve
from ._params import fixed_k

#: the moments a model keeps, saved as the private state ``_moments_<key>``
MOMENT_KEYS = tuple(
    dict.fromkeys(("n", "mean", "m2", "bad", "nan_features", *ALLELE_MOMENT_KEYS))
)

_SAVED = "_moments_"


def refusal(name: str, why: str, updatable: str) -> str:
    """The message of a ``partial_fit`` that cannot be: ``why`` names the setting."""
    return (
        f"{name}.partial_fit cannot update {why}: its result is not a function of "
        f"mergeable moments; partial_fit updates {updatable}. Fit on all the rows "
        f"instead"
    )


def _known(n) -> int | None:
    """A row count, or None where it is not known yet (NaN: a dask DataFrame's rows)."""
    return None if n is None or n != n else int(n)


class if_updatable:  # noqa: N801 (a decorator, named as scikit-learn's available_if)
    """``partial_fit`` as an attribute of the configurations that can be updated only.

    As scikit-learn's ``available_if``: ``hasattr(est, "partial_fit")`` is False for
    the others (so scikit-learn's checks and pipelines do not offer it), but the
    ``AttributeError`` says itself why and which settings can be updated
    (``available_if`` says it in its cause). The class attribute is the function (its
    docs).
    """

    def __init__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __get__(self, obj, owner=None):
        if obj is None:
            return self.fn
        obj._check_updatable(None, error=AttributeError)
        return types.MethodType(self.fn, obj)


class not_updatable:  # noqa: N801
    """A ``partial_fit`` attribute that is never there, with the reason (robust PCA)."""

    def __init__(self, why: str):
        self.why = why

    def __get__(self, obj, owner=None):
        name = (owner or type(obj)).__name__
        raise AttributeError(refusal(name, self.why, UPDATABLE_METHODS))


#: the estimators and settings partial_fit updates, named in every refusal of another
UPDATABLE_METHODS = (
    "PCA and PPCA's closed form with svd_solver 'covariance_eigh' (or 'auto' "
    "on at most 4096 features), KernelPCA with approximation 'nystroem' or "
    "'rff', and SparsePCA with method 'elasticnet' (or, by its own online "
    "updates, 'minibatch')"
)


class MomentUpdateMixin:
    """``partial_fit`` for estimators whose fit is a function of one pass of moments.

    A subclass says which of its configurations can be updated
    (:meth:`_update_refusal`, :attr:`_updatable`), how a batch is reduced to moments
    (:meth:`_batch_moments_graph`) and how the fitted attributes follow from the
    moments of every row seen (:meth:`_refit_from_moments`, which its one-pass
    ``fit`` calls too and which keeps the moments in ``_moments_`` and the row count
    in ``n_samples_seen_``).
    """

    #: the settings ``partial_fit`` takes, named in its refusals
    _updatable = ""

    def _update_refusal(
        self, n_features: int | None, n_samples: int | None = None
    ) -> str | None:
        """Why this configuration cannot be updated by merging moments (``None``: it
        can); ``n_features``, ``n_samples``: the data's (None: the fitted model's, or
        not known)."""
        raise NotImplementedError

    def _batch_moments_graph(self, X):
        """A dask ``Delayed`` for the moments of the batch ``X`` (all its features)."""
        return moments_graph(X)

    def _merge_moments(self, kept: dict, new: dict) -> dict:
        """The moments of the rows seen and of a new batch together."""
        return merge_moments(kept, new)

    def _refit_from_moments(self, mom: dict, data: MatrixInput) -> None:
        raise NotImplementedError

    def _check_updatable(
        self,
        n_features: int | None,
        error: type = ValueError,
        n_samples: int | None = None,
    ) -> None:
        """Refuse (``error``) a configuration whose fit cannot be updated on
        ``n_features`` features and ``n_samples`` samples (``None``: the fitted model's,
        or not known yet, judged by the parameters)."""
        why = self._update_refusal(n_features, n_samples)
        if why is not None:
            raise error(refusal(type(self).__name__, why, self._updatable))

    @if_updatable
    def partial_fit(self, X, y=None):
        """Update the model with a batch of rows (fit it on them if it is not fitted
        yet).

        The batch is read once, for its moments (count, mean, centred Gram: of its
        kernel features for :class:`~scalepca.KernelPCA`), which are merged into those
        the model keeps by the pairwise update of the one-pass fit; the model is then
        solved again from the merged moments. After any sequence of calls it equals
        ``fit`` on all the rows seen (in any order, split anyhow), to rounding (1e-12 in
        float64). The model keeps the moments, so it can be updated after :meth:`save`
        and :func:`scalepca.load` too.

        The first call (on an unfitted model) is ``fit``; it fixes the model's
        preparation of the data (weights, land mask, the sample dims of a gridded field,
        the feature names) and, for kernel PCA, the landmarks or random features. Later
        batches are taken as ``transform`` takes new data: raw fields are stacked and
        weighted as the first was, and a batch on other features (names, coordinates,
        their number) is refused.

        Parameters
        ----------
        X : array-like, dask array, xarray DataArray or sparse matrix of shape \
(n_samples, n_features)
            Any input ``fit`` takes.
        y : ignored

        Returns
        -------
        self

        Raises
        ------
        ValueError
            The configuration's fit is not a function of mergeable moments (the
            message names the settings that are); the model's store holds no
            moments; the batch is not on the model's features.
        """
        if not self.__sklearn_is_fitted__():
            self._check_before_fit = lambda data: self._check_updatable(
                data.data.shape[1], n_samples=_known(data.data.shape[0])
            )
            self._fit_for_update = True  # "auto" chooses a solver an update can follow
            try:
                return self.fit(X)
            finally:
                vars(self).pop("_fit_for_update", None)
        self._check_updatable(self.n_features_in_)
        if getattr(self, _SAVED, None) is None:
            raise ValueError(
                f"this {type(self).__name__} keeps no moments to update (its model "
                "store holds none); fit it again on all the rows, then partial_fit "
                "updates it"
            )
        before = dict(vars(self))
        try:
            self._update(X)
        except Exception:  # a refused batch leaves the model as it was
            vars(self).clear()
            vars(self).update(before)
            raise
        return self

    def _update(self, X) -> None:
        t0 = time.perf_counter()
        self.n_passes_ = 0
        d = self.n_features_in_
        # names, layout, weights, features: checked as transform checks them; the
        # moments need no row counts, so a dask DataFrame's partitions are not counted
        # first
        fills = getattr(self, "_fills_missing", None)  # genotypes: NaN a missing call
        data = self._transform_input(
            X,
            unknown_rows=True,
            lazy_check=False,
            allow_nan=(fills is not None and fills()) or None,
        )
        batch = data.data
        if len(batch.chunks[1]) > 1:
            batch = batch.rechunk({1: -1})
        blocks = getattr(batch, "numblocks", (None,))[0]
        with passes.counting(self, planned=1, chunks=blocks):
            with self._timed_pass("moments"):
                (mom,) = dask.compute(self._batch_moments_graph(batch))
            merged = self._merge_moments(self._moments_, mom)
            self._refit_from_moments(merged, data)
        self._widen_features(d)
        self.fit_time_ = time.perf_counter() - t0

    # -- the moments in the model store ------------------------------------------------
    def _state_to_save(self) -> dict:
        state = super()._state_to_save()
        mom = getattr(self, _SAVED, None)
        if mom is not None:
            for key in MOMENT_KEYS:
                if key in mom:
                    value = mom[key]
                    if not isinstance(value, np.ndarray):  # a count
                        value = int(value)
                    state[_SAVED + key] = value
        return state

    def _restore_state(self, state: dict) -> None:
        state = dict(state)
        mom = {
            key: state.pop(_SAVED + key) for key in MOMENT_KEYS if _SAVED + key in state
        }
        super()._restore_state(state)
        if {"n", "mean", "m2"} <= set(mom) or {"n", "sums", "gram"} <= set(mom):
            mom["n"], mom["bad"] = int(mom["n"]), int(mom.get("bad", 0))
            for key in ("mean", "m2", "sums", "gram", "xm", "mm"):
                if key in mom:
                    mom[key] = np.asarray(mom[key], dtype=np.float64)
            setattr(self, _SAVED, mom)


class SpectralMomentUpdate(MomentUpdateMixin):
    """``partial_fit`` of :class:`~scalepca.PCA` and :class:`~scalepca.PPCA`
    (covariance)."""

    _updatable = (
        "svd_solver='covariance_eigh' (and 'auto' on at most 4096 features), "
        "with or without standardize=True or 'genotype' and zero_center"
    )

    def _update_refusal(
        self, n_features: int | None, n_samples: int | None = None
    ) -> str | None:
        # a fitted model: the solver that ran (only covariance_eigh keeps the moments);
        # before the first fit, 'auto' chooses among the solvers an update can follow
        ran = self._solver_that_ran()
        if ran is not None and ran != "covariance_eigh":
            if self.svd_solver == "auto":
                return f"svd_solver='auto' chooses {ran!r} (the solver of this fit)"
            return f"svd_solver={ran!r}"
        if ran is None:
            d = n_features
            if d is None:
                d = getattr(self, "n_features_in_", None) or 0
            n = d if n_samples is None else int(n_samples)
            choice = resolve(self.svd_solver, self._update_problem(n, d))
            if choice.solver != "covariance_eigh":
                return describe(self.svd_solver, choice)
        return None

    def _batch_moments_graph(self, X):
        if self._genotypes():  # raw counts: the frequencies come from the merged sums
            return allele_moments_graph(X)
        return moments_graph(X)

    def _merge_moments(self, kept: dict, new: dict) -> dict:
        if self._genotypes():
            return merge_allele_moments(kept, new)
        return merge_moments(kept, new)

    def _refit_from_moments(self, mom: dict, data: MatrixInput) -> None:
        X = data.data
        n, d = int(mom["n"]), X.shape[1]
        spec = self._check_parameters(n, d, X)["n_components"]
        self._features_kept = None  # the land mask of every row seen
        k = fixed_k(spec) or 1
        if self._genotypes():
            self._fit_genotype_moments(mom, data, spec, k)
            return
        self._fit_from_moments(mom, X, data, spec, k)


class PPCAMomentUpdate(SpectralMomentUpdate):
    """``partial_fit`` of :class:`~scalepca.PPCA`: its closed form, not EM."""

    _updatable = (
        "solver='closed_form' (or 'auto' with missing='error'), and of it "
        + SpectralMomentUpdate._updatable
    )

    def _update_refusal(
        self, n_features: int | None, n_samples: int | None = None
    ) -> str | None:
        if ppca_solver(self.solver, self.missing) == "em":
            return f"solver={self.solver!r} with missing={self.missing!r} (EM iterates)"
        return super()._update_refusal(n_features, n_samples)

    def _refit_from_moments(self, mom: dict, data: MatrixInput) -> None:
        super()._refit_from_moments(mom, data)
        self._set_loadings_from_spectrum()


def kernel_feature_spectrum(mom: dict, k: int) -> tuple[dict, tuple]:
    """Kernel PCA's fitted state from the moments of the kernel features (Nyström,
    RFF): the eigenpairs of the m × m centred Gram. Returns
    ``(state, (eigenvalues, trace))``."""
    if mom["bad"]:
        raise ValueError(
            "X contains NaN or infinite values (their kernel features are not finite); "
            "remove or impute them before kernel PCA"
        )
    m2 = mom["m2"]
    evals, evecs = eigh_descending(m2, k)
    state = {
        "components_": flip_signs(evecs.T),
        "mean_": np.asarray(mom["mean"], dtype=np.float64),
        "n_kernel_features_": int(m2.shape[0]),
        "_moments_": mom,
        "n_samples_seen_": int(mom["n"]),
    }
    return state, (np.maximum(evals, 0.0), float(np.trace(m2)))


class KernelMomentUpdate(MomentUpdateMixin):
    """``partial_fit`` of :class:`~scalepca.KernelPCA` with Nyström or random Fourier
    features: the landmarks (or random weights) and gamma are those of the first
    call."""

    _updatable = (
        "approximation='nystroem' or 'rff', without standardize or "
        "fit_inverse_transform"
    )

    def _update_refusal(
        self, n_features: int | None, n_samples: int | None = None
    ) -> str | None:
        if self.approximation == "exact":
            return "approximation='exact' (the n × n kernel of every row)"
        if self.standardize:
            return (
                "standardize=True (the kernel features of standardised rows change "
                "whenever the scales do)"
            )
        if self.fit_inverse_transform:
            return (
                "fit_inverse_transform=True (its pre-image ridge is reduced over the "
                "scores, which change with the components)"
            )
        return None

    def _feature_map(self):
        """The fitted feature map of raw rows (all ``n_features_in_`` columns)."""
        keep = getattr(self, "_features_kept", None)
        if hasattr(self, "landmarks_"):
            return partial(
                _nystroem_block,
                landmarks=self._kept(self.landmarks_, axis=1),
                normalization=self.normalization_,
                keep=keep,
                **self._kparams(),
            )
        return partial(
            _rff_block,
            W=self._kept(self.random_weights_),
            b=self.random_offset_,
            keep=keep,
        )

    def _batch_moments_graph(self, X):
        return moments_graph(X, feature_map=self._feature_map())

    def _refit_from_moments(self, mom: dict, data: MatrixInput) -> None:
        state, spectrum = kernel_feature_spectrum(mom, self.n_components_)
        for name, value in state.items():
            setattr(self, name, value)
        self.n_samples_ = int(mom["n"])
        self._set_spectrum(*spectrum)


class SparseMomentUpdate(MomentUpdateMixin):
    """``partial_fit`` of :class:`~scalepca.SparsePCA`'s elastic net (the merged
    covariance); ``"minibatch"`` keeps its own online ``partial_fit``."""

    _updatable = (
        "method='elasticnet' (from the merged covariance) "
        "and 'minibatch' (by its own online steps)"
    )

    def _update_refusal(
        self, n_features: int | None, n_samples: int | None = None
    ) -> str | None:
        if self.method == "batch":
            return "method='batch' (its alternations read every row)"
        return None

    def _refit_from_moments(self, mom: dict, data: MatrixInput) -> None:
        X = data.data
        k = self._checked_k(int(mom["n"]), X.shape[1], X)
        self._features_kept = None  # the land mask of every row seen
        self._fit_from_moments(mom, X, data, k)
