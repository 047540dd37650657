"""The stores ``scalepca run`` writes, checked before the fit (by ``validate`` and by
``run``).

A run writes ``model.zarr``, ``scores.zarr``, … under ``output.store``. Each is
written only where it may be (:func:`scalepca.io._fs.check_replace`): a rerun
replaces the complete outputs of an earlier run unless ``output.overwrite: false``;
nothing else at those paths (a folder of other files, a data store, a store another
program wrote) is ever replaced. No output may be, contain or lie inside
``data.path``, and neither may a checkpoint (a ``scratch`` folder only gets a fresh
folder made inside it). Where the stores will be written is probed the way the write
happens (:func:`scalepca.io._fs.write_problem`).
"""

from __future__ import annotations

from .._schema import as_list
from ..io._fs import (
    MODEL,
    OUTPUT,
    check_apart,
    check_replace,
    is_url,
    open_fs,
    write_problem,
)

#: ``output`` key → (store written under ``output.store``, its kind)
PARTS = {
    "model": ("model.zarr", MODEL),
    "scores": ("scores.zarr", OUTPUT),
    "reconstruction": ("reconstruction.zarr", OUTPUT),
    "low_rank": ("low_rank.zarr", OUTPUT),
    "sparse": ("sparse.zarr", OUTPUT),
}

#: how the config says "replace earlier outputs"
FLAG = "output.overwrite: true"
#: ``output.plink``'s files under ``output.store``: this prefix and PLINK's endings
PLINK_PREFIX = "pca"


def plink_files(prefix: str) -> list[str]:
    """The ``.eigenvec`` and ``.eigenval`` paths of ``prefix`` (as ``plink2 --out``)."""
    from ..io._bed import PLINK_ENDINGS

    return [prefix + end for end in PLINK_ENDINGS]


def plink_file_problem(
    path: str, *, overwrite: bool, flag: str, storage_options=None
) -> str | None:
    """Why a PLINK text file cannot be written at ``path``: a folder there, or a file
    that ``overwrite`` does not allow to replace (said with ``flag``); None if it
    can."""
    fs, root = open_fs(path, storage_options)
    if fs.isdir(root):
        return f"{path!r} is a folder; scalepca never replaces it with a PLINK file"
    if fs.exists(root) and not overwrite:
        return f"{path!r} exists; set {flag} to replace it"
    return None


def _plink_problems(cfg: dict) -> list[str]:
    """What stops ``output.plink``: data that are not a .bed, a model that does not fit
    PLINK's PCA, an update, or the files' places."""
    from ..io._bed import plink_problem
    from ..preprocessing._genotype import GENOTYPE
    from .config import data_kind

    out, dcfg, params = cfg["output"], cfg["data"], cfg["model"]["params"]
    if data_kind(dcfg) != "bed":
        return [
            "output.plink writes PLINK's .eigenvec and .eigenval of a PLINK .bed; "
            f"data.path {dcfg['path']!r} is not one"
        ]
    standardize = params.get("standardize")
    problem = plink_problem(
        standardize == GENOTYPE, bool(params.get("whiten")), standardize
    )
    if problem:
        problem = problem.replace("standardize=", "model.standardize: ")
        return [f"output.plink: {problem}"]
    if out.get("update"):
        return [
            "output.plink is not written by an update (run --update); run without it"
        ]
    prefix = f"{out['store'].rstrip('/')}/{PLINK_PREFIX}"
    found = (
        plink_file_problem(
            path,
            overwrite=out.get("overwrite", True),
            flag=FLAG,
            storage_options=out.get("storage_options"),
        )
        for path in plink_files(prefix)
    )
    return [f"output.plink: {problem}" for problem in found if problem]


def run_outputs(out: dict) -> list[tuple[str, str, str]]:
    """``(key, path, kind)`` of each store the ``output`` section asks for."""
    root = out["store"].rstrip("/")
    return [
        (key, f"{root}/{name}", kind)
        for key, (name, kind) in PARTS.items()
        if out.get(key)
    ]


def output_problems(cfg: dict) -> tuple[list[str], list[str]]:
    """``(problems, notes)`` of the stores a run of ``cfg`` writes, in config words."""
    problems, notes = [], []
    out, data = cfg["output"], cfg["data"]["path"]
    so = out.get("storage_options")
    inputs = [("data.path", p) for p in as_list(data)]
    written = []
    if out["store"] is not None:
        problem = write_problem(out["store"], so)
        if problem:
            problems.append(f"output.store {problem}")
        else:
            if is_url(out["store"]):
                notes.append(
                    f"output.store {out['store']!r} is remote: it can be reached, but "
                    "write access shows only when the outputs are written"
                )
            for key, path, kind in run_outputs(out):
                written.append((f"output.{key}", path))
                try:
                    check_apart([(f"output.{key}", path)], inputs)
                    # an update replaces its model and appends to its scores (checked by
                    # scalepca.app.update)
                    if not (out.get("update") and key in ("model", "scores")):
                        check_replace(
                            path,
                            kind,
                            overwrite=out.get("overwrite", True),
                            storage_options=so,
                            flag=FLAG,
                        )
                except (ValueError, FileExistsError) as err:
                    problems.append(str(err))
        if out.get("plink"):
            problems += _plink_problems(cfg)
    params = cfg["model"]["params"]
    for name in ("checkpoint", "scratch"):
        value = params.get(name)
        if not isinstance(value, str):
            continue
        problem = write_problem(value)
        if problem:
            problems.append(f"model.{name} {problem}")
            continue
        # a fresh folder is made inside it: nothing there is replaced
        if name == "scratch":
            continue
        from ..io._checkpoint import check_checkpoint_target

        try:
            check_apart([("model.checkpoint", value)], inputs + written)
            check_checkpoint_target(value, "model.checkpoint")
        except (ValueError, FileExistsError) as err:
            problems.append(str(err))
    return problems, notes


def transform_output_problem(
    out: str, *, model: str, data, overwrite: bool, storage_options=None
) -> str | None:
    """Why ``scalepca transform`` cannot write its scores at ``out`` (``--out``), or
    None. ``data``: a path, or a list of them (PLINK .bed files read as one)."""
    try:
        check_apart(
            [("--out", out)],
            [("the model", model), *(("the data", p) for p in as_list(data))],
        )
        problem = write_problem(out, storage_options)
        if problem:
            return f"--out {problem}"
        check_replace(
            out,
            OUTPUT,
            overwrite=overwrite,
            storage_options=storage_options,
            flag="--overwrite",
        )
    except (ValueError, FileExistsError) as err:
        return str(err)
    return None
