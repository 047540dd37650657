"""scalepca beside EIGENSOFT's smartpca (issue 49) on one .bed: the samples' structured
PCs agree. smartpca estimates each SNP's frequency with a pseudocount (Patterson et al.
2006), so the two standardised matrices differ slightly and the comparison is of the
population axes, not to rounding. Skipped where smartpca is not installed (Debian:
``apt-get install eigensoft``)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import scalepca
from scalepca.cli import EXIT_OK, main

from .support.compare import subspace_sine

pytest.importorskip("bed_reader")
SMARTPCA = next(
    (
        p
        for p in ("/usr/lib/eigensoft/smartpca", shutil.which("smartpca") or "")
        if p and Path(p).is_file()
    ),
    None,
)
pytestmark = pytest.mark.skipif(SMARTPCA is None, reason="smartpca is not installed")


def test_smartpca_and_scalepca_find_the_same_population_axes(tmp_path):
    bed = tmp_path / "sim.bed"
    assert (
        main(
            [
                "make-data",
                str(bed),
                "--kind",
                "genotypes",
                "--n-samples",
                "300",
                "--n-features",
                "3000",
                "--set",
                "n_populations=4",
                "--set",
                "missing=0.01",
                "--seed",
                "2",
                "--no-progress",
            ]
        )
        == EXIT_OK
    )
    par = tmp_path / "par"
    par.write_text(
        f"genotypename: {bed}\nsnpname: {bed.with_suffix('.bim')}\nindivname: "
        f"{bed.with_suffix('.fam')}\nevecoutname: {tmp_path / 'e.evec'}\nevaloutname: "
        f"{tmp_path / 'e.eval'}\nnumoutevec: 6\nnumoutlieriter: 0\nnumthreads: 1\n"
    )
    done = subprocess.run([SMARTPCA, "-p", str(par)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    theirs = np.loadtxt(tmp_path / "e.evec", comments="#", usecols=range(1, 7))
    model = scalepca.PCA(
        6, standardize="genotype", svd_solver="randomized", random_state=0
    )
    A = scalepca.open_matrix(bed, dtype="float64")
    ours = np.asarray(model.fit_transform(A))
    # 4 populations: 3 structured axes, well above the noise bulk in both
    assert subspace_sine(theirs[:, :3].T, ours[:, :3].T) < 0.02
    assert subspace_sine(theirs[:, :2].T, ours[:, :2].T) < 0.02
