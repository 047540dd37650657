"""PLINK ``.bed`` genotypes (with their ``.bim`` and ``.fam``) as a lazy (sample × SNP) matrix.

A ``.bed`` file holds allele counts 0, 1, 2 (or missing) packed four to a byte, SNP by SNP.
It is read through ``bed-reader`` (the optional ``genotypes`` extra): each dask task opens
the file and reads its own block with a ranged read (``open_bed(...).read(index=...)``), so
no task ever holds more than its block and the file is never read whole by one worker.
Missing calls are NaN. The ``.fam`` gives the sample ids (the ``sample`` coordinate, and the
family ids, where simulated populations are written, as ``fid``), the ``.bim`` the SNP ids
(the ``snp`` coordinate: a fitted model's ``feature_names_in_``); both are small text files
read on the client.

PCA of genotypes standardises each SNP by its allele frequency:
``PCA(standardize="genotype")`` (see :mod:`scalepca.preprocessing._genotype`).
"""

from __future__ import annotations

import contextlib
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
    return isinstance(path, (str, os.PathLike)) and os.fspath(path).lower().endswith(".bed")


def _require_bed_reader():
    try:
        import bed_reader
    except ImportError:  # pragma: no cover - the extra is installed in the test environment
        raise ImportError("reading PLINK .bed files needs bed-reader: pip install "
                          "'scalepca[genotypes]'") from None
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
    """The ``.fam`` and ``.bim`` next to ``path``; ``FileNotFoundError`` naming a missing one."""
    fam, bim = path.with_suffix(".fam"), path.with_suffix(".bim")
    for file, holds in ((fam, "the samples"), (bim, "the SNPs")):
        if not file.exists():
            raise FileNotFoundError(f"no {file.suffix} file at {os.fspath(file)!r}: a PLINK .bed "
                                    f"needs its {file.suffix} ({holds}) next to it")
    return fam, bim


def _count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


def check_bed(path) -> tuple[int, int]:
    """``(n_samples, n_snps)`` of the .bed at ``path`` after checking the file set.

    Raises ``FileNotFoundError`` for a missing .bed/.fam/.bim and ``ValueError`` for a file
    that is not a SNP-major PLINK .bed or whose size disagrees with its .fam and .bim.
    """
    path = Path(os.fspath(path))
    if not path.is_file():
        raise FileNotFoundError(f"no PLINK .bed file at {os.fspath(path)!r}")
    with open(path, "rb") as f:
        head = f.read(3)
    if head != BED_MAGIC:
        raise ValueError(f"{os.fspath(path)!r} is not a SNP-major PLINK .bed file (it does not "
                         "start with the .bed magic bytes 6c 1b 01)")
    fam, bim = _companions(path)
    n, d = _count_lines(fam), _count_lines(bim)
    expected = 3 + -(-n // 4) * d
    size = path.stat().st_size
    if size != expected:
        raise ValueError(f"{os.fspath(path)!r} has {size} bytes, but its .fam ({n} samples) and "
                         f".bim ({d} SNPs) make {expected}: the three files do not belong "
                         "together, or the .bed is truncated")
    return n, d


def _read_block(block_info=None, *, path: str, n: int, d: int, out_dtype):
    """One block of genotypes by a ranged read (missing calls NaN)."""
    import bed_reader

    (r0, r1), (c0, c1) = block_info[None]["array-location"]
    with bed_reader.open_bed(path, iid_count=n, sid_count=d, num_threads=1) as bed:
        return bed.read(index=np.s_[r0:r1, c0:c1], dtype=out_dtype, order="C", num_threads=1)


def bed_chunks(n: int, d: int, itemsize: int, rows=None,
               task_size: int = DEFAULT_TASK_BYTES) -> tuple:
    """Dask chunks of the (n × d) matrix: whole rows (the SNPs of a sample are one feature
    vector, as for every matrix ``open_matrix`` makes), ``rows`` samples per block, else a
    multiple of 4 samples (whole bytes of each SNP) making about ``task_size`` bytes of
    floats."""
    if rows is None:
        rows = max(4, (int(task_size) // max(1, itemsize * d)) // 4 * 4)
    return da.core.normalize_chunks((rows, -1), (n, d))


def open_bed_matrix(path, *, rows=None, dtype="float32",
                    task_size: int | None = DEFAULT_TASK_BYTES) -> xr.DataArray:
    """The genotypes at ``path`` as a lazy (sample × SNP) DataArray of allele counts.

    ``rows``: samples per block (default: about ``task_size`` bytes of floats per block).
    ``dtype``: float32 (default) or float64; missing calls are NaN. The ``sample``
    coordinate holds the .fam sample ids (``fid`` the family ids), ``snp`` the .bim SNP ids.
    Reads the .fam and .bim (small text) on the client and nothing of the .bed but its first
    three bytes.
    """
    bed_reader = _require_bed_reader()
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"dtype={dtype}: genotypes are read as float32 or float64 (missing "
                         "calls are NaN)")
    n, d = check_bed(path)
    spath = os.path.abspath(os.fspath(path))
    with (_root_logger_kept(),
          bed_reader.open_bed(spath, iid_count=n, sid_count=d) as bed):
        iid, fid, sid = bed.iid, bed.fid, bed.sid
    from ._coalesce import _task_bytes

    blocks = bed_chunks(n, d, dtype.itemsize, rows,
                        _task_bytes(task_size) or DEFAULT_TASK_BYTES)
    token = da.core.tokenize(spath, os.stat(spath).st_mtime_ns, blocks, dtype)
    arr = da.map_blocks(_read_block, chunks=blocks, dtype=dtype,
                        meta=np.empty((0, 0), dtype=dtype), path=spath, n=n, d=d,
                        out_dtype=dtype, name=f"read-bed-{token}")
    return xr.DataArray(arr, dims=(SAMPLE_DIM, SNP_DIM), name="genotypes",
                        coords={SAMPLE_DIM: np.asarray(iid, dtype=str),
                                "fid": (SAMPLE_DIM, np.asarray(fid, dtype=str)),
                                SNP_DIM: np.asarray(sid, dtype=str)})
