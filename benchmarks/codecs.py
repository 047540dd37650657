"""Encode / decode speed per core and compression ratio of the codecs scalepca can
write.

For each codec of :data:`scalepca._codecs.CODECS` and three kinds of data — noise-like
float64 and float32 (the low-rank + unit-noise benchmark data) and a smooth climate-like
float32 field (``make_gridded``: smooth modes, mean 15, small noise, 30 % land NaN) — a
zarr array of ``--chunks`` chunks of ``--chunk-mb`` MB each is written to and read from
a local directory (page cache; the file system's cost is in every row, the "none" row
shows it). Speed is bytes over the CPU time of the process (all threads), i.e. GB/s per
core; Blosc runs with one thread. Prints a table and writes
``benchmarks/results/codecs.json``.

    python benchmarks/codecs.py            # 4 chunks of 32 MB per data kind
    python benchmarks/codecs.py --quick    # 2 chunks of 8 MB
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import table, write_json  # noqa: E402

from scalepca._codecs import CODECS, compressors  # noqa: E402
from scalepca.datasets import make_gridded, make_low_rank  # noqa: E402


def data_kinds(chunk_bytes: float) -> dict:
    """One chunk of each kind, about ``chunk_bytes`` large."""
    import dask

    rows64, rows32 = int(chunk_bytes / (256 * 8)), int(chunk_bytes / (256 * 4))
    rows_grid = max(1, int(chunk_bytes / (90 * 180 * 4)))
    with dask.config.set(scheduler="synchronous"):
        noise = make_low_rank(
            rows32, 256, rank=20, noise=1.0, chunk_rows=rows32, seed=0
        ).compute()
        grid = make_gridded(
            rows_grid, n_lat=90, n_lon=180, noise=0.05, chunk_rows=rows_grid
        )
        field = grid["sst"].data.reshape(rows_grid, -1).compute()
    return {
        "noise float64": noise[:rows64],
        "noise float32": noise.astype(np.float32),
        "smooth field float32": np.ascontiguousarray(field),
    }


def measure(x: np.ndarray, codec: str, n_chunks: int, repeat: int) -> dict:
    import zarr

    tmp = Path(tempfile.mkdtemp(prefix="scalepca-codecs-"))
    try:
        best_enc, best_dec, stored = np.inf, np.inf, 0
        for r in range(repeat):
            path = tmp / f"a{r}.zarr"
            z = zarr.create_array(
                str(path),
                shape=(x.shape[0] * n_chunks, x.shape[1]),
                chunks=x.shape,
                dtype=x.dtype,
                compressors=compressors(codec),
            )
            c0 = time.process_time()
            for i in range(n_chunks):
                z[i * x.shape[0] : (i + 1) * x.shape[0]] = x
            best_enc = min(best_enc, time.process_time() - c0)
            c0 = time.process_time()
            for i in range(n_chunks):
                y = z[i * x.shape[0] : (i + 1) * x.shape[0]]
            best_dec = min(best_dec, time.process_time() - c0)
            np.testing.assert_array_equal(y, x)
            stored = sum(f.stat().st_size for f in path.rglob("c/*/*") if f.is_file())
        nbytes = x.nbytes * n_chunks
        return {
            "encode GB/s per core": nbytes / best_enc / 1e9,
            "decode GB/s per core": nbytes / best_dec / 1e9,
            "ratio": nbytes / max(stored, 1),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--chunk-mb", type=float, default=32.0)
    ap.add_argument("--chunks", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.chunk_mb, args.chunks, args.repeat = 8.0, 2, 2
    import numcodecs.blosc

    numcodecs.blosc.set_nthreads(
        1
    )  # per-core speed; dask workers run one task per thread
    rows_out = []
    for kind, x in data_kinds(args.chunk_mb * 1e6).items():
        for codec in CODECS:
            m = measure(x, codec, args.chunks, args.repeat)
            rows_out.append(
                {"data": kind, "codec": codec, "chunk MB": x.nbytes / 1e6, **m}
            )
    print(
        table(
            rows_out,
            [
                "data",
                "codec",
                "chunk MB",
                "encode GB/s per core",
                "decode GB/s per core",
                "ratio",
            ],
        )
    )
    path = write_json(
        "codecs" if not args.quick else "codecs_quick",
        {
            "chunks": args.chunks,
            "chunk_mb": args.chunk_mb,
            "rows": rows_out,
            "codecs": CODECS,
        },
    )
    print("written", path)


if __name__ == "__main__":
    main()
