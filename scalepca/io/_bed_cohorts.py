"""Several PLINK ``.bed`` files read as one (sample × SNP) matrix: a cohort that arrives
in batches, each batch genotyped on the same SNPs.

The files' rows (samples) are appended in the order of the list; each file is read
lazily as :func:`~scalepca.io._bed.open_bed_matrix` reads one, so a task still reads a
block of one file. The files must hold the same SNPs in the same order (their ``.bim``
lines agree on chromosome, id, position and alleles: the counts of one file count the
same allele as the others'); a sample must not be in two files. Both are checked on the
small ``.bim`` and ``.fam`` files, on the client, before anything is read from a
``.bed``.
"""

from __future__ import annotations

import os

import numpy as np
import xarray as xr

from ._bed import SAMPLE_DIM, is_bed_path, keep_mask, open_bed_matrix


def is_bed_list(source) -> bool:
    """Whether ``source`` is a list (or tuple) of ``.bed`` paths, read as one matrix."""
    return (
        isinstance(source, (list, tuple))
        and len(source) > 0
        and all(is_bed_path(p) for p in source)
    )


def check_bed_list(source) -> list[str]:
    """The paths of a list of ``.bed`` files, or ``ValueError`` saying what else it
    holds."""
    if not isinstance(source, (list, tuple)) or not source:
        raise ValueError("a list of PLINK .bed paths needs at least one path")
    others = [p for p in source if not is_bed_path(p)]
    if others:
        raise ValueError(
            f"a list of paths is read as one matrix for PLINK .bed files only; "
            f"{others[0]!r} is not a .bed file"
        )
    return [os.fspath(p) for p in source]


def _bim_lines(path: str) -> list[tuple]:
    """``(chromosome, id, position, allele 1, allele 2)`` of each SNP of the ``.bim``
    next to the ``.bed`` at ``path`` (the genetic distance, column 3, is not
    compared)."""
    bim = os.path.splitext(path)[0] + ".bim"
    with open(bim) as f:
        rows = [line.split() for line in f if line.strip()]
    return [(r[0], r[1], r[3], r[4], r[5]) if len(r) >= 6 else tuple(r) for r in rows]


def _snp_text(snp: tuple) -> str:
    chrom, sid, pos, *alleles = (*snp, "", "", "", "", "")[:5]
    return f"{sid} (chromosome {chrom}, position {pos}, alleles {'/'.join(alleles)})"


def check_same_snps(paths: list[str]) -> None:
    """Refuse ``.bed`` files whose ``.bim`` differ, naming the files and the first SNP
    that differs (or the SNP counts)."""
    first = _bim_lines(paths[0])
    for path in paths[1:]:
        other = _bim_lines(path)
        pairs = enumerate(zip(first, other, strict=False))
        where = next((j for j, (a, b) in pairs if a != b), None)
        if where is None and len(first) == len(other):
            continue
        head = (
            f"a list of .bed files is one matrix, their samples appended, so the "
            f"files need the same SNPs in the same order: {path!r} "
        )
        if where is None:
            raise ValueError(
                head + f"has {len(other):,} SNPs and {paths[0]!r} "
                f"{len(first):,} (the first {min(len(first), len(other)):,} agree)"
            )
        raise ValueError(
            head + f"has SNP {where + 1:,} {_snp_text(other[where])} where "
            f"{paths[0]!r} has {_snp_text(first[where])}"
        )


def _check_distinct_samples(parts: list[xr.DataArray], paths: list[str]) -> None:
    seen: dict[tuple, str] = {}
    for arr, path in zip(parts, paths, strict=True):
        for fid, iid in zip(
            arr["fid"].values.tolist(), arr[SAMPLE_DIM].values.tolist(), strict=True
        ):
            if (fid, iid) in seen:
                raise ValueError(
                    f"sample {fid} {iid} (FID IID) is in {seen[(fid, iid)]!r} "
                    f"and in {path!r}: each sample of a list of .bed files "
                    "must be in one file only"
                )
            seen[(fid, iid)] = path


def open_bed_list(paths, *, keep=None, **options) -> xr.DataArray:
    """The ``.bed`` files ``paths`` as one lazy (sample × SNP) DataArray, their samples
    in the order of the list (``options``: those of
    :func:`~scalepca.io._bed.open_bed_matrix`). ``keep``: a keep file naming samples of
    any of the files. Reads the ``.bim`` and ``.fam`` files on the client."""
    paths = check_bed_list(paths)
    from ._bed import check_bed

    for path in paths:
        check_bed(path)
    check_same_snps(paths)
    parts = [open_bed_matrix(path, **options) for path in paths]
    _check_distinct_samples(parts, paths)
    out = (
        parts[0] if len(parts) == 1 else xr.concat(parts, dim=SAMPLE_DIM, join="exact")
    )
    if keep is not None:
        out = out.isel(
            {
                SAMPLE_DIM: np.flatnonzero(
                    keep_mask(keep, out["fid"].values, out[SAMPLE_DIM].values)
                )
            }
        )
    return out
