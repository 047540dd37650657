"""PPCA's parameters beyond :class:`~scalepca.models.pca.PCA`'s: the conditions between
them that ``fit`` and ``scalepca validate`` check (the table itself is
:attr:`PPCA._parameters <scalepca.models.ppca.PPCA>`), and the ones an EM checkpoint's
fingerprint leaves out.
"""

from __future__ import annotations

from ..solvers.choice import ppca_solver

#: parameters left out of an EM checkpoint's fingerprint, and why they do not change the
#: result
EM_FINGERPRINT_IGNORES = {
    "checkpoint": "where the commits are written",
    "checkpoint_every": "how often commits are written; the iterations are the same",
    "tol": "a stopping parameter: evaluated again on resume",
    "max_iter": "a stopping parameter: evaluated again on resume",
    "persist": "where the data are held during the fit; the same values are read",
    "svd_solver": "the closed form's spectrum solver; EM does not use it",
    "n_oversamples": "the closed form's spectrum solver; EM does not use it",
    "n_power_iter": "the closed form's spectrum solver; EM does not use it",
}


def _em_bound(p, shape) -> tuple[int, int]:
    if ppca_solver(p["solver"], p["missing"]) == "em" and p["n_components"] is None:
        return shape.n, shape.d - 1
    return shape.n, shape.d


def _missing_needs_em(p, shape) -> None:
    if ppca_solver(p["solver"], p["missing"]) == "closed_form" and p["missing"] == "em":
        raise ValueError(
            "missing='em' needs solver='em' (or 'auto'); the closed form cannot "
            "skip missing entries"
        )


def _checkpoint_needs_em(p, shape) -> None:
    solver = ppca_solver(p["solver"], p["missing"])
    if solver == "closed_form" and p["checkpoint"] is not None:
        raise ValueError(
            "checkpoint applies to solver='em' only (the closed form is one pass, "
            f"with nothing to resume); got solver={p['solver']!r}"
        )


def _em_needs_dense_rows(p, shape) -> None:
    if ppca_solver(p["solver"], p["missing"]) != "em":
        return
    if shape.sparse:
        raise ValueError(
            "PPCA(solver='em') needs dense blocks (missing entries "
            "are NaN in dense rows); for sparse X use "
            "solver='closed_form' (or 'auto' with missing='error')"
        )
    if p["standardize"]:
        raise ValueError(
            "standardize=True needs solver='closed_form' (the EM solver fits the "
            "unstandardised data; standardise the data first to use EM)"
        )


def _em_needs_integer_k(p, shape) -> None:
    if ppca_solver(p["solver"], p["missing"]) != "em":
        return
    k = p["n_components"]
    if isinstance(k, (float, str)):
        raise ValueError(
            f"n_components={k!r} (a float or 'mle') chooses k from the "
            "covariance spectrum, which only solver='closed_form' "
            "computes; give EM an integer n_components"
        )
    # σ² is the variance of the discarded directions: at least one is needed
    if shape.d < 2:
        raise ValueError(
            f"PPCA(solver='em') needs at least 2 features; got {shape.d} feature(s)"
        )
    if k is not None and k >= shape.d:
        raise ValueError(
            f"PPCA(solver='em') needs n_components < n_features; got "
            f"n_components={k} with {shape.d} features"
        )
