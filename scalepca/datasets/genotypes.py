"""Synthetic genotypes with population structure, written to a PLINK ``.bed`` chunk by
chunk.

The Balding–Nichols model: each SNP has an ancestral allele frequency
``p ~ U(0.05, 0.95)``; each of ``K`` populations, drifted from the ancestor by ``F``
(F_ST), has its own frequency ``p_k ~ Beta(p (1 − F) / F, (1 − p)(1 − F) / F)``; a
sample of population ``k`` carries ``Binomial(2, p_k)`` copies of the allele, and each
call is missing (NaN in the matrix, the PLINK missing code in the file) with probability
``missing``. The populations are the family ids of the ``.fam`` (``pop0`` …
``pop{K-1}``), so a fit can be checked against them.

The ``.bim`` is a realistic map: the SNPs spread over the autosomes 1–22 in proportion
to their lengths on GRCh37, at increasing base-pair positions (one SNP in each equal
stretch of its chromosome) with two distinct alleles of A, C, G, T, so that range
subsets (``exclude_ranges``) and PLINK's per-chromosome steps work on it.

Every block of SNPs is drawn from its own seed
(``SeedSequence([seed, tag, block])``): the data do not depend on the block order or
the workers. :func:`write_bed` writes the file block of SNPs by block of SNPs with
bed-reader's ``create_bed`` (never the whole matrix in memory): a ``.bed`` is stored
SNP by SNP.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import dask
import dask.array as da
import numpy as np

#: seed tag (distinct from those of :mod:`scalepca.datasets`)
_TAG_SNPS = 41
#: seed tag of the .bim (positions and alleles)
_TAG_BIM = 42
#: lengths of the autosomes 1–22 on GRCh37 (base pairs, from the assembly's report)
GRCH37_LENGTHS = (
    249250621,
    243199373,
    198022430,
    191154276,
    180915260,
    171115067,
    159138663,
    146364022,
    141213431,
    135534747,
    135006516,
    133851895,
    115169878,
    107349540,
    102531392,
    90354753,
    81195210,
    78077248,
    59128983,
    63025520,
    48129895,
    51304566,
)
#: the PLINK missing code of int8 genotypes in bed-reader
MISSING_INT8 = -127


def _rng(seed: int, *path: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), *map(int, path)]))


@dataclass
class GenotypeMatrix:
    """Lazy genotypes (samples × SNPs, blocks of whole columns) and the sample
    populations, as :func:`make_genotypes` returns them.

    Attributes
    ----------
    data : dask array of shape (n_samples, n_snps)
        Allele counts 0, 1, 2: int8 with -127 for a missing call, or float with NaN.
        Fit it as it is (``PCA(standardize="genotype").fit(G.data)``).
    populations : ndarray of int, shape (n_samples,)
        The population of each sample (0 … K − 1); the ``.fam``'s family ids.
    seed : int
        The seed of the ``.bim``'s positions and alleles.
    """

    data: da.Array  # int8 (missing -127) or float (missing NaN)
    populations: np.ndarray  # int, one per sample
    seed: int = 0  # of the .bim's positions and alleles

    def bim(self) -> dict:
        """The .bim's columns (bed-reader's properties): ``snp_map`` of the SNPs."""
        return snp_map(self.shape[1], seed=self.seed)

    @property
    def shape(self) -> tuple:
        """``(n_samples, n_snps)``, the shape of ``data``."""
        return self.data.shape

    @property
    def dtype(self):
        """The dtype of ``data``."""
        return self.data.dtype

    def fid(self) -> np.ndarray:
        """The family id of each sample, ``pop0`` … (its population), as the ``.fam``
        holds it."""
        return np.array([f"pop{k}" for k in self.populations], dtype=object)


def _snp_block(
    block_info=None, *, populations, n_populations, fst, missing, seed, out_dtype
):
    (_, _), (c0, c1) = block_info[None]["array-location"]
    b = c1 - c0
    rng = _rng(seed, _TAG_SNPS, c0)  # blocks start at multiples of the block size
    p = rng.uniform(0.05, 0.95, size=b)
    a, c = p * (1 - fst) / fst, (1 - p) * (1 - fst) / fst
    pk = rng.beta(a, c, size=(n_populations, b))  # population frequencies (K × b)
    # one uniform per call: P(2) = q², P(≥ 1) = 1 − (1 − q)²
    at_least_one = (1 - (1 - pk) ** 2).astype(np.float32)
    two = (pk * pk).astype(np.float32)
    n = populations.shape[0]
    g = np.empty((n, b), dtype=np.int8)
    # the samples of a population are contiguous (make_genotypes): slices, no fancy
    # index
    bounds = np.searchsorted(populations, np.arange(n_populations + 1))
    for k in range(n_populations):
        r0, r1 = bounds[k], bounds[k + 1]
        u = rng.random((r1 - r0, b), dtype=np.float32)
        np.add(u < at_least_one[k], u < two[k], out=g[r0:r1], dtype=np.int8)
    hole = rng.random((n, b), dtype=np.float32) < missing if missing > 0 else None
    if np.dtype(out_dtype) == np.int8:
        if hole is not None:
            g[hole] = MISSING_INT8
        return g
    out = g.astype(out_dtype)
    if hole is not None:
        out[hole] = np.nan
    return out


def snp_map(n_snps: int, *, seed: int = 0) -> dict:
    """A realistic .bim for ``n_snps`` SNPs (see the module), as bed-reader's
    properties: ``sid`` (``snp0`` …), ``chromosome`` (``"1"`` … ``"22"``),
    ``bp_position`` (increasing within each chromosome), ``allele_1`` and ``allele_2``
    (distinct bases)."""
    lengths = np.asarray(GRCH37_LENGTHS, dtype=np.int64)
    edges = np.round(np.cumsum(lengths) / lengths.sum() * n_snps).astype(np.int64)
    counts = np.diff(np.r_[0, edges])
    chrom = np.repeat(np.arange(1, 23), counts)
    rng = _rng(seed, _TAG_BIM)
    # the i-th of c SNPs lies in the i-th of c equal stretches: strictly increasing
    within = np.concatenate([np.arange(c) for c in counts])
    stretch = lengths[chrom - 1] / counts[chrom - 1]
    position = np.floor((within + rng.random(n_snps)) * stretch).astype(np.int64) + 1
    bases = np.array(list("ACGT"))
    a1 = rng.integers(0, 4, size=n_snps)
    a2 = (a1 + rng.integers(1, 4, size=n_snps)) % 4
    return {
        "sid": [f"snp{j}" for j in range(n_snps)],
        "chromosome": chrom.astype(str),
        "bp_position": position,
        "allele_1": bases[a1],
        "allele_2": bases[a2],
    }


def make_genotypes(
    n_samples: int,
    n_features: int = 1000,
    *,
    n_populations: int = 3,
    fst: float = 0.1,
    missing: float = 0.0,
    seed: int = 0,
    chunk_snps: int = 1000,
    dtype="float32",
) -> GenotypeMatrix:
    """Balding–Nichols genotypes: ``n_samples`` × ``n_features`` SNPs (see the module).

    The samples are split into ``n_populations`` populations of (nearly) equal sizes,
    in order: ``s0`` … first belong to ``pop0``, and so on (the .fam's family ids say
    which). ``dtype``: of the lazy matrix (float32/float64 with NaN missing, or int8
    with -127, the form :func:`write_bed` writes fastest). Returns a
    :class:`GenotypeMatrix`, written to a ``.bed`` by ``make-data --kind genotypes``
    / :func:`write_bed`.

    Parameters
    ----------
    n_samples : int
        Number of samples (rows).
    n_features : int, default=1000
        Number of SNPs (columns).
    n_populations : int, default=3
        Number of populations the samples are split into; the .fam's family ids
        (``pop0``, ``pop1``, …) name them.
    fst : float, default=0.1
        Balding–Nichols :math:`F_{ST}`, in (0, 1): how far the populations' allele
        frequencies drift from the ancestral ones.
    missing : float, default=0.0
        Probability that a call is missing, in [0, 1).
    seed : int, default=0
        Seed of every random draw (frequencies, genotypes, missing calls).
    chunk_snps : int, default=1000
        SNPs per block of the lazy matrix (and per block written to the ``.bed``).
    dtype : str, default="float32"
        ``float32`` or ``float64`` (missing calls NaN), or ``int8`` (missing -127).

    References
    ----------
    Balding, D. J. & Nichols, R. A. (1995). A method for quantifying differentiation
    between populations at multi-allelic loci and its implications for investigating
    identity and paternity. Genetica, 96(1–2), 3–12. (The model.)

    Patterson, N., Price, A. L. & Reich, D. (2006). Population structure and
    eigenanalysis. PLoS Genetics, 2(12), e190. (The PCA of such data:
    ``PCA(standardize="genotype")``.)

    Examples
    --------
    >>> import numpy as np, scalepca
    >>> from scalepca.datasets import make_genotypes
    >>> G = make_genotypes(300, 2000, n_populations=3, fst=0.1)
    >>> G.shape, np.bincount(G.populations).tolist()
    ((300, 2000), [100, 100, 100])
    >>> pca = scalepca.PCA(2, standardize="genotype").fit(G.data)
    >>> pca.transform(G.data).shape          # the samples on PC1 and PC2
    (300, 2)
    """
    if n_samples < 1 or n_features < 1:
        raise ValueError(f"sizes must be positive; got {n_samples} × {n_features}")
    if int(n_populations) < 1:
        raise ValueError(f"n_populations must be at least 1; got {n_populations}")
    if not 0 < fst < 1:
        raise ValueError(f"fst must be in (0, 1); got {fst}")
    if not 0 <= missing < 1:
        raise ValueError(f"missing must be in [0, 1); got {missing}")
    if chunk_snps < 1:
        raise ValueError(f"chunk_snps must be positive; got {chunk_snps}")
    dtype = np.dtype(dtype)
    if dtype not in (np.int8, np.float32, np.float64):
        raise ValueError(f"dtype={dtype}: genotypes are int8, float32 or float64")
    pops = (np.arange(n_samples) * int(n_populations)) // n_samples
    chunks = da.core.normalize_chunks((n_samples, chunk_snps), (n_samples, n_features))
    data = da.map_blocks(
        _snp_block,
        chunks=chunks,
        dtype=dtype,
        meta=np.empty((0, 0), dtype=dtype),
        populations=pops,
        n_populations=int(n_populations),
        fst=float(fst),
        missing=float(missing),
        seed=int(seed),
        out_dtype=dtype,
    )
    return GenotypeMatrix(data, pops, int(seed))


def _first_bytes(path: Path, n: int) -> bytes:
    with open(path, "rb") as f:
        return f.read(n)


def check_bed_target(path, *, overwrite: bool, flag: str = "overwrite=True") -> Path:
    """The ``.bed`` path to write; ``FileExistsError`` when one is there and not
    ``overwrite``, or when the file there is not a PLINK .bed (never replaced);
    ``ValueError`` for a path that does not end in ``.bed``."""
    spath = os.fspath(path)
    if not spath.lower().endswith(".bed"):
        raise ValueError(
            f"{spath!r}: genotypes are written as a "
            "PLINK .bed file; give a path ending in .bed"
        )
    target = Path(spath.removeprefix("file://"))
    if target.exists():
        from ..io._bed import BED_MAGIC

        if target.is_dir() or _first_bytes(target, 3) != BED_MAGIC:
            raise FileExistsError(
                f"{spath!r} exists and is not a PLINK .bed file; "
                "scalepca never replaces it"
            )
        if not overwrite:
            raise FileExistsError(
                f"{spath!r} holds a PLINK .bed file; pass {flag} to replace it"
            )
    return target


def write_bed(
    data: GenotypeMatrix, path, *, overwrite: bool = False, blocks_at_once: int = 2
) -> str:
    """Write ``data`` to ``path`` (``.bed`` with its ``.fam`` and ``.bim``), SNP block
    by block.

    ``blocks_at_once`` blocks of SNPs are computed together (in parallel on the
    scheduler), then written SNP by SNP by bed-reader's ``create_bed``, which writes
    under a temporary name and renames at the end: an interrupted write leaves no
    .bed. Returns the path.

    Examples
    --------
    >>> import tempfile, scalepca
    >>> from scalepca.datasets import make_genotypes, write_bed
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     bed = write_bed(make_genotypes(50, 100), f"{tmp}/cohort.bed")  # .bed, .bim, .fam
    ...     shape = scalepca.open_matrix(bed).shape
    >>> shape
    (50, 100)
    """
    from bed_reader import create_bed

    target = check_bed_target(path, overwrite=overwrite)
    target.parent.mkdir(parents=True, exist_ok=True)
    n, d = data.shape
    props = {"fid": data.fid(), "iid": [f"s{i}" for i in range(n)], **data.bim()}
    blocks = data.data.to_delayed()[0]
    with create_bed(target, iid_count=n, sid_count=d, properties=props) as bed:
        for start in range(0, len(blocks), blocks_at_once):
            for g in dask.compute(*blocks[start : start + blocks_at_once]):
                g = np.asfortranarray(g)  # each SNP's calls contiguous
                for j in range(g.shape[1]):
                    bed.write(g[:, j])
    return str(target)
