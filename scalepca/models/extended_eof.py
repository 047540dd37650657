"""Extended EOF analysis (EEOF, multichannel singular spectrum analysis) of a field.

The field x_t (n samples × d features, weighted as ``open_matrix`` makes it) is embedded
in time: window ``embedding`` = L, lag ``tau`` = τ, the embedded sample of time t is

    x̃_t = [x_t, x_{t+τ}, …, x_{t+(L−1)τ}]        (L·d values),  t = 0 … n − (L−1)τ − 1

and the EOFs of the n − (L−1)τ embedded samples are patterns over (lag, feature) that
propagate: each mode is a sequence of L maps. The windows are those xeofs'
``ExtendedEOF`` uses (the last (L−1)τ times start no full window: their scores are NaN),
and as there the embedded samples are centred by their own means.

The embedded matrix (L times the data) is never formed. The covariance of the embedded
samples is accumulated in one pass over row blocks with a halo: the task of a row block
reads its own rows and the (L−1)τ rows after them (from the next block(s)), forms the
embedded rows of its own windows (at most L times one block) and reduces them to count,
mean and a centred L·d × L·d Gram, merged in a tree like PCA's moments. The L·d × L·d
covariance is decomposed on the client.

Examples
--------
>>> X = scalepca.open_matrix(sst, sample_dims="time", weights="sqrt_coslat")
>>> eeof = ExtendedEOF(4, embedding=3, tau=2).fit(X)     # one pass
>>> eeof.components_xr_                                  # (mode, lag, lat, lon)
>>> pcs = eeof.transform(X)                              # (time, mode), NaN at the last 4 times
"""

from __future__ import annotations

import logging

import dask
import dask.array as da
import numpy as np
import xarray as xr

from ..linalg import passes, variance_ratio
from ..linalg.moments import block_moments, merge_moments
from ..preprocessing._matrix import MatrixInput, scores_matrix
from ._params import Int, NComponents, Rule
from .base import DecompositionMixin, affine_map, raise_on_nonfinite
from .multivariate_eof import _leading_spectrum

logger = logging.getLogger(__name__)

__all__ = ["ExtendedEOF"]


def _enough_windows(params, shape) -> None:
    n_win = shape.n - (params["embedding"] - 1) * params["tau"]
    if n_win < 2:
        raise ValueError(
            f"embedding={params['embedding']} and tau={params['tau']} span "
            f"{(params['embedding'] - 1) * params['tau'] + 1} samples, leaving "
            f"{max(n_win, 0)} window(s) of the {shape.n} samples; at least 2 are "
            "needed"
        )


def _windows(params, shape) -> tuple[int, int]:
    """(embedded samples, embedded features) of data of ``shape``: the bound of
    ``n_components`` (too few windows are refused first, in the window's words)."""
    _enough_windows(params, shape)
    return shape.n - (params["embedding"] - 1) * params["tau"], params[
        "embedding"
    ] * shape.d


# -- the blocks with their halo --------------------------------------------------------
def _embed(x: np.ndarray, L: int, tau: int, own: int) -> np.ndarray:
    """The ``own`` embedded rows of a block ``x`` (own rows, then its halo): (own ×
    L·d)."""
    return np.concatenate([x[a * tau : a * tau + own] for a in range(L)], axis=1)


def _lagged_block(x, L: int, tau: int) -> dict:
    """Moments of the embedded rows of one block with its halo, and the sum of the
    halo rows (the last block's halo: the times that start no window, for the mean of
    all samples)."""
    x = np.asarray(x, dtype=np.float64)
    h = (L - 1) * tau
    own = x.shape[0] - h
    out = block_moments(_embed(x, L, tau, own))
    out["tail"] = np.nan_to_num(x[own:]).sum(axis=0)
    out["tail_nan"] = np.isnan(x[own:]).sum(axis=0)
    return out


def _merge_lagged(parts: list) -> dict:
    """Left-to-right merge: moments merged, the halo sums of the rightmost block
    kept."""
    acc = {k: v for k, v in parts[0].items()}
    for p in parts[1:]:
        tail, tail_nan = p["tail"], p["tail_nan"]
        acc = merge_moments(
            {k: v for k, v in acc.items() if not k.startswith("tail")},
            {k: v for k, v in p.items() if not k.startswith("tail")},
        )
        acc["tail"], acc["tail_nan"] = tail, tail_nan
    return acc


def _join_rows(start: int, stop: int, *blocks) -> np.ndarray:
    """Rows ``start:stop`` of consecutive row blocks (``start`` within the first)."""
    x = blocks[0] if len(blocks) == 1 else np.concatenate(blocks, axis=0)
    return x[start:stop]


def halo_blocks(X: da.Array, halo: int) -> tuple[list, list]:
    """``(Delayed blocks, their own row counts)``: each row block of ``X`` whose rows
    start a window (the first ``n − halo`` rows), joined with the ``halo`` rows after
    it, taken from the following block(s). The blocks are the tasks of
    ``X.to_delayed()``, shared by the joins of one graph: each input block is read
    once by a compute (slicing the array instead would let dask fuse the slices into
    their own reads of the source)."""
    n = X.shape[0]
    n_win = n - halo
    bounds = np.cumsum((0, *X.chunks[0]))
    parts = X.to_delayed().ravel()
    blocks, owns = [], []
    for i, s in enumerate(bounds[:-1]):
        if s >= n_win:
            break
        e = min(bounds[i + 1], n_win)
        j = int(
            np.searchsorted(bounds, e + halo, side="left")
        )  # blocks i .. j-1 hold the rows
        blocks.append(
            dask.delayed(_join_rows, pure=True)(
                0, int(e + halo - s), *parts[i : max(j, i + 1)]
            )
        )
        owns.append(int(e - s))
    return blocks, owns


def _project_block(x, L: int, tau: int, mean: np.ndarray, P: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    own = x.shape[0] - (L - 1) * tau
    return (_embed(x, L, tau, own) - mean) @ P


class ExtendedEOF(DecompositionMixin):
    """Extended EOF analysis: EOFs of the field embedded in time, out of core.

    Parameters
    ----------
    n_components : int or None, default=None
        Number of modes (``None``: all, ``min(n − (L−1)τ, L·d)``).
    embedding : int, default=2
        The window length L (number of lags).
    tau : int, default=1
        The lag between the window's samples, in samples.

    Attributes
    ----------
    eofs_ : ndarray of shape (n_components, embedding, n_features)
        The extended EOFs (unit norm over lag and feature, NaN at features left out):
        ``components_xr_`` gives them over ``mode``, ``lag`` and the field's dims.
    explained_variance_ : ndarray of shape (n_components,)
        Eigenvalues of the embedded (lagged) covariance, denominator n_windows − 1.
    explained_variance_ratio_ : ndarray of shape (n_components,)
        ``explained_variance_`` over the embedded covariance's trace.
    singular_values_ : ndarray of shape (n_components,)
        ``sqrt((n_windows − 1) λ)`` for each ``explained_variance_`` λ.
    mean_ : ndarray of shape (n_features,)
        The mean of all samples (added back by ``inverse_transform``, as xeofs does).
    embedded_mean_ : ndarray of shape (embedding, n_features)
        The means of the embedded samples (by lag) that centre them.
    n_samples_ : int
        Number of samples (time steps) in the training data.
    n_windows_ : int
        Number of embedded samples, ``n_samples_ − (embedding − 1) · tau``.
    n_features_in_ : int
        Number of features seen during ``fit``.
    features_kept_ : ndarray of shape (n_features_in_,), dtype bool
        True for the features the model was fitted on, False for those left out
        (NaN in every sample), which are NaN in the per-feature attributes.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during ``fit``; defined only when the data carry
        names.
    n_components_ : int
        The number of components kept.
    n_passes_ : int
        Passes over the data the fit made (1).
    fit_time_ : float
        Wall-clock seconds the fit took.
    solver_ : str
        ``"covariance_eigh"``, the only solver: the lagged covariance of one pass.

    Examples
    --------
    >>> import numpy as np, scalepca
    >>> t = np.arange(400)
    >>> x = np.cos(2 * np.pi * (t[:, None] / 20 - np.arange(16) / 16))   # a travelling wave
    >>> eeof = scalepca.ExtendedEOF(2, embedding=5, tau=2).fit(x)
    >>> eeof.n_passes_, eeof.n_windows_, eeof.eofs_.shape
    (1, 392, (2, 5, 16))
    >>> round(float(eeof.explained_variance_ratio_.sum()), 6)           # a pair of modes
    1.0
    >>> pcs = eeof.transform(x)
    >>> pcs.shape, bool(np.isnan(pcs[-8:]).all())           # the last (5 − 1)·2 times: NaN
    ((400, 2), True)

    Notes
    -----
    Passes over the data: one (the lagged moments). Memory per worker: one row block
    with its halo of (L−1)τ rows, its embedded rows (L × the block's own rows) and
    the L·d × L·d partial Gram; the client decomposes the L·d × L·d covariance
    (leading pairs by Lanczos above 1,000 embedded features). The embedded matrix is
    never formed whole. ``transform`` reads the data once more, blockwise with the
    same halo.

    References
    ----------
    Weare, B. C. & Nasstrom, J. S. (1982). Examples of extended empirical orthogonal
    function analyses. Monthly Weather Review, 110, 481–485.

    Hannachi, A., Jolliffe, I. T. & Stephenson, D. B. (2007). Empirical orthogonal
    functions and related techniques in atmospheric science: a review. International
    Journal of Climatology, 27, 1119–1152.
    """

    _parameters = {
        "n_components": NComponents(bound=_windows, needs=("embedding", "tau")),
        "embedding": Int(1),
        "tau": Int(1),
    }
    _parameter_rules = (Rule(_enough_windows, needs=("embedding", "tau")),)
    _per_feature_attrs = (("eofs_", 2), ("mean_", 0), ("embedded_mean_", 1))

    @property
    def n_spectrum_samples_(self) -> int:
        """The number of samples behind ``explained_variance_``: the windows, the
        samples of the embedded covariance (``n_windows_``).

        Returns
        -------
        n : int
            ``n_windows_``.
        """
        self._check_fitted()
        return int(self.n_windows_)

    def __init__(
        self, n_components: int | None = None, *, embedding: int = 2, tau: int = 1
    ):
        self.n_components = n_components
        self.embedding = embedding
        self.tau = tau

    @property
    def _n_features_out(self) -> int:
        return self.n_components_

    def _halo(self) -> int:
        return (int(self.embedding) - 1) * int(self.tau)

    # -- fit ---------------------------------------------------------------------------
    def _fit(self, data: MatrixInput) -> None:
        X = data.data.rechunk({1: -1})
        n, d = X.shape
        values = self._check_parameters(n, d, X)
        L, tau = values["embedding"], values["tau"]
        h = (L - 1) * tau
        n_win = n - h
        k = values["n_components"] or min(n_win, L * d)
        blocks, owns = halo_blocks(X, h)
        graph = passes.reduce_blocks(
            blocks, _lagged_block, None, L, tau, merge_all=_merge_lagged
        )
        passes.counter_of(self).plan(1)
        logger.info(
            "%s: %d × %d, window %d, lag %d: %d windows in %d blocks",
            type(self).__name__,
            n,
            d,
            L,
            tau,
            n_win,
            len(blocks),
        )
        (mom,) = passes.compute(graph, name="lagged moments")
        keep = self._land(mom, n_win, d, L, data)
        if not keep.all():
            sel = np.tile(keep, L)
            mom = {
                **mom,
                "mean": mom["mean"][sel],
                "m2": mom["m2"][np.ix_(sel, sel)],
                "tail": mom["tail"][keep],
            }
            if k > min(n_win, sel.sum()):
                raise ValueError(
                    f"n_components={k} is out of range after leaving out "
                    f"{d - keep.sum()} all-NaN features"
                )
        d_fit = mom["tail"].shape[0]
        ev, comps, total = _leading_spectrum(mom, k, None)
        self.solver_ = "covariance_eigh"  # the only one: PCA's, on the lagged moments
        self.eofs_ = comps.reshape(k, L, d_fit)
        self.embedded_mean_ = mom["mean"].reshape(L, d_fit)
        lag0 = mom["mean"][:d_fit] * n_win
        # all n samples: the windows' first rows and the tail
        self.mean_ = (lag0 + mom["tail"]) / n
        self.explained_variance_ = ev
        self.explained_variance_ratio_ = variance_ratio(ev, total)
        self.singular_values_ = np.sqrt(ev * max(n_win - 1, 1))
        self.n_samples_, self.n_windows_, self.n_components_ = (
            int(n),
            int(n_win),
            int(k),
        )

    def _land(self, mom: dict, n_win: int, d: int, L: int, data) -> np.ndarray:
        """The mask of the features kept: those NaN at every sample leave the fit
        (land); any other NaN is refused."""
        if not mom["bad"] and not mom["tail_nan"].any():
            return np.ones(d, dtype=bool)
        nanf = mom.get("nan_features", np.zeros(L * d, dtype=np.int64)).reshape(L, d)
        # values seen over all n samples: the windows' first rows and the tail
        observed = (n_win - nanf[0]) + (self._halo() - mom["tail_nan"])

        # any NaN outside the all-NaN features is refused, counted once
        def check(
            land,
        ):
            count = int(nanf[0][~land].sum() + mom["tail_nan"][~land].sum())
            infinite = int(mom["bad"] - nanf.sum())  # infinite values (counted per lag)
            raise_on_nonfinite(count or infinite)

        return self._leave_out_land(observed, data, check=check)

    # -- outputs -----------------------------------------------------------------------
    @property
    def components_xr_(self):
        """``eofs_`` over ``mode``, ``lag`` (0, τ, …, (L−1)τ) and the field's own
        dims."""
        template = self._require_template("components_xr_")
        from ..io._stack import feature_dataarray, mode_coords

        lags = np.arange(self.eofs_.shape[1]) * int(self.tau)
        maps = [
            feature_dataarray(self.eofs_[:, i], template, name="components")
            for i in range(len(lags))
        ]
        out = xr.concat(maps, dim=xr.DataArray(lags, dims="lag", name="lag"))
        out = out.transpose("mode", "lag", ...)
        return out.assign_coords(mode=mode_coords(self.eofs_.shape[0]))

    def transform(self, X):
        """The extended principal components of ``X`` (the windows starting at each
        time; NaN at the last (L−1)τ times, as xeofs gives them): lazy, (n × k) or a
        DataArray over the sample dims and ``mode``. A NaN in ``X`` at a feature the
        model uses is refused (``ValueError``): by this call for in-memory input,
        when the PCs are computed for lazy input.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            New data: a NumPy, dask or sparse array, a DataFrame, a DataArray or
            Dataset in the fitted data's own layout and units, or a matrix
            :func:`scalepca.open_matrix` made.

        Returns
        -------
        scores : array of shape (n_samples, n_components)
            A lazy array, or a DataArray over the sample dims and ``mode``.
        """
        data = self._transform_input(X)
        Xd = data.data.rechunk({1: -1})
        keep = np.isfinite(self.mean_)
        if not keep.all():
            Xd = Xd[:, np.flatnonzero(keep)]
        L, tau, k = int(self.embedding), int(self.tau), self.n_components_
        h = self._halo()
        if Xd.shape[0] - h < 1:
            raise ValueError(
                f"X has {Xd.shape[0]} samples: a window of "
                f"embedding={L}, tau={tau} spans {h + 1}"
            )
        mean = self.embedded_mean_[:, keep].ravel()
        P = self.eofs_[:, :, keep].reshape(k, -1).T
        blocks, owns = halo_blocks(Xd, h)
        parts = [
            da.from_delayed(
                dask.delayed(_project_block, pure=True)(b, L, tau, mean, P),
                shape=(own, k),
                dtype=np.float64,
            )
            for b, own in zip(blocks, owns, strict=True)
        ]
        if h:
            parts.append(da.full((h, k), np.nan, chunks=(h, k)))
        return data.wrap_samples(da.concatenate(parts, axis=0))

    def inverse_transform(self, Z):
        """The field from the scores ``Z``: ``Z`` times the lag-0 maps, plus ``mean_``.

        As xeofs' ``inverse_transform``, in the field's units and layout.

        Parameters
        ----------
        Z : array-like of shape (n_samples, n_components)
            Scores, as :meth:`transform` returns them.

        Returns
        -------
        X : array of shape (n_samples, n_features)
            The field, of the kind of ``Z`` (a DataArray over the field's dims for
            xarray scores).
        """
        self._check_fitted()
        zin = scores_matrix(Z)
        k = zin.data.shape[1]
        if k > self.n_components_:
            raise ValueError(
                f"the scores have {k} modes; the model has {self.n_components_}"
            )
        Xhat = affine_map(
            zin.data.rechunk({1: -1}),
            np.zeros(k),
            np.nan_to_num(self.eofs_[:k, 0, :]),
            offset=self.mean_,
        )
        return self._wrap_reconstruction(zin, Xhat)

    def fit_transform(self, X, y=None):
        return self.fit(X).transform(X)
