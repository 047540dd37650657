"""The rows of the run report that say how a run was made: time, cluster, versions,
config.

Each function returns plain rows (lists of strings) or text; :mod:`scalepca.report`
lays them out as HTML. Numbers carry thousands separators; credentials never reach
the page (:func:`redacted`).
"""

from __future__ import annotations

import re

import numpy as np

#: storage option names (any part of the name, any case) whose values are credentials
SECRET_NAMES = re.compile(
    r"key|secret|token|passw|credential|auth|signature|session", re.IGNORECASE
)
REDACTED = "<redacted>"


def fmt_bytes(n) -> str:
    """``n`` bytes in binary units (``1.50 GiB``); ``unknown`` for None."""
    if n is None:
        return "unknown"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.2f} {unit}"
        n /= 1024
    return f"{n:,.2f} TiB"  # pragma: no cover - the loop returns


def fmt_seconds(s: float) -> str:
    """``s`` seconds as ``0.42 s``, ``1 min 05 s`` or ``2 h 03 min``."""
    if s < 60:
        return f"{s:,.2f} s"
    m, sec = divmod(round(s), 60)
    if m < 60:
        return f"{m} min {sec:02d} s"
    h, m = divmod(m, 60)
    return f"{h:,} h {m:02d} min"


# -- time ------------------------------------------------------------------------------
def timing_rows(timings) -> list[list[str]]:
    """Stage | time | % of the run, with the fit's passes under the fit, and the total.

    ``timings`` is a :class:`scalepca.app.timing.RunTimings`; the total is the time
    from its creation to now (the report's own drawing is not counted).
    """
    total = timings.total()

    def share(s):
        return f"{100 * s / total:,.1f}" if total > 0 else ""

    rows = []
    for name, seconds in timings.stages.items():
        rows.append([name, fmt_seconds(seconds), share(seconds)])
        if name == "fit":
            for est, index, label, s in timings.pass_times:
                rows.append(
                    [f"    {est} pass {index:,}: {label}", fmt_seconds(s), share(s)]
                )
        for stage, label, s in timings.data_passes:
            if stage == name:
                rows.append(
                    [f"    pass over the data: {label}", fmt_seconds(s), share(s)]
                )
    rows.append(["total", fmt_seconds(total), share(total)])
    return rows


def job_passes_text(fit_passes: int, timings) -> str:
    """The passes over the data of a whole run in words:
    ``2 (1 by the fit; 1 writing scores.zarr)``."""
    parts = [f"{fit_passes:,} by the fit"]
    parts += [f"1 {label}" for _, label, _ in timings.data_passes]
    return f"{fit_passes + len(timings.data_passes):,} ({'; '.join(parts)})"


# -- where it ran ----------------------------------------------------------------------
def cluster_rows(client=None, kind: str | None = None) -> list[list[str]]:
    """The cluster a run used: kind, workers × threads, memory per worker and in all."""
    rows = [["cluster kind", kind or "none (this process's threads)"]]
    if client is None:
        return rows
    try:
        workers = client.scheduler_info(n_workers=-1)["workers"]
    except TypeError:  # distributed without the n_workers argument
        workers = client.scheduler_info()["workers"]
    except Exception as err:  # a report must not fail the run
        return rows + [["workers", f"unknown ({type(err).__name__})"]]
    threads = [w.get("nthreads", 0) for w in workers.values()]
    limits = [w.get("memory_limit") or 0 for w in workers.values()]
    n, per = len(workers), "/".join(f"{x:,}" for x in sorted(set(threads))) or "?"
    rows.append(
        [
            "workers × threads",
            f"{n:,} worker{'s' * (n != 1)} × {per} thread"
            f"{'s' * (set(threads) != {1})} ({sum(threads):,} threads in all)",
        ]
    )
    if any(limits):
        rows.append(
            [
                "memory",
                f"{fmt_bytes(max(limits))} per worker, {fmt_bytes(sum(limits))} in all",
            ]
        )
    rows.append(["scheduler", str(getattr(client.scheduler, "address", "?"))])
    return rows


def version_rows() -> list[list[str]]:
    """Versions of scalepca and of the packages its results depend on."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    from .._version import __version__

    rows = [["scalepca", __version__], ["python", platform.python_version()]]
    for pkg in (
        "dask",
        "distributed",
        "zarr",
        "numpy",
        "scipy",
        "scikit-learn",
        "xarray",
    ):
        try:
            rows.append([pkg, version(pkg)])
        except PackageNotFoundError:
            rows.append([pkg, "not installed"])
    return rows


# -- the config ------------------------------------------------------------------------
def redacted(value, *, secret: bool = False):
    """A copy of a config with credentials replaced by ``<redacted>``.

    Inside every ``storage_options`` mapping, values whose key names a credential
    (``key``, ``secret``, ``token``, ``password``, ... in any part of the name, any
    case: see :data:`SECRET_NAMES`) are replaced, at any depth (``client_kwargs``);
    user names and passwords written into URLs (``s3://user:pass@host``) are replaced
    everywhere.
    """
    if isinstance(value, dict):
        return {
            k: REDACTED
            if secret and v is not None and SECRET_NAMES.search(str(k))
            else redacted(v, secret=secret or k == "storage_options")
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redacted(v, secret=secret) for v in value]
    if isinstance(value, str):
        return re.sub(r"(?<=://)[^/@\s]+@", f"{REDACTED}@", value)
    return value


def config_text(cfg: dict) -> str:
    """The run's validated config (defaults filled in) as YAML, credentials redacted."""
    import yaml

    return yaml.safe_dump(redacted(cfg), sort_keys=False, default_flow_style=False)


# -- the model -------------------------------------------------------------------------
def top_features(est, n: int = 5, k: int = 6) -> list[list[str]]:
    """Per component: the ``n`` features with the largest absolute loadings, by name.

    Empty unless the data had feature names (``feature_names_in_``) and the estimator
    has loadings over those features (not kernel PCA, whose components live in a
    feature space).
    """
    names = getattr(est, "feature_names_in_", None)
    comps = getattr(est, "components_", None)
    if (
        names is None
        or comps is None
        or type(est).__name__ in ("KernelPCA", "RobustPCA")
    ):
        return []
    comps = np.asarray(comps, dtype=float)
    if comps.ndim != 2 or comps.shape[1] != len(names):
        return []
    rows = []
    for i, c in enumerate(comps[:k]):
        order = np.argsort(-np.nan_to_num(np.abs(c), nan=-1.0), kind="stable")[:n]
        rows.append(
            [f"{i + 1:,}", ", ".join(f"{names[j]} ({c[j]:+.3f})" for j in order)]
        )
    return rows


def is_closed_form(est) -> bool:
    """Whether the fit was one direct solve (no iterations to report)."""
    for attr in ("history_", "cost_history_", "loglike_"):
        value = getattr(est, attr, None)
        if value is not None and len(value):
            return False
    return getattr(est, "n_iter_", 1) in (None, 1)


def chunks_text(chunks) -> str:
    """A dask array's chunking in words:
    ``4 row chunks of up to 120,000 rows; 128 features in one chunk``."""
    rows, cols = chunks[0], chunks[1] if len(chunks) > 1 else (1,)
    text = (
        f"{len(rows):,} row chunk{'s' * (len(rows) != 1)} of up to {max(rows):,} rows"
        if rows
        else "no rows"
    )
    if len(cols) == 1:
        return f"{text}; all {cols[0]:,} features in each"
    return f"{text}; features in {len(cols):,} chunks of up to {max(cols):,}"
