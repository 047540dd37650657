"""A run report readable without Python: one self-contained HTML page.

``scalepca run`` writes it next to its outputs unless the config says ``output.report: false``::

    <output.store>/report.html    the command and config file, summary (passes and time of
                                  the whole run), time per stage and per pass, cluster,
                                  versions, spectrum, top-loading features, figures
                                  (embedded as data: URIs at 2x, with alt text), outputs,
                                  and the config that reproduces the run

From Python, :func:`write_report` does the same for any fitted estimator. The figures
(:mod:`scalepca.app.report_figures`: what each method produced) come from
:mod:`scalepca.analysis.plot` (matplotlib, the ``plot`` extra); without matplotlib the
page is still written, with the tables only and a note saying how to get the figures. A
figure that fails to draw is named on the page with the reason; it never fails the run
whose results are already written. Credentials in the config's ``storage_options`` are
never written to the page.

Nothing here reads the training data except a few hundred rows of it for a robust PCA block
view, a column of sample labels, and a sample of at most 5,000 rows of the written scores.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import logging
import shlex
import time

import numpy as np

from .._schema import as_list
from . import report_sections as sections
from .report_sections import fmt_bytes as _fmt_bytes

logger = logging.getLogger(__name__)

__all__ = ["peak_memory", "run_report", "write_report"]

REPORT_NAME = "report.html"
#: figures are drawn at 2× the resolution they are shown at (sharp on HiDPI screens)
DPI = 200


# -- small helpers ---------------------------------------------------------------------
def _fmt_value(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, (float, np.floating)):
        return f"{v:,.6g}" if abs(v) < 1e15 else f"{v:.6g}"
    if isinstance(v, np.ndarray) and v.size > 8:
        return f"array of shape {v.shape}"
    if isinstance(v, np.ndarray):
        return np.array2string(v, precision=4)
    return str(v)


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
        if _accepts_n_workers(client):
            info = client.scheduler_info(n_workers=-1)
        else:
            info = client.scheduler_info()
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


# -- the page --------------------------------------------------------------------------
_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1000px;margin:2em auto;
     padding:0 1em;color:#222}
h1{font-size:1.5em} h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0} td,th{border:1px solid #ccc;padding:.25em .6em;
     text-align:left;vertical-align:top} th{background:#f4f4f4}
td.num{text-align:right;font-variant-numeric:tabular-nums}
td.sub{padding-left:2em;color:#444}
figure{margin:1em 0} figcaption{color:#555;font-size:.9em}
img{max-width:100%;height:auto}
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
    # no ratios (an estimator without them): the columns stay empty
    ratio = np.ravel(np.asarray(getattr(est, "explained_variance_ratio_", ()), float))
    from ..io._stack import mode_coords

    rows, cum = [], 0.0
    for i, (mode, v) in enumerate(zip(mode_coords(ev.size), ev, strict=True)):
        if i < ratio.size:
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
        peak = _fmt_bytes(max(workers.values()))
        limits = memory.get("worker_limits")
        if limits:
            peak += f" of a {_fmt_bytes(max(limits.values()))} limit"
        rows = [
            [
                "peak worker memory (RSS, max over "
                f"{len(workers):,} worker{'s' if len(workers) != 1 else ''})",
                peak,
            ]
        ]
    return rows + [["peak client memory (RSS)", _fmt_bytes(memory.get("client"))]]


def _summary_rows(est, *, data, method, params, elapsed, memory, timings=None):
    rows = [[k, v] for k, v in (data or {}).items()]
    rows.append(["method", f"{method or '?'} ({type(est).__name__})"])
    shown = params
    if shown is None:
        shown = est.get_params()
    rows.append(
        [
            "parameters",
            ", ".join(f"{k}={_fmt_value(v)}" for k, v in shown.items()) or "(defaults)",
        ]
    )
    fit_passes = getattr(est, "n_passes_", None)
    if timings is not None and fit_passes is not None:
        rows.append(
            [
                "passes over the data (whole run)",
                sections.job_passes_text(fit_passes, timings),
            ]
        )
    else:
        rows.append(
            [
                "passes over the data",
                "unknown" if fit_passes is None else _fmt_value(fit_passes),
            ]
        )
    if timings is not None:
        rows.append(["run time", sections.fmt_seconds(timings.total())])
    fit_time = elapsed
    if fit_time is None:
        fit_time = getattr(est, "fit_time_", None)
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
    keep = getattr(est, "features_kept_", None)
    if keep is not None and not keep.all():
        rows.append(
            ["features left out (all NaN)", f"{int(np.size(keep) - np.sum(keep)):,}"]
        )
    if memory:
        rows += _memory_rows(memory)
    return rows


def _draw_figures(est, *, X, scores_store, storage_options, labels=None):
    """``([(figure, png bytes)], [(stem, why not drawn)])``."""
    figures, skipped = [], []
    try:
        from ..analysis import plot

        plot._pyplot()
    except ImportError as err:
        return [], [("figures", str(err))]
    import matplotlib.pyplot as plt

    from .report_figures import report_figures

    for fig_spec in report_figures(
        est,
        X=X,
        scores_store=scores_store,
        storage_options=storage_options,
        labels=labels,
    ):
        t0 = time.perf_counter()
        try:
            fig = fig_spec.draw()
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=DPI)
            plt.close(fig)
        except Exception as err:  # a figure that fails must not fail the run
            logger.warning("report: figure %r not drawn: %s", fig_spec.stem, err)
            skipped.append((fig_spec.stem, f"{type(err).__name__}: {err}"))
            plt.close("all")
            continue
        figures.append((fig_spec, buf.getvalue()))
        logger.info(
            "report: %s.png drawn in %.2fs", fig_spec.stem, time.perf_counter() - t0
        )
    return figures, skipped


def _img(fig, png: bytes) -> str:
    """The figure embedded at its size in CSS pixels (drawn at 2× for sharp screens),
    with its alt text and its name (``data-figure``)."""
    data = base64.b64encode(png).decode("ascii")
    width = _png_width(png) // 2
    return (
        f'<img src="data:image/png;base64,{data}" alt="{html.escape(fig.alt)}" '
        f'data-figure="{html.escape(fig.stem)}" width="{width}">'
    )


def _png_width(png: bytes) -> int:
    """The width in pixels written in a PNG's header (IHDR)."""
    return int.from_bytes(png[16:20], "big")


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
            f"<figure>{_img(fig, png)}<figcaption>{html.escape(fig.caption)}"
            "</figcaption></figure>"
            for fig, png in figures
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
    labels=None,
    command: str | None = None,
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
        A written scores store; a scatter of the first two score columns, and their
        series against time when the scores have a time coordinate, are drawn from a
        sample of its rows.
    storage_options : dict, optional
        fsspec options for ``directory`` and ``scores_store``.
    timings : scalepca.app.timing.RunTimings, optional
        Time per stage and per pass (a table); the passes and time of the whole run in
        the summary.
    cluster : list of [label, value] rows, optional
        The cluster the run used (:func:`scalepca.app.report_sections.cluster_rows`).
    config : dict, optional
        The run's config, shown as YAML with credentials redacted.
    labels : (str, array of shape (n_samples,)), optional
        A label of every sample and its name, colouring the scatter of the scores
        (:func:`scalepca.app.report_figures.sample_labels`).
    command : str, optional
        The command line of the run, shown under the title.

    Returns
    -------
    str
        The path (or URL) of ``report.html``. Figures are embedded in it (``data:``
        URIs): the page is the only file written.
    """
    from ..io._fs import open_fs

    directory = str(directory).rstrip("/")
    fs, root = open_fs(directory, storage_options)
    fs.makedirs(root, exist_ok=True)
    figures, skipped = _draw_figures(
        est,
        X=X,
        scores_store=scores_store,
        storage_options=storage_options,
        labels=labels,
    )
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    from .._version import __version__

    head = title or f"scalepca run: {method or type(est).__name__}"
    ran = f"<p>Command: <code>{html.escape(command)}</code></p>" if command else ""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(head)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(head)}</h1>",
        ran,
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
                timings=timings,
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
        rows["data"] = ", ".join(as_list(path))
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
    command: list[str] | None = None,
    config_file: str | None = None,
) -> str:
    """The report of a ``scalepca run`` job, written to ``cfg['output']['store']``.

    ``cfg`` is the validated run config; ``timings`` the run's
    :class:`~scalepca.app.timing.RunTimings`; ``update``: rows saying what a
    ``run --update`` read (:meth:`scalepca.app.update.Update.report_rows`);
    ``command``: the run's arguments after ``scalepca``; ``config_file``: the config's
    path (its name is in the title). Returns the path of ``report.html``.
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
    scores_store = labels = None
    if scores in [str(w) for w in written]:  # a scatter of the scores, coloured
        from .report_figures import sample_labels

        scores_store, labels = scores, sample_labels(X, cfg["data"])
    params = dict(cfg["model"]["params"])
    method = cfg["model"]["method"]
    title = None
    if config_file:
        import os

        title = f"scalepca run {os.path.basename(config_file)}: {method}"

    elapsed = None
    if timings is not None:
        elapsed = timings.stages.get("fit")
    command_line = None
    if command is not None:
        command_line = shlex.join(["scalepca", *command])
    return write_report(
        est,
        root,
        data={**_data_rows(X, cfg["data"].get("path")), **(update or {})},
        method=method,
        params=params or None,
        elapsed=elapsed,
        memory=peak_memory(client),
        outputs=list(written),
        X=X,
        scores_store=scores_store,
        storage_options=out.get("storage_options"),
        timings=timings,
        cluster=sections.cluster_rows(client, cfg["cluster"].get("kind")),
        config=cfg,
        labels=labels,
        title=title,
        command=command_line,
    )
