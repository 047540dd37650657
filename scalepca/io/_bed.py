"""PLINK ``.bed`` genotypes (with their ``.bim`` and ``.fam``) as a lazy (sample × SNP)
matrix.

A ``.bed`` file holds allele counts 0, 1, 2 (or missing) packed four to a byte, SNP by
SNP. It is read through ``bed-reader`` (the optional ``genotypes`` extra): each dask
task opens the file and reads its own block with a ranged read
(``open_bed(...).read(index=...)``), so no task ever holds more than its block and the
file is never read whole by one worker. Missing calls are NaN. The ``.fam`` gives the
sample ids (the ``sample`` coordinate, and the family ids, where simulated populations
are written, as ``fid``), the ``.bim`` the SNP ids (the ``snp`` coordinate: a fitted
model's ``feature_names_in_``); both are small text files read on the client.

PCA of genotypes standardises each SNP by its allele frequency:
``PCA(standardize="genotype")`` (see :mod:`scalepca.preprocessing._genotype`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from pathlib import Path

import dask.array as da
import numpy as np
import xarray as xr

#: the first three bytes of a SNP-major PLINK .bed file
BED_MAGIC = b"\x6c\x1b\x01"
#: dims of the matrix: samples (rows), SNPs (columns)
SAMPLE_DIM, SNP_DIM = "sample", "snp"
#: float bytes one task reads by default (``open_matrix``'s ``task_size``)
DEFAULT_TASK_BYTES = 128 * 2**20


def is_bed_path(path) -> bool:
    """Whether ``path`` names a PLINK ``.bed`` file (by its ending)."""
    return isinstance(path, (str, os.PathLike)) and os.fspath(path).lower().endswith(
        ".bed"
    )


def _require_bed_reader():
    try:
        import bed_reader
    except (
        ImportError
    ):  # pragma: no cover - the extra is installed in the test environment
        raise ImportError(
            "reading PLINK .bed files needs bed-reader: pip install "
            "'scalepca[genotypes]'"
        ) from None
    return bed_reader


@contextlib.contextmanager
def _root_logger_kept():
    """Leave the root logger as the user has it while bed-reader reads a .fam or .bim.

    bed-reader announces those reads with the module-level ``logging.info``, which
    calls ``logging.basicConfig()`` when root has no handler: root would keep a stderr
    handler, and every INFO record of distributed's loggers (which propagate) would be
    printed. A stand-in handler for the read keeps ``logging.info`` from configuring
    root; a root the user configured is not touched (their handlers get the record).
    """
    root = logging.getLogger()
    stand_in = None if root.handlers else logging.NullHandler()
    if stand_in is not None:
        root.addHandler(stand_in)
    try:
        yield
    finally:
        if stand_in is not None:
            root.removeHandler(stand_in)


def _companions(path: Path) -> tuple[Path, Path]:
    """The ``.fam`` and ``.bim`` next to ``path``; ``FileNotFoundError`` naming a
    missing one."""
    fam, bim = path.with_suffix(".fam"), path.with_suffix(".bim")
    for file, holds in ((fam, "the samples"), (bim, "the SNPs")):
        if not file.exists():
            raise FileNotFoundError(
                f"no {file.suffix} file at {os.fspath(file)!r}: a PLINK .bed "
                f"needs its {file.suffix} ({holds}) next to it"
            )
    return fam, bim


def _count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


def check_bed(path) -> tuple[int, int]:
    """``(n_samples, n_snps)`` of the .bed at ``path`` after checking the file set.

    Raises ``FileNotFoundError`` for a missing .bed/.fam/.bim and ``ValueError`` for
    a file that is not a SNP-major PLINK .bed or whose size disagrees with its .fam
    and .bim.
    """
    path = Path(os.fspath(path))
    if not path.is_file():
        raise FileNotFoundError(f"no PLINK .bed file at {os.fspath(path)!r}")
    with open(path, "rb") as f:
        head = f.read(3)
    if head != BED_MAGIC:
        raise ValueError(
            f"{os.fspath(path)!r} is not a SNP-major PLINK .bed file (it does not "
            "start with the .bed magic bytes 6c 1b 01)"
        )
    fam, bim = _companions(path)
    n, d = _count_lines(fam), _count_lines(bim)
    expected = 3 + -(-n // 4) * d
    size = path.stat().st_size
    if size != expected:
        raise ValueError(
            f"{os.fspath(path)!r} has {size} bytes, but its .fam ({n} samples) and "
            f".bim ({d} SNPs) make {expected}: the three files do not belong "
            "together, or the .bed is truncated"
        )
    return n, d


def _read_block(rows, *, path: str, n: int, d: int, snps, out_dtype):
    """One block of genotypes by a ranged read of its samples ``rows`` (a column of .fam
    indices) and the SNPs ``snps`` (runs ``(start, stop)`` of .bim indices; missing
    calls NaN)."""
    import bed_reader

    rows = rows[:, 0]
    if rows.size and rows[-1] - rows[0] == rows.size - 1:  # contiguous: a slice
        rows = np.s_[int(rows[0]) : int(rows[-1]) + 1]
    if len(snps) == 1:  # one range: a slice
        cols = np.s_[snps[0][0] : snps[0][1]]
    else:
        cols = np.concatenate([np.arange(a, b) for a, b in snps])
    with bed_reader.open_bed(path, iid_count=n, sid_count=d, num_threads=1) as bed:
        return bed.read(index=(rows, cols), dtype=out_dtype, order="C", num_threads=1)


def bed_chunks(
    n: int, d: int, itemsize: int, rows=None, task_size: int = DEFAULT_TASK_BYTES
) -> tuple:
    """Dask chunks of the (n × d) matrix: whole rows (the SNPs of a sample are one
    feature vector, as for every matrix ``open_matrix`` makes), ``rows`` samples per
    block, else a multiple of 4 samples (whole bytes of each SNP) making about
    ``task_size`` bytes of floats."""
    if rows is None:
        rows = max(4, (int(task_size) // max(1, itemsize * d)) // 4 * 4)
    return da.core.normalize_chunks((rows, -1), (n, d))


class BedOptionError(ValueError):
    """A sample or SNP subset of a .bed that cannot be taken: ``key`` (the option,
    ``keep`` or ``exclude_ranges``) and ``detail`` (the rest of the sentence), so that
    an application names the option in its own words."""

    def __init__(self, key: str, detail: str):
        self.key, self.detail = key, detail
        super().__init__(f"{key}: {detail}")


def _listed(items, most: int = 3) -> str:
    items = list(items)
    more = f" and {len(items) - most} more" if len(items) > most else ""
    return ", ".join(items[:most]) + more


def keep_mask(keep, fid: np.ndarray, iid: np.ndarray) -> np.ndarray:
    """The samples of the .fam (``fid``, ``iid``) that the keep file ``keep`` names, as
    PLINK's ``--keep`` reads it: one sample a line, ``FID IID`` (more columns ignored,
    so a .fam is a keep file too) or ``IID`` alone; lines starting with ``#`` are
    headers. The samples keep the .fam's order. ``BedOptionError`` for a missing file,
    one naming no sample, or samples the .fam does not have."""
    if not isinstance(keep, (str, os.PathLike)):
        raise BedOptionError(
            "keep",
            f"expected the path of a keep file (FID IID per line), "
            f"got {type(keep).__name__}",
        )
    where = os.fspath(keep)
    try:
        with open(where) as f:
            lines = [line.split() for line in f if line.strip() and line[0] != "#"]
    except OSError as err:
        raise BedOptionError(
            "keep", f"cannot read the keep file {where!r} ({err.strerror or err})"
        ) from None
    if not lines:
        raise BedOptionError("keep", f"the keep file {where!r} names no sample")
    known = set(zip(fid.tolist(), iid.tolist(), strict=True))
    known_iid = set(iid.tolist())
    pairs, iids, unknown = set(), set(), []
    for tokens in lines:
        if len(tokens) == 1:
            iids.add(tokens[0])
            if tokens[0] not in known_iid:
                unknown.append(tokens[0])
        else:
            pairs.add((tokens[0], tokens[1]))
            if (tokens[0], tokens[1]) not in known:
                unknown.append(f"{tokens[0]} {tokens[1]}")
    if unknown:
        raise BedOptionError(
            "keep",
            f"the keep file {where!r} names {len(unknown)} sample(s) "
            f"the .fam does not have ({_listed(unknown)})",
        )
    return np.array(
        [
            (f, i) in pairs or i in iids
            for f, i in zip(fid.tolist(), iid.tolist(), strict=True)
        ],
        dtype=bool,
    )


def _chromosome(code) -> str:
    """A chromosome code as the .bim and a range compare it (``chr6`` is ``6``)."""
    code = str(code).strip()
    return code[3:] if code.lower().startswith("chr") else code


def parse_range(text) -> tuple[str, int, int]:
    """``(chromosome, first, last)`` of a range ``"6:28,477,797-33,448,354"`` (base
    pairs, both ends included, as PLINK's ``--exclude range``) or ``"6"`` (the whole
    chromosome)."""
    import re

    found = (
        re.fullmatch(r"\s*([^:\s]+)\s*(?::\s*([\d,]+)\s*-\s*([\d,]+))?\s*", str(text))
        if isinstance(text, str)
        else None
    )
    if found is None:
        raise BedOptionError(
            "exclude_ranges",
            f"{text!r} is not a range: give "
            "'CHROMOSOME:FIRST-LAST' (base pairs, e.g. "
            "'6:28477797-33448354') or 'CHROMOSOME'",
        )
    chrom, first, last = found.groups()
    if first is None:
        return _chromosome(chrom), 0, np.iinfo(np.int64).max
    first, last = int(first.replace(",", "")), int(last.replace(",", ""))
    if first > last:
        raise BedOptionError("exclude_ranges", f"{text!r} ends before it starts")
    return _chromosome(chrom), first, last


def range_mask(ranges, chromosome: np.ndarray, position: np.ndarray) -> np.ndarray:
    """The SNPs of the .bim (``chromosome``, ``position``) outside every range of
    ``ranges`` (see :func:`parse_range`); ``BedOptionError`` for a range on a chromosome
    the .bim does not have, or ranges that leave no SNP."""
    if isinstance(ranges, str) or not isinstance(ranges, (list, tuple)):
        raise BedOptionError(
            "exclude_ranges",
            f"expected a list of ranges such as "
            f"['6:28477797-33448354'], got {ranges!r}",
        )
    chroms = np.array([_chromosome(c) for c in chromosome.tolist()], dtype=object)
    have = list(dict.fromkeys(chroms.tolist()))
    keep = np.ones(len(chroms), dtype=bool)
    for text in ranges:
        chrom, first, last = parse_range(text)
        if chrom not in have:
            raise BedOptionError(
                "exclude_ranges",
                f"{text!r} names chromosome {chrom}, which "
                f"the .bim does not have (it has "
                f"{_listed(have, 25)})",
            )
        keep &= ~((chroms == chrom) & (position >= first) & (position <= last))
    if not keep.any():
        raise BedOptionError(
            "exclude_ranges", "the ranges exclude every SNP of the .bim"
        )
    return keep


def _runs(mask: np.ndarray) -> tuple:
    """``((start, stop), ...)`` of the runs of True in ``mask``: a few for excluded
    ranges, so every task's graph stays small."""
    edges = np.flatnonzero(np.diff(np.r_[0, mask.astype(np.int8), 0]))
    return tuple(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


def open_bed_matrix(
    path,
    *,
    rows=None,
    dtype="float32",
    task_size: int | None = DEFAULT_TASK_BYTES,
    keep=None,
    exclude_ranges=None,
) -> xr.DataArray:
    """The genotypes at ``path`` as a lazy (sample × SNP) DataArray of allele counts.

    ``rows``: samples per block (default: about ``task_size`` bytes of floats per
    block). ``dtype``: float32 (default) or float64; missing calls are NaN. The
    ``sample`` coordinate holds the .fam sample ids (``fid`` the family ids), ``snp``
    the .bim SNP ids. ``keep``: a keep file (PLINK's ``--keep``: ``FID IID`` per
    line, or a .fam): only its samples are read (:func:`keep_mask`).
    ``exclude_ranges``: base-pair ranges of the .bim whose SNPs are left out, e.g.
    ``["6:28477797-33448354"]`` (the MHC on GRCh37), or whole chromosomes
    (:func:`range_mask`). Each task reads only its samples and SNPs. Reads the .fam
    and .bim (small text) on the client and nothing of the .bed but its first three
    bytes."""
    bed_reader = _require_bed_reader()
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise ValueError(
            f"dtype={dtype}: genotypes are read as "
            "float32 or float64 (missing calls are NaN)"
        )
    n, d = check_bed(path)
    spath = os.path.abspath(os.fspath(path))
    with (
        _root_logger_kept(),
        bed_reader.open_bed(spath, iid_count=n, sid_count=d) as bed,
    ):
        iid, fid, sid = (np.asarray(a, dtype=str) for a in (bed.iid, bed.fid, bed.sid))
        snps = np.ones(d, dtype=bool)
        if exclude_ranges is not None:
            snps = range_mask(exclude_ranges, bed.chromosome, bed.bp_position)
    samples = np.arange(n)
    if keep is not None:
        samples = np.flatnonzero(keep_mask(keep, fid, iid))
    from ._coalesce import _task_bytes

    blocks = bed_chunks(
        len(samples),
        int(snps.sum()),
        dtype.itemsize,
        rows,
        _task_bytes(task_size) or DEFAULT_TASK_BYTES,
    )
    runs = _runs(snps)
    token = da.core.tokenize(
        spath, os.stat(spath).st_mtime_ns, blocks, dtype, samples, runs
    )
    at = da.from_array(
        samples[:, None], chunks=(blocks[0], 1), name=f"bed-rows-{token}"
    )
    arr = da.map_blocks(
        _read_block,
        at,
        chunks=blocks,
        dtype=dtype,
        meta=np.empty((0, 0), dtype=dtype),
        path=spath,
        n=n,
        d=d,
        snps=runs,
        out_dtype=dtype,
        name=f"read-bed-{token}",
    )
    _LAYOUTS[arr.name] = _BedLayout(spath, n, d, samples, runs, blocks[0])
    return xr.DataArray(
        arr,
        dims=(SAMPLE_DIM, SNP_DIM),
        name="genotypes",
        coords={
            SAMPLE_DIM: iid[samples],
            "fid": (SAMPLE_DIM, fid[samples]),
            SNP_DIM: sid[snps],
        },
    )


# -- the packed bytes of a matrix open_bed_matrix made ---------------------------------
@dataclasses.dataclass(frozen=True)
class _BedLayout:
    path: str
    n: int  # samples of the file
    d: int  # SNPs of the file
    samples: np.ndarray  # the file's samples that are the matrix's rows
    runs: tuple  # the file's SNPs that are the matrix's columns, as runs
    rows: tuple  # the matrix's rows per block


#: the layout of each matrix :func:`open_bed_matrix` made, by its dask name (which
#: ``persist`` and pickling keep); a few hundred bytes and the samples' indices each
_LAYOUTS: dict[str, _BedLayout] = {}


def _read_packed(lo: int, hi: int, *, path: str, n: int, d: int, snps) -> np.ndarray:
    """The bytes ``lo:hi`` of each SNP ``snps`` (a slice or indices of the file's SNPs):
    ``(len(snps), hi - lo)`` uint8, the packed calls of the samples ``4 lo`` to
    ``4 hi − 1``."""
    mm = np.memmap(
        path, dtype=np.uint8, mode="r", offset=len(BED_MAGIC), shape=(d, -(-n // 4))
    )
    return np.ascontiguousarray(mm[snps, lo:hi])


def packed_blocks(X, columns: np.ndarray | None = None):
    """The row blocks of ``X`` (a dask array :func:`open_bed_matrix` made, or one
    persisted from it) as the packed bytes of the .bed: ``(blocks, rows)``, ``blocks`` a
    ``Delayed`` per row block giving the ``(d, nbytes)`` uint8 bytes of its samples
    for each of the matrix's columns kept by ``columns`` (a boolean mask, None: all),
    ``rows`` per block the positions of its samples in those bytes (2-bit entries, as
    :mod:`scalepca.linalg.packed` reads them). None for any other array or chunking."""
    import dask

    layout = _LAYOUTS.get(getattr(X, "name", None))
    if layout is None or X.chunks[0] != layout.rows or len(X.chunks[1]) != 1:
        return None
    snps = np.concatenate([np.arange(a, b) for a, b in layout.runs])
    if columns is not None:
        snps = snps[np.asarray(columns, dtype=bool)]
    if snps.size and snps[-1] - snps[0] == snps.size - 1:  # contiguous: a slice
        snps = np.s_[int(snps[0]) : int(snps[-1]) + 1]
    ends = np.cumsum((0, *layout.rows))
    blocks, rows = [], []
    for a, b in zip(ends[:-1], ends[1:], strict=True):
        mine = layout.samples[a:b]
        lo, hi = int(mine.min()) // 4, int(mine.max()) // 4 + 1
        blocks.append(
            dask.delayed(_read_packed, pure=True)(
                lo, hi, path=layout.path, n=layout.n, d=layout.d, snps=snps
            )
        )
        rows.append(mine - 4 * lo)
    return blocks, rows


# -- PLINK 2's --pca files -------------------------------------------------------------
#: the endings of the two files, as ``plink2 --pca`` writes them after ``--out``
PLINK_ENDINGS = (".eigenvec", ".eigenval")


def plink_problem(by_frequency: bool, whiten: bool, standardize=None) -> str | None:
    """Why a model's scores cannot be written as PLINK's ``.eigenvec``/``.eigenval``, or
    None.

    PLINK's PCA is the eigen-decomposition of the genomic relationship matrix of the
    genotypes standardised by allele frequency: only a model that standardises them so
    (``by_frequency``; ``standardize="genotype"``, whose value ``standardize`` the
    message names) fits the same matrix, and whitened scores are not its
    eigenvectors."""
    if not by_frequency:
        return (
            "PLINK's .eigenvec and .eigenval hold the PCA of "
            "genotypes standardised by allele frequency; the model "
            f"has standardize={standardize!r}, not 'genotype'"
        )
    if whiten:
        return "whitened scores are not PLINK's eigenvectors; fit without whiten"
    return None


def plink_model_problem(est) -> str | None:
    """:func:`plink_problem` of a fitted model: standardised by allele frequency when
    it has them (``allele_frequency_``)."""
    return plink_problem(
        hasattr(est, "allele_frequency_"),
        getattr(est, "whiten", False),
        getattr(est, "standardize", None),
    )


def plink_pca(est, scores):
    """``(eigenvectors, eigenvalues)`` in PLINK 2's convention from a model fitted with
    ``standardize="genotype"`` and its (lazy) ``scores``.

    ``plink2 --pca`` writes the unit-length eigenvectors of the relationship matrix ``Z
    Zᵀ / M`` (``Z`` the n × M standardised genotypes of its M SNPs) and its eigenvalues:
    with ``Z = U S Vᵀ``, ``U`` and ``S² / M``. The model's scores are ``Z V = U S``, so
    the eigenvectors are the scores over the singular values and the eigenvalues the
    squared singular values over the SNPs fitted (those left out, monomorphic or
    uncalled, not counted). Scores of new samples are divided by the same singular
    values: their projection in the fitted samples' units."""
    problem = plink_model_problem(est)
    if problem:
        raise ValueError(problem)
    s = np.asarray(est.singular_values_, dtype=np.float64)
    used = int(np.isfinite(np.asarray(est.components_)[0]).sum())
    return scores / s, s**2 / used


def write_plink_scores(
    prefix: str, est, X, scores, *, storage_options=None
) -> list[str]:
    """The model ``est``'s ``scores`` of the .bed matrix ``X`` as PLINK 2's files at
    ``prefix`` (:func:`plink_pca`, written by :func:`write_plink_pca` with the
    samples' ids of ``X``). Returns the two paths."""
    vectors, values = plink_pca(est, scores)
    return write_plink_pca(
        prefix,
        X["fid"].values,
        X["sample"].values,
        vectors,
        values,
        storage_options=storage_options,
    )


def write_plink_pca(
    prefix: str, fid, iid, vectors, values, *, storage_options=None
) -> list[str]:
    """Write ``prefix.eigenvec`` (the header ``#FID IID PC1 …``, then one sample a line,
    tab-separated, as ``plink2 --pca`` writes it for a .fam) and ``prefix.eigenval``
    (one eigenvalue a line). ``vectors``: a lazy (sample × k) array, computed one row
    block at a time; ``fid``/``iid`` the samples' ids. Returns the two paths."""
    import dask
    import fsspec

    from ._fs import with_store_defaults

    so = with_store_defaults(prefix, storage_options) or {}
    vec, val = (prefix + end for end in PLINK_ENDINGS)
    data = vectors.data if hasattr(vectors, "dims") else vectors
    data = data if isinstance(data, da.Array) else da.from_array(np.asarray(data))
    data = data.rechunk({1: -1})
    k = data.shape[1]
    fid, iid = np.asarray(fid, dtype=str), np.asarray(iid, dtype=str)
    with fsspec.open(vec, "w", **so) as f:
        f.write("\t".join(["#FID", "IID", *(f"PC{i + 1}" for i in range(k))]) + "\n")
        start = 0
        for block in data.to_delayed()[:, 0]:
            (rows,) = dask.compute(block)
            for r, row in enumerate(np.asarray(rows, dtype=np.float64), start):
                f.write(
                    f"{fid[r]}\t{iid[r]}\t" + "\t".join(map(repr, row.tolist())) + "\n"
                )
            start += len(rows)
    with fsspec.open(val, "w", **so) as f:
        f.write("".join(f"{float(v)!r}\n" for v in np.ravel(values)))
    return [vec, val]
