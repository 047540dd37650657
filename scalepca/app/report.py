"""A run report readable without Python: one self-contained HTML page.

``scalepca run`` writes it next to its outputs unless the config says ``output.report: false``::

    <output.store>/report.html    summary, time per stage and per pass, cluster, versions,
                                  spectrum, top-loading features, figures (embedded as
                                  data: URIs), outputs, and the config that reproduces the run

From Python, :func:`write_report` does the same for any fitted estimator. The figures
come from :mod:`scalepca.analysis.plot` (matplotlib, the ``plot`` extra); without
matplotlib the page is still written, with the tables only and a note saying how to get
the figures. A figure that fails to draw is named on the page with the reason; it never
fails the run whose results are already written. Credentials in the config's
``storage_options`` are never written to the page.

Nothing here reads the training data except a few hundred rows of it for a robust PCA block
view and a sample of at most 5,000 rows of the written scores.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import logging
import time

import numpy as np

from . import report_sections as sections
from .report_sections import fmt_bytes as _fmt_bytes

logger = logging.getLogger(__name__)

__all__ = ["peak_memory", "run_report", "write_report"]

REPORT_NAME = "report.html"


# -- small helpers ---------------------------------------------------------------------
def _fmt_value(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, (float, np.floating)):
        return f"{v:,.6g}" if abs(v) < 1e15 else f"{v:.6g}"
    if isinstance(v, np.ndarray):
        return (
            f"array of shape {v.shape}"
            if v.size > 8
            else np.array2string(v, precision=4)
        )
    return str(v)


def _fs(path: str, storage_options=None):
    import fsspec

    return fsspec.core.url_to_fs(str(path), **(storage_options or {}))


def _peak_rss_bytes() -> int | None:
    """Peak resident memory of this process since it started (Linux/macOS), in bytes."""
    try:
        import resource
        import sys
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def peak_memory(client=None) -> dict:
    """Peak resident memory of the client process and of every worker process, in bytes.

    The peaks are those since each process started (``getrusage``): for the embedded
    cluster ``scalepca run`` starts, that is the peak of this run; for a long-lived
    cluster (``--scheduler``) it may include earlier jobs. Workers that run as
    threads of the client process report the client's peak. Returns
    ``{"client": int|None, "workers": {addr: int}, "worker_limits": {addr: int}}``;
    entries are missing when not measurable.
    """
    out = {"client": _peak_rss_bytes(), "workers": {}, "worker_limits": {}}
    if client is None:
        return out
    try:
        out["workers"] = {
            k: v for k, v in client.run(_peak_rss_bytes).items() if v is not None
        }
        info = (
            client.scheduler_info(n_workers=-1)
            if _accepts_n_workers(client)
            else (client.scheduler_info())
        )
        out["worker_limits"] = {
            a: w.get("memory_limit")
            for a, w in info["workers"].items()
            if w.get("memory_limit")
        }
    except Exception as err:  # a report must not fail the job
        logger.warning("report: could not read the workers' peak memory (%s)", err)
    return out


def _accepts_n_workers(client) -> bool:
    import inspect

    try:
        return "n_workers" in inspect.signature(client.scheduler_info).parameters
    except (TypeError, ValueError):
        return False


# -- figures ---------------------------------------------------------------------------
def _figures(
    est, *, method: str | None, X=None, scores_store=None, storage_options=None
):
    """Yield (file stem, caption, callable returning a Figure) for this estimator."""
    from ..analysis import plot

    name = type(est).__name__
    has_spectrum = any(
        getattr(est, a, None) is not None
        for a in ("explained_variance_ratio_", "explained_variance_", "eigenvalues_")
    )
    if has_spectrum:
        yield (
            "scree",
            "Explained variance per component and cumulative.",
            lambda: plot.scree(est).figure,
        )
    comps = getattr(est, "components_", None)
    # RobustPCA's components are drawn as M/L/S blocks below; KernelPCA's live in the
    # kernel feature space (one value per landmark / random feature), not over the input
    # features
    if (
        comps is not None
        and np.ndim(comps) == 2
        and name not in ("RobustPCA", "KernelPCA")
    ):
        k = min(6, comps.shape[0])
        if getattr(est, "_feature_template", None) is not None:
            yield (
                "components",
                f"The first {k} components over the original feature dimensions "
                "(maps for lat/lon grids; grey: features left out, e.g. land).",
                lambda: plot.components(est, n_components=k, ncols=3),
            )
        elif method == "sparse_pca" or name == "SparsePCA":
            if comps.shape[1] <= 200:
                yield (
                    "loadings",
                    "Sparse loadings; blank cells are exact zeros.",
                    lambda: plot.sparse_loadings(est, n_components=k).figure,
                )
            else:
                yield (
                    "components",
                    f"Loadings of the first {k} sparse "
                    "components against the feature index.",
                    lambda: plot.components(est, n_components=k, ncols=3),
                )
        else:
            yield (
                "components",
                f"Loadings of the first {k} components against the feature index.",
                lambda: plot.components(est, n_components=k, ncols=3),
            )
    hist = None
    for attr in ("history_", "cost_history_", "loglike_"):
        value = getattr(est, attr, None)
        if value is not None and (len(value) if not isinstance(value, dict) else 1):
            hist = attr
            break
    if hist is not None:
        yield (
            "convergence",
            "Convergence per iteration.",
            lambda: plot.convergence(est).figure,
        )
    if scores_store is not None:
        note = (
            " PPCA's scores are posterior means of unit-variance latent variables, not "
            "projections: their variance is at most 1 on every axis, whatever the "
            "component's variance."
            if name == "PPCA"
            else ""
        )
        what = (
            "The first mode's expansion coefficients of X against those of Y (a "
            "random sample of at most 5,000 rows of the written scores)."
            if name == "MCA"
            else "Scores of the first two components (a random sample of at most 5,000 "
            "rows of the written scores); each axis "
            "gives its component's share of the variance." + note
        )
        yield "scores", what, lambda: _scores_figure(scores_store, storage_options, est)
    if (
        name == "RobustPCA"
        and X is not None
        and getattr(est, "low_rank_", None) is not None
    ):
        n1, n2 = est.low_rank_.shape
        r, c = min(n1, 200), min(n2, 200)
        yield (
            "rpca_parts",
            f"Robust PCA: the top-left {r} × {c} block of M, of the low-rank "
            "part L and of the sparse part S.",
            lambda: plot.rpca_blocks(X, est, rows=slice(0, r), cols=slice(0, c)),
        )


def _axis_shares(est) -> list[str]:
    """``PC1 (34.2 % of variance)``, ... for the score axes (no share when not
    known)."""
    ratio = getattr(est, "explained_variance_ratio_", None)
    ratio = [] if ratio is None else np.ravel(np.asarray(ratio, dtype=float))
    return [
        f"PC{i + 1} ({100 * ratio[i]:.1f} % of variance)"
        if i < len(ratio)
        else f"PC{i + 1}"
        for i in range(2)
    ]


def _scores_figure(store, storage_options, est=None):
    import dask.array as da
    import zarr

    from ..analysis import plot
    from ..io import open_zarr_node

    node = open_zarr_node(store, storage_options=storage_options)
    if not isinstance(node, zarr.Array) and "scores" not in node and "scores_x" in node:
        # MCA's expansion coefficients: mode 1 of X against mode 1 of Y, whose
        # covariance the mode maximises
        first = [da.from_zarr(node[name])[:, 0] for name in ("scores_x", "scores_y")]
        Z = da.stack(first, axis=1)
        title = "mode 1: expansion coefficients (sample of rows)"
        x, y = "X, mode 1", "Y, mode 1"
    else:
        arr = node if isinstance(node, zarr.Array) else node["scores"]
        Z = da.from_zarr(arr)
        if Z.ndim != 2 or Z.shape[1] < 2:
            raise ValueError(
                f"the scores have shape {Z.shape}; a scatter needs two columns"
            )
        Z, title = Z[:, :2], "scores (sample of rows)"
        x, y = _axis_shares(est)
    ax = plot.scores(Z, max_points=5000, s=4, alpha=0.5, title=title)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    return ax.figure


# -- the page --------------------------------------------------------------------------
_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1000px;margin:2em auto;
     padding:0 1em;color:#222}
h1{font-size:1.5em} h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0} td,th{border:1px solid #ccc;padding:.25em .6em;
     text-align:left;vertical-align:top} th{background:#f4f4f4}
td.num{text-align:right;font-variant-numeric:tabular-nums}
td.sub{padding-left:2em;color:#444}
figure{margin:1em 0} figcaption{color:#555;font-size:.9em} img{max-width:100%}
pre{background:#f7f7f7;border:1px solid #ddd;padding:.6em;overflow-x:auto;font-size:.85em}
.note{color:#8a5a00} p.hint{color:#555;font-size:.9em}
"""


def _table(rows, headers=None, num_cols=()) -> str:
    out = ["<table>"]
    if headers:
        out.append(
            "<tr>"
            + "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
            + "</tr>"
        )
    for row in rows:
        cells = []
        for i, c in enumerate(row):
            text = str(c)
            cls = ' class="num"' if i in num_cols else ""
            # a row under the one before (a pass)
            if i == 0 and text.startswith("    "):
                cls, text = ' class="sub"', text.strip()
            tag = "th" if headers is None and i == 0 else "td"
            cells.append(f"<{tag}{cls}>{html.escape(text)}</{tag}>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _spectrum_rows(est):
    ev = getattr(est, "explained_variance_", None)
    if ev is None:
        ev = getattr(est, "eigenvalues_", None)
    if ev is None:
        return []
    ev = np.ravel(np.asarray(ev, dtype=float))
    ratio = getattr(est, "explained_variance_ratio_", None)
    ratio = None if ratio is None else np.ravel(np.asarray(ratio, dtype=float))
    from ..io._stack import mode_coords

    rows, cum = [], 0.0
    for i, (mode, v) in enumerate(zip(mode_coords(ev.size), ev, strict=True)):
        if ratio is not None and i < ratio.size:
            cum += ratio[i]
            rows.append(
                [
                    f"{int(mode):,}",
                    _fmt_value(v),
                    f"{100 * ratio[i]:.2f}",
                    f"{100 * cum:.2f}",
                ]
            )
        else:
            rows.append([f"{int(mode):,}", _fmt_value(v), "", ""])
    return rows


def _fit_rows(est):
    """Iterations and convergence of an iterative fit; for a closed form, say so
    instead."""
    if sections.is_closed_form(est) and hasattr(est, "n_iter_"):
        return [["solution", "closed form: one direct solve, no iterations"]]
    rows = []
    for attr, label in (("n_iter_", "iterations"), ("converged_", "converged")):
        value = getattr(est, attr, None)
        if value is not None:
            rows.append([label, _fmt_value(value)])
    return rows


def _memory_rows(memory):
    workers = memory.get("workers") or {}
    if not workers:
        rows = [["peak worker memory", "unknown (no distributed client)"]]
    else:
        limits = memory.get("worker_limits") or {}
        peak, lim = max(workers.values()), max(limits.values()) if limits else None
        rows = [
            [
                "peak worker memory (RSS, max over "
                f"{len(workers):,} worker{'s' if len(workers) != 1 else ''})",
                _fmt_bytes(peak) + (f" of a {_fmt_bytes(lim)} limit" if lim else ""),
            ]
        ]
    return rows + [["peak client memory (RSS)", _fmt_bytes(memory.get("client"))]]


def _summary_rows(est, *, data, method, params, elapsed, memory):
    rows = [[k, v] for k, v in (data or {}).items()]
    rows.append(["method", f"{method or '?'} ({type(est).__name__})"])
    shown = params if params is not None else est.get_params()
    rows.append(
        [
            "parameters",
            ", ".join(f"{k}={_fmt_value(v)}" for k, v in shown.items()) or "(defaults)",
        ]
    )
    rows.append(
        ["passes over the data", _fmt_value(getattr(est, "n_passes_", "unknown"))]
    )
    fit_time = elapsed if elapsed is not None else getattr(est, "fit_time_", None)
    rows.append(
        ["fit time", "unknown" if fit_time is None else sections.fmt_seconds(fit_time)]
    )
    rows += _fit_rows(est)
    for attr, label in (
        ("rank_", "rank"),
        ("nnz_", "non-zeros of S"),
        ("noise_variance_", "noise variance σ²"),
        ("objective_", "objective"),
        ("n_samples_", "samples fitted"),
        ("n_features_in_", "features"),
    ):
        value = getattr(est, attr, None)
        if value is not None:
            rows.append([label, _fmt_value(value)])
    keep = getattr(est, "_features_kept", None)
    if keep is not None:
        rows.append(
            ["features left out (all NaN)", f"{int(np.size(keep) - np.sum(keep)):,}"]
        )
    return rows + (_memory_rows(memory) if memory else [])


def _draw_figures(est, *, method, X, scores_store, storage_options):
    """``([(stem, caption, png bytes)], [(stem, why not drawn)])``."""
    figures, skipped = [], []
    try:
        from ..analysis import plot

        plot._pyplot()
    except ImportError as err:
        return [], [("figures", str(err))]
    import matplotlib.pyplot as plt

    for stem, caption, draw in _figures(
        est,
        method=method,
        X=X,
        scores_store=scores_store,
        storage_options=storage_options,
    ):
        t0 = time.perf_counter()
        try:
            fig = draw()
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=100)
            plt.close(fig)
        except Exception as err:  # a figure that fails must not fail the run
            logger.warning("report: figure %r not drawn: %s", stem, err)
            skipped.append((stem, f"{type(err).__name__}: {err}"))
            plt.close("all")
            continue
        figures.append((stem, caption, buf.getvalue()))
        logger.info("report: %s.png drawn in %.2fs", stem, time.perf_counter() - t0)
    return figures, skipped


def _img(stem: str, png: bytes) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(stem)}">'


def _section(title: str, body: str, hint: str | None = None) -> list[str]:
    hint = f'<p class="hint">{html.escape(hint)}</p>' if hint else ""
    return [f"<h2>{html.escape(title)}</h2>", hint + body]


def _model_sections(est, figures, skipped) -> list[str]:
    parts = []
    spectrum = _spectrum_rows(est)
    if spectrum:
        parts += _section(
            "Explained variance",
            _table(
                spectrum,
                ["component", "explained variance", "ratio %", "cumulative %"],
                num_cols=(0, 1, 2, 3),
            ),
        )
    top = sections.top_features(est)
    if top:
        parts += _section(
            "Top-loading features",
            _table(
                top,
                ["component", "features with the largest |loading| (signed loading)"],
                num_cols=(0,),
            ),
        )
    if figures:
        parts.append("<h2>Figures</h2>")
        parts += [
            f"<figure>{_img(stem, png)}<figcaption>{html.escape(caption)}</figcaption></figure>"
            for stem, caption, png in figures
        ]
    if skipped:
        parts.append("<h2>Not drawn</h2><ul>")
        parts += [
            f'<li class="note">{html.escape(s)}: {html.escape(r)}</li>'
            for s, r in skipped
        ]
        parts.append("</ul>")
    return parts


def _run_sections(*, timings, cluster, config, outputs) -> list[str]:
    parts = []
    if timings is not None:
        parts += _section(
            "Time",
            _table(
                sections.timing_rows(timings),
                ["stage", "time", "% of total"],
                num_cols=(1, 2),
            ),
            "Wall-clock time of each stage of the run and of each pass of the "
            "fit over the data (the report's own drawing is not counted).",
        )
    if cluster:
        parts += _section("Cluster", _table(cluster))
    parts += _section("Versions", _table(sections.version_rows()))
    if outputs:
        parts.append("<h2>Outputs</h2><ul>")
        parts += [f"<li><code>{html.escape(str(o))}</code></li>" for o in outputs]
        parts.append("</ul>")
    if config is not None:
        parts += _section(
            "Config",
            f"<pre>{html.escape(sections.config_text(config))}</pre>",
            "The validated config, defaults filled in: save it "
            "as a .yaml file and `scalepca run` it to repeat "
            "this run. Credentials are replaced by <redacted>.",
        )
    return parts


def write_report(
    est,
    directory,
    *,
    data: dict | None = None,
    method: str | None = None,
    params: dict | None = None,
    elapsed: float | None = None,
    memory: dict | None = None,
    outputs=(),
    X=None,
    scores_store=None,
    storage_options=None,
    title: str | None = None,
    timings=None,
    cluster=None,
    config: dict | None = None,
) -> str:
    """Write ``report.html``, one self-contained page, for a fitted estimator under
    ``directory``.

    Parameters
    ----------
    est : fitted scalepca estimator
    directory : str
        A local directory or an fsspec URL (``s3://bucket/run``); created if needed.
    data : dict, optional
        Rows describing the data (e.g. path, shape, dtype, size, chunks), shown first.
    method : str, optional
        The config's method name.
    params : dict, optional
        Parameters to show; default ``est.get_params()``.
    elapsed : float, optional
        Fit time in seconds; default ``est.fit_time_``.
    memory : dict, optional
        From :func:`peak_memory`.
    outputs : sequence of str
        Paths written by the run (listed on the page).
    X : array, optional
        The fitted matrix; only robust PCA uses it, for a block view of M, L and S.
    scores_store : str, optional
        A written scores store; a scatter of the first two score columns is drawn from a
        sample of its rows.
    storage_options : dict, optional
        fsspec options for ``directory`` and ``scores_store``.
    timings : scalepca.app.timing.RunTimings, optional
        Time per stage and per pass (a table).
    cluster : list of [label, value] rows, optional
        The cluster the run used (:func:`scalepca.app.report_sections.cluster_rows`).
    config : dict, optional
        The run's config, shown as YAML with credentials redacted.

    Returns
    -------
    str
        The path (or URL) of ``report.html``. Figures are embedded in it (``data:``
        URIs): the page is the only file written.
    """
    directory = str(directory).rstrip("/")
    fs, root = _fs(directory, storage_options)
    fs.makedirs(root, exist_ok=True)
    figures, skipped = _draw_figures(
        est,
        method=method,
        X=X,
        scores_store=scores_store,
        storage_options=storage_options,
    )
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    from .._version import __version__

    head = title or f"scalepca run: {method or type(est).__name__}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(head)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(head)}</h1>",
        f"<p>Written {now} by scalepca {html.escape(__version__)}.</p>",
        "<h2>Summary</h2>",
        _table(
            _summary_rows(
                est,
                data=data,
                method=method,
                params=params,
                elapsed=elapsed,
                memory=memory,
            )
        ),
    ]
    parts += _model_sections(est, figures, skipped)
    parts += _run_sections(
        timings=timings, cluster=cluster, config=config, outputs=outputs
    )
    parts.append("</body></html>")
    path = f"{directory}/{REPORT_NAME}"
    with fs.open(f"{root}/{REPORT_NAME}", "w", encoding="utf-8") as f:
        f.write("\n".join(parts) + "\n")
    return path


def _data_rows(X, path=None) -> dict:
    rows = {}
    if path:
        rows["data"] = ", ".join(path) if isinstance(path, list) else path
    shape = tuple(getattr(X, "shape", ()))
    if shape:
        rows["shape"] = " × ".join(f"{s:,}" for s in shape)
    dtype = getattr(X, "dtype", None)
    if dtype is not None:
        rows["dtype"] = str(dtype)
        rows["size"] = _fmt_bytes(int(np.prod(shape)) * np.dtype(dtype).itemsize)
    chunks = getattr(X, "chunks", None)
    if chunks and len(chunks) == 2:  # how the fit's tasks split the matrix
        rows["chunks (tasks)"] = sections.chunks_text(chunks)
    return rows


def run_report(
    est,
    X,
    cfg: dict,
    *,
    timings=None,
    client=None,
    written=(),
    update: dict | None = None,
) -> str:
    """The report of a ``scalepca run`` job, written to ``cfg['output']['store']``.

    ``cfg`` is the validated run config; ``timings`` the run's
    :class:`~scalepca.app.timing.RunTimings`; ``update``: rows saying what a
    ``run --update`` read (:meth:`scalepca.app.update.Update.report_rows`). Returns
    the path of ``report.html``.
    """
    try:  # headless: draw with Agg unless this process already chose a backend
        import sys

        if "matplotlib.pyplot" not in sys.modules:
            import matplotlib

            matplotlib.use("Agg")
    except ImportError:
        pass
    out = cfg["output"]
    root = out["store"].rstrip("/")
    scores = f"{root}/scores.zarr"
    scores_store = scores if scores in [str(w) for w in written] else None
    params = dict(cfg["model"]["params"])
    return write_report(
        est,
        root,
        data={**_data_rows(X, cfg["data"].get("path")), **(update or {})},
        method=cfg["model"]["method"],
        params=params or None,
        elapsed=timings.stages.get("fit") if timings is not None else None,
        memory=peak_memory(client),
        outputs=list(written),
        X=X,
        scores_store=scores_store,
        storage_options=out.get("storage_options"),
        timings=timings,
        cluster=sections.cluster_rows(client, cfg["cluster"].get("kind")),
        config=cfg,
    )
