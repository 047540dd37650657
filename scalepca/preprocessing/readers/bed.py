"""PLINK ``.bed`` genotypes (with their ``.bim`` and ``.fam``): one file, or a list of
files whose samples are appended in order (a cohort genotyped in batches)."""

from __future__ import annotations

import dataclasses
import os

from ...io._bed import is_bed_path
from ...io._coalesce import TASK_SIZE
from ...io._fs import is_url
from .._steps import stacked
from ._reader import Opened, Reader, refuse_open_options
from .arrays import array_rows

__all__ = ["BedReader"]


@dataclasses.dataclass(frozen=True)
class BedOptions:
    """The options of PLINK .bed files (see :func:`~scalepca.open_matrix`)."""

    chunks: object = None
    task_size: object = TASK_SIZE
    dtype: object = None
    keep: object = None
    exclude_ranges: object = None


class BedReader(Reader):
    """A PLINK .bed file or a list of them, read as (sample × SNP) allele counts."""

    kind = "bed"
    title = "PLINK .bed file"
    Options = BedOptions

    def claims(self, source, storage_options=None) -> bool:
        if isinstance(source, (list, tuple)):
            from ...io._bed_cohorts import check_bed_list

            check_bed_list(source)  # names what is not a .bed
            return True
        return is_bed_path(source)

    def refuse(self, source, foreign: dict) -> None:
        refuse_open_options(source, foreign, self)
        dims = ("variable", "sample_dims", "feature_dims", "layer")
        named = [k for k in dims if k in foreign]
        if named:
            raise ValueError(
                f"{', '.join(named)} do(es) not apply to a PLINK .bed file, which is "
                "a (sample × SNP) matrix already"
            )
        if "weights" in foreign:
            raise ValueError(
                "weights do not apply to a PLINK .bed file: genotypes are "
                "standardised by the model, PCA(standardize='genotype')"
            )
        super().refuse(source, foreign)

    def open(self, source, options: BedOptions) -> Opened:
        several = isinstance(source, (list, tuple))
        paths = list(source) if several else [source]
        for one in paths:
            if is_url(os.fspath(one)):
                raise ValueError(
                    f"{os.fspath(one)!r}: PLINK .bed files are read from local paths"
                )
        kwargs = dict(
            rows=array_rows(options.chunks),
            dtype="float32" if options.dtype is None else options.dtype,
            task_size=options.task_size,
            keep=options.keep,
            exclude_ranges=options.exclude_ranges,
        )
        if several:
            from ...io._bed_cohorts import open_bed_list

            return Opened(*stacked(open_bed_list(paths, **kwargs)))
        from ...io._bed import open_bed_matrix

        return Opened(*stacked(open_bed_matrix(os.fspath(source), **kwargs)))

    def describe(self, path, *, storage_options=None, verbose=False) -> list[str]:
        from ...io._bed import check_bed

        if isinstance(path, (list, tuple)):  # one matrix, the files' samples appended
            from ...io._bed_cohorts import check_bed_list, check_same_snps

            paths = check_bed_list(path)
            shapes = [check_bed(p) for p in paths]
            check_same_snps(paths)
            return [
                f"PLINK .bed files {', '.join(paths)}: {sum(n for n, _ in shapes)} "
                f"samples × {shapes[0][1]} SNPs (allele counts, 2 bits each), read "
                "as one matrix",
                *(
                    f"  {p}: {n} samples"
                    for p, (n, _) in zip(paths, shapes, strict=True)
                ),
            ]
        n, d = check_bed(path)
        return [
            f"PLINK .bed {os.fspath(path)}: {n} samples × "
            f"{d} SNPs (allele counts, 2 bits each)"
        ]
