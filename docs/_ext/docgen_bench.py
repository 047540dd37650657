"""The benchmarks page of the documentation: curated tables and charts (matplotlib)
of ``benchmarks/results/*.json``, written at build time by :func:`docgen.generate`
(split from ``docgen.py``, which holds the other generated pages).
"""

from __future__ import annotations

import json
from pathlib import Path

from docgen import DOCS, OUT, ROOT, _cell, _table

#: readable column headers for the keys the benchmark scripts write
_HEADERS = {
    "seconds": "time (s)",
    "time_s": "time (s)",
    "x read pass": "× read pass",
    "x floor": "× floor",
    "x floor, paired rounds": "× floor (paired rounds)",
    "eig rel err": "eigenvalue error",
    "eig rel err top 5": "eigenvalue error, top 5",
    "max_rel_err": "max. eigenvalue error",
    "mean_rel_err": "mean eigenvalue error",
    "rel_error": "relative error of L",
    "support_mismatch": "support errors",
    "peak worker GiB": "peak worker (GiB)",
    "GB/s per core": "GB/s per core",
    "s_per_million": "s per million rows",
    "n_chunks": "chunks",
    "x_dask_sum": "× dask sum",
    "x_read": "× read",
    "core_us_per_chunk": "µs per chunk (1 core)",
    "objective / sklearn": "objective / scikit-learn's",
    "x sklearn time": "× scikit-learn time",
    "zero share": "zero loadings",
    "limit/worker MB": "limit per worker (MB)",
    "peak worker MB": "peak worker (MB)",
    "spilled MB": "spilled (MB)",
    "data MB": "data (MB)",
    "n_by_m_bytes": "n × m features would take",
    "peak_cluster_bytes": "peak cluster memory",
    "light / dask": "light / dask",
    "x_svd_tol_none": "× time of svd_tol=None",
    "gave_up_after_seconds": "gave up after (s)",
}


def _num(key: str, v) -> str:
    """A measured value as a reader wants it: units, separators, a sensible
    precision."""
    import math

    if isinstance(v, bool):
        return "yes" if v else "no"
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if not isinstance(v, (int, float)):
        text = str(v)
        if key == "note" and text.startswith(
            "failed:"
        ):  # the exception, not its traceback
            text = ":".join(text.split(":")[:2])
        return _cell(text)
    k = key.lower()
    if "bytes" in k:
        return f"{v / 2**30:,.2f} GiB" if v >= 2**30 else f"{v / 2**20:,.0f} MiB"
    if "gb/s" in k:
        return f"{v:.3g}"
    if k.startswith("x ") or k.startswith("x_") or "/" in k or "speedup" in k:
        return f"{v:,.2f}×"
    if "err" in k or "diff" in k or "residual" in k:
        return "0" if v == 0 else f"{v:.1e}"
    if "share" in k or k in ("precision", "recall"):
        return f"{100 * v:.0f} %"
    if isinstance(v, int) or float(v).is_integer() and abs(v) >= 100:
        return f"{int(v):,}"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}" if abs(v) < 1 else f"{v:.2f}"


def _curated(rows: list[dict], columns: list[str], first: str = "method") -> str:
    """A table of ``columns`` of ``rows`` (those present), with readable headers."""
    cols = [first] + [c for c in columns if any(c in r for r in rows)]
    return _table(
        [_HEADERS.get(c, c.replace("_", " ")) for c in cols],
        [
            [_num(c, r.get(c)) if c != first else _cell(r.get(c, "")) for c in cols]
            for r in rows
        ],
    )


def _bench(name: str) -> dict:
    return json.loads((ROOT / "benchmarks" / "results" / f"{name}.json").read_text())


def _bar_chart(
    path: Path, labels, values, xlabel: str, *, ref: float | None = None, colors=None
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 0.42 * len(labels) + 0.9))
    y = range(len(labels))[::-1]
    ax.barh(list(y), values, color=colors or "#3b75af")
    ax.set_yticks(list(y), labels)
    for yi, v in zip(y, values, strict=True):
        ax.text(v, yi, f" {v:.2f}×", va="center", fontsize=8)
    if ref is not None:
        ax.axvline(ref, color="0.3", lw=0.8, ls="--")
    ax.set_xlabel(xlabel)
    ax.set_xlim(0, max(values) * 1.18)
    ax.spines[["top", "right"]].set_visible(False)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def benchmark_charts(out: Path) -> dict[str, Path]:
    """The benchmarks page's charts, drawn from benchmarks/results/*.json."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    charts = {}
    pca = [
        r
        for r in _bench("pca")["rows"]
        if r.get("x read pass") == r.get("x read pass") and "x read pass" in r
    ]
    charts["pca"] = out / "pca_vs_read.png"
    _bar_chart(
        charts["pca"],
        [r["method"] for r in pca],
        [r["x read pass"] for r in pca],
        "time of the fit / time of one bare read pass of the same store",
        ref=1.0,
    )

    floor = [
        r
        for r in _bench("pca_floor")["rows"] + _bench("kpca")["floor"]["rows"]
        if "passes" in r
    ]
    charts["floor"] = out / "floor.png"
    _bar_chart(
        charts["floor"],
        [f"{r['method']} ({r['store']})" for r in floor],
        [r["x floor"] for r in floor],
        "time of the fit / floor (read + one core's work per chunk × chunks / workers)",
        ref=1.0,
    )

    small = _bench("kpca")["small"]["rows"]
    fig, ax = plt.subplots(figsize=(7.5, 4))
    for prefix, marker in (
        ("scalepca Nystroem", "o"),
        ("scalepca RFF", "s"),
        ("sklearn Nystroem", "^"),
    ):
        pts = [r for r in small if r["method"].startswith(prefix)]
        ax.scatter(
            [r["time_s"] for r in pts],
            [100 * r["max_rel_err"] for r in pts],
            marker=marker,
            label=prefix.replace("Nystroem", "Nyström"),
        )
        for r in pts:
            ax.annotate(
                f"m={r['m']}",
                (r["time_s"], 100 * r["max_rel_err"]),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("time of the fit (s)")
    ax.set_ylabel("largest eigenvalue error (%)")
    ax.set_title("kernel PCA, n = 8,000: accuracy against time", fontsize=10)
    ax.legend(fontsize=8)
    charts["kpca"] = out / "kpca_accuracy.png"
    fig.savefig(charts["kpca"], dpi=110, bbox_inches="tight")
    plt.close(fig)

    scaling = _bench("kpca")["scaling"]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    n = [r["n"] / 1e6 for r in scaling["rows"]]
    ax.plot(n, [r["time_s"] for r in scaling["rows"]], "o-", label="measured")
    fit = scaling["linear_fit"]
    ax.plot(
        n,
        [fit["intercept_s"] + fit["s_per_million"] * x for x in n],
        "--",
        color="0.4",
        label=f"{fit['s_per_million']:.1f} s per million rows (R² {fit['r2']:.3f})",
    )
    ax.set_xlabel("rows (millions), 20 features, zarr store")
    ax.set_ylabel("time of the fit (s)")
    ax.set_title(f"kernel PCA Nyström, m = {scaling['m']}: linear in n", fontsize=10)
    ax.legend(fontsize=8)
    charts["kpca_scaling"] = out / "kpca_scaling.png"
    fig.savefig(charts["kpca_scaling"], dpi=110, bbox_inches="tight")
    plt.close(fig)
    return charts


def _provenance_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "_bench_provenance", ROOT / "benchmarks" / "_provenance.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _status(stems: list[str]) -> str:
    """A section's date and revision, and a warning when the code it measured
    changed."""
    prov = _provenance_module()
    lines, stale = [], {}
    for stem in stems:
        result = _bench(stem)
        rec = result.get("provenance", {})
        lines.append(
            f"`{stem}.json`: measured {rec.get('date', 'on an unknown date')}"
            + (f" at revision `{rec['revision'][:8]}`" if rec.get("revision") else "")
        )
        changed = prov.stale_sources(stem, result)
        if changed:
            stale[stem] = changed
    text = "*" + "; ".join(lines) + ".*\n"
    if stale:
        files = sorted({f for fs in stale.values() for f in fs})
        text += (
            "\n```{warning}\n**Stale.** The code these figures measured has changed since ("
            + ", ".join(f"`{f}`" for f in files)
            + "): they describe the code of "
            "their date, not today's, until `"
            + "`, `".join(sorted({prov.DEPENDS[s][0] for s in stale}))
            + "` is re-run.\n```\n"
        )
    return text


def status_table() -> str:
    """Every result file: when it was measured, at which revision, and whether it is
    current."""
    prov = _provenance_module()
    rows = []
    for path in sorted((ROOT / "benchmarks" / "results").glob("*.json")):
        result = json.loads(path.read_text())
        rec = result.get("provenance", {})
        changed = prov.stale_sources(path.stem, result)
        rows.append(
            [
                f"`{path.name}`",
                rec.get("date", "–"),
                f"`{rec['revision'][:8]}`" if rec.get("revision") else "–",
                "**stale**: " + ", ".join(f"`{f}`" for f in changed)
                if changed
                else "current",
            ]
        )
    return (
        "<!-- generated by docs/_ext/docgen_bench.py from benchmarks/results/*.json "
        "-->\n\n## When each result was measured\n\nEach result file records the "
        "revision it was measured at and a hash of the code of each file it depends "
        "on (its script and the solvers it times: `benchmarks/_provenance.py`); a "
        "result whose code has changed since is marked **stale**, with the files that "
        "changed, and the test suite fails when a result goes stale unnoticed. "
        "Results committed before they recorded it date from the commit that last "
        "changed their file.\n\n"
        + _table(["result", "measured", "revision", "status"], rows)
    )


def benchmark_page() -> str:
    """Curated tables and charts of benchmarks/results/*.json, for
    docs/benchmarks.md."""
    charts = benchmark_charts(OUT / "bench")

    def fig(key: str, caption: str) -> str:
        rel = charts[key].relative_to(DOCS).as_posix()
        return f"```{{figure}} {rel}\n:alt: {caption}\n:width: 90%\n\n{caption}\n```\n"

    pca, floor, kpca = _bench("pca"), _bench("pca_floor"), _bench("kpca")
    rpca, spca, counts = _bench("rpca"), _bench("spca"), _bench("sparse_counts")
    chunks, faults = _bench("chunks"), _bench("faults")
    p = ["<!-- generated by docs/_ext/docgen.py from benchmarks/results/*.json -->\n"]
    p += [
        f"## PCA of a {pca['gigabytes']:.1f} GB store\n",
        _status(["pca"]),
        f"{pca['n_samples']:,} × {pca['n_features']} float64 in row chunks of "
        f"{pca['chunk_rows']:,}, 2 workers × 1 thread (`benchmarks/pca.py`).\n",
        fig(
            "pca",
            "Each fit's time as a multiple of one bare read pass over the same store "
            "(dashed: the read pass itself).",
        ),
        _curated(
            pca["rows"],
            [
                "seconds",
                "x read pass",
                "passes",
                "eig rel err",
                "eig rel err top 5",
                "peak worker GiB",
                "note",
            ],
        ),
        "With 2 workers of 1 GiB each, twice the data:\n",
        _curated(
            pca["memory_rows"],
            [
                "workers",
                "read s",
                "PCA fit s",
                "x read pass",
                "peak worker GiB",
                "passes",
            ],
            first="store GB",
        ),
    ]
    p += [
        "## One-pass fits against the floor\n",
        _status(["pca_floor", "kpca"]),
        "The *floor* is the read pass plus one core's own work per chunk (its Gram, "
        "or its kernel features and Gram) times the chunks over the worker threads, "
        "measured in the same run: what the machine allows with no scheduling cost "
        "(`benchmarks/pca.py --floor`, `benchmarks/kpca.py`).\n",
        fig(
            "floor",
            "Each one-pass fit's time as a multiple of its floor, for a zstd and "
            "an uncompressed store (dashed: the floor).",
        ),
        _curated(
            floor["rows"] + kpca["floor"]["rows"],
            [
                "store",
                "seconds",
                "x read pass",
                "x floor",
                "x floor, paired rounds",
                "GB/s per core",
                "passes",
            ],
        ),
    ]
    p += [
        "## Kernel PCA\n",
        _status(["kpca"]),
        f"n = {kpca['small']['n']:,}, d = {kpca['small']['d']}, the "
        f"{kpca['small']['k']} "
        "leading eigenvalues against the exact kernel PCA's (`benchmarks/kpca.py`).\n",
        fig(
            "kpca",
            "Accuracy against time: scalepca's Nyström and random Fourier features "
            "and scikit-learn's Nystroem + PCA, for m features.",
        ),
        _curated(kpca["small"]["rows"], ["m", "time_s", "max_rel_err", "mean_rel_err"]),
        fig(
            "kpca_scaling",
            "Kernel PCA from a zarr store, 1 to 8 million rows: time "
            "grows linearly with n.",
        ),
        _curated(
            kpca["scaling"]["rows"],
            [
                "time_s",
                "s_per_million",
                "passes",
                "n_chunks",
                "peak_cluster_bytes",
                "n_by_m_bytes",
            ],
            first="n",
        ),
    ]
    small = rpca["small"]
    when = (
        f" Medians of {small['repeat']} interleaved rounds, {small['date']}: "
        f"`{small['command']}` (load average before and after in the JSON file)."
        if "date" in small
        else ""
    )
    p += [
        "## Robust PCA\n",
        _status(["rpca"]),
        "The random problems of Candès et al. (rank 0.05 n, 5 % of the entries "
        "corrupted), scalepca against an inexact ALM with a full NumPy SVD "
        f"(`benchmarks/rpca.py`).{when}\n",
        _curated(
            small["rows"],
            [
                "method",
                "seconds",
                "rel_error",
                "rank",
                "support_mismatch",
                "iterations",
                "passes",
                "speedup",
                "x_svd_tol_none",
                "gave_up_after_seconds",
            ],
            first="n",
        ),
    ]
    p += [
        "## Sparse PCA\n",
        _status(["spca"]),
        f"{spca['in_memory']['n_samples']:,} × {spca['in_memory']['n_features']} in "
        f"memory, "
        "against scikit-learn's `MiniBatchSparsePCA` (`benchmarks/spca.py`).\n",
        _curated(
            spca["in_memory"]["rows"],
            [
                "seconds",
                "x sklearn time",
                "objective / sklearn",
                "zero share",
                "recall",
            ],
        ),
    ]
    tall = counts["tall"]
    rows = [
        {"method": "bare read pass", "seconds": tall["read_s"]},
        {
            "method": "floor (read + one core's Gram per block)",
            "seconds": tall["floor_s"],
        },
    ]
    names = {
        "covariance_eigh": "scalepca PCA covariance_eigh",
        "randomized": "scalepca PCA randomized",
        "sparse_pca_minibatch_1_epoch": "scalepca SparsePCA minibatch, 1 epoch",
        "kernel_pca_nystroem_500": "scalepca KernelPCA Nyström, m = 500",
        "scanpy_dask_covariance_eigh": "scanpy PCA on dask (covariance_eigh)",
    }
    for key, label in names.items():
        r = tall.get(key)
        if r:
            rows.append(
                {
                    "method": label,
                    "seconds": r["seconds"],
                    "passes": r.get("passes"),
                    "x read": r.get("vs_read"),
                    "eig rel err": r.get("rel_err", r.get("rel_err_n_minus_1")),
                }
            )
    p += [
        "## Single-cell counts\n",
        _status(["sparse_counts"]),
        f"{tall['n']:,} cells × {tall['d']:,} genes at {100 * tall['density']:.0f} % "
        "non-zero, an AnnData zarr store read as CSR blocks "
        "(`benchmarks/sparse_counts.py`).\n",
        _curated(rows, ["seconds", "x read", "passes", "eig rel err"]),
    ]
    p += [
        "## Many small chunks\n",
        _status(["chunks"]),
        f"{chunks['store']['n_chunks']:,} chunks of {chunks['store']['chunks'][0]} × "
        f"{chunks['store']['chunks'][1]} (`benchmarks/chunks.py`).\n",
        _curated(
            chunks["results"],
            ["seconds", "tasks", "x_dask_sum", "x_read"],
            first="case",
        ),
    ]
    p += [
        "## Faults and memory pressure\n",
        _status(["faults"]),
        _table(
            ["what", "count"], [[k, _num(k, v)] for k, v in faults["summary"].items()]
        ),
        "\nFits with workers far smaller than the data (`benchmarks/faults.py`):\n",
        _curated(
            faults["memory"],
            ["data MB", "limit/worker MB", "seconds", "peak worker MB", "spilled MB"],
            first="fit",
        ),
    ]
    return "\n".join(p)
