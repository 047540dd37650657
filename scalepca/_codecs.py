"""The compression codecs of the zarr arrays scalepca writes, by name from a fixed
registry.

Data written by ``scalepca make-data`` and output stores (scores, reconstructions,
robust PCA's parts) are compressed with one of the codecs below; scratch arrays beside
checkpoints are written with ``"none"`` (rewritten every few iterations, dense, ≤ 8 %
smaller with any codec). A name from a config file or the command line is only ever
looked up in :data:`CODECS`; nothing is built from a name outside it.

The default, :data:`DEFAULT_CODEC`, was chosen by measurement
(``benchmarks/codecs.py``; ``--quick``, one core, page cache): Blosc-LZ4 with byte
shuffle decodes float32 noise at 1.57 GB/s per core against zstd's 0.67, a smooth
climate-like float32 field at 1.29 against 0.83, noise-like float64 as fast as zstd
(0.67 / 0.66), and encodes 1.2–3.8× faster, at a ratio within 4 % of zstd's (1.58
against 1.64 on the smooth field; 1.04–1.08 for both on noise).
"""

from __future__ import annotations

__all__ = ["CODECS", "DEFAULT_CODEC", "check_codec", "compressors"]

#: codec name → what it is (the name is the only thing read from configs or the CLI)
CODECS = {
    "lz4": "Blosc-LZ4, byte shuffle (clevel 5)",
    "lz4-bitshuffle": "Blosc-LZ4, bit shuffle (clevel 5)",
    "zstd": "Zstandard level 0 (zarr v3's default)",
    "none": "no compression",
}

DEFAULT_CODEC = "lz4"


def check_codec(name) -> str:
    """``name`` if it is a codec of :data:`CODECS` (``None``: the default); else a
    ValueError."""
    if name is None:
        return DEFAULT_CODEC
    if not isinstance(name, str) or name not in CODECS:
        raise ValueError(
            f"unknown codec {name!r}; choose one of "
            + ", ".join(f"{k} ({v})" for k, v in CODECS.items())
        )
    return name


def compressors(name=None):
    """The ``compressors`` argument of ``zarr.create_array`` for codec ``name``."""
    from zarr.codecs import BloscCodec, ZstdCodec

    name = check_codec(name)
    if name == "none":
        return None
    if name == "zstd":
        return (ZstdCodec(level=0),)
    shuffle = "bitshuffle" if name == "lz4-bitshuffle" else "shuffle"
    return (BloscCodec(cname="lz4", clevel=5, shuffle=shuffle),)
