import tempfile
from pathlib import Path

import numpy as np

import scalepca
from scalepca.analysis import plot
from scalepca.datasets import make_genotypes, write_bed

with tempfile.TemporaryDirectory() as tmp:
    bed = Path(tmp) / "cohort.bed"  # with its .bim and .fam
    # 1,000 samples of four populations (Balding–Nichols, F_ST = 0.05), 3,000 SNPs;
    # the .fam's family ids name the populations: pop0 … pop3
    write_bed(make_genotypes(1_000, 3_000, n_populations=4, fst=0.05, seed=0), bed)
    X = scalepca.open_matrix(bed)  # lazy (sample × snp), float32, NaN = missing
    pca = scalepca.PCA(n_components=4, standardize="genotype", random_state=0).fit(X)
    scores = pca.transform(X)  # (sample, mode), with the .fam's ids
    ratio = 100 * pca.explained_variance_ratio_
    print("variance explained (%):", np.round(ratio, 1))
    population = scores["fid"].values  # the .fam's family ids
    ax = plot.scores(scores, population)
    ax.set(
        title="1,000 genotyped samples, coloured by population",
        xlabel=f"PC1 ({ratio[0]:.1f} % of variance)",
        ylabel=f"PC2 ({ratio[1]:.1f} % of variance)",
    )
    ax.figure.savefig("genotypes.png", dpi=100, bbox_inches="tight")
