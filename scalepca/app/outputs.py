"""The stores ``scalepca run`` writes, checked before the fit (by ``validate`` and by ``run``).

A run writes ``model.zarr``, ``scores.zarr``, … under ``output.store``. Each is written only
where it may be (:func:`scalepca.io._fs.check_replace`): a rerun replaces the complete outputs
of an earlier run unless ``output.overwrite: false``; nothing else at those paths (a folder of
other files, a data store, a store another program wrote) is ever replaced. No output may be,
contain or lie inside ``data.path``, and neither may a checkpoint (a ``scratch`` folder only
gets a fresh folder made inside it). Where the stores will be written is probed the way the
write happens (:func:`scalepca.io._fs.write_problem`).
"""

from __future__ import annotations

from ..io._fs import MODEL, OUTPUT, check_apart, check_replace, is_url, write_problem

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


def run_outputs(out: dict) -> list[tuple[str, str, str]]:
    """``(key, path, kind)`` of each store the ``output`` section asks for."""
    root = out["store"].rstrip("/")
    return [(key, f"{root}/{name}", kind) for key, (name, kind) in PARTS.items()
            if out.get(key)]


def output_problems(cfg: dict) -> tuple[list[str], list[str]]:
    """``(problems, notes)`` of the stores a run of ``cfg`` writes, in config words."""
    problems, notes = [], []
    out, data = cfg["output"], cfg["data"]["path"]
    so = out.get("storage_options")
    inputs = [("data.path", data)]
    written = []
    if out["store"] is not None:
        problem = write_problem(out["store"], so)
        if problem:
            problems.append(f"output.store {problem}")
        else:
            if is_url(out["store"]):
                notes.append(f"output.store {out['store']!r} is remote: it can be reached, but "
                             "write access shows only when the outputs are written")
            for key, path, kind in run_outputs(out):
                written.append((f"output.{key}", path))
                try:
                    check_apart([(f"output.{key}", path)], inputs)
                    # an update replaces its model and appends to its scores (checked by
                    # scalepca.app.update)
                    if not (out.get("update") and key in ("model", "scores")):
                        check_replace(path, kind, overwrite=out.get("overwrite", True),
                                      storage_options=so, flag=FLAG)
                except (ValueError, FileExistsError) as err:
                    problems.append(str(err))
    params = cfg["model"]["params"]
    for name in ("checkpoint", "scratch"):
        value = params.get(name)
        if not isinstance(value, str):
            continue
        problem = write_problem(value)
        if problem:
            problems.append(f"model.{name} {problem}")
            continue
        if name == "scratch":  # a fresh folder is made inside it: nothing there is replaced
            continue
        from ..io._checkpoint import check_checkpoint_target

        try:
            check_apart([("model.checkpoint", value)], inputs + written)
            check_checkpoint_target(value, "model.checkpoint")
        except (ValueError, FileExistsError) as err:
            problems.append(str(err))
    return problems, notes


def transform_output_problem(out: str, *, model: str, data: str, overwrite: bool,
                             storage_options=None) -> str | None:
    """Why ``scalepca transform`` cannot write its scores at ``out`` (``--out``), or None."""
    try:
        check_apart([("--out", out)], [("the model", model), ("the data", data)])
        problem = write_problem(out, storage_options)
        if problem:
            return f"--out {problem}"
        check_replace(out, OUTPUT, overwrite=overwrite, storage_options=storage_options,
                      flag="--overwrite")
    except (ValueError, FileExistsError) as err:
        return str(err)
    return None
