"""The config reference's sentences: one per key of a run config's schema.

``cluster.*`` keys are shared by the kinds that have them. The documentation build
(``docs/_ext/docgen.py``) refuses a schema key of :mod:`scalepca.app.config` that has no
sentence here.
"""

KEY_DOCS = {
    "data.path": "Local path or fsspec URL (``s3://bucket/x.zarr``) of the zarr store, "
    "NetCDF file(s) or AnnData store (``.zarr``, ``.h5ad``), or of a "
    "PLINK ``.bed``; a list of ``.bed`` files "
    "(``[batch1.bed, batch2.bed]``, the same SNPs) is one matrix, "
    "their samples appended; "
    "relative to the config file's folder.",
    "data.variable": "The array of a zarr group, or the variable of an xarray store; needed "
    "when the store holds more than one. A list of variables (``[sst, z]``) "
    "gives several fields, each stacked and weighted on its own grid, for "
    "``model.method: multivariate_eof``, and exactly two (X, then Y, over the "
    "same samples) for ``model.method: mca``.",
    "data.storage_options": "fsspec options for URLs (credentials, ``endpoint_url``, ...). "
    "An ``s3://`` store gets ``config_kwargs: {connect_timeout: 10, read_timeout: 60, "
    "retries: {max_attempts: 4, mode: standard}}`` (botocore's); keys given here win.",
    "data.chunks": "Rows per chunk (an integer), or ``[rows, columns]`` to keep 2-D blocks "
    "(robust PCA, randomized PCA of wide data). Default: the store's chunks.",
    "data.sample_dims": "For N-D xarray data: the dimension(s) that are samples (e.g. "
    "``time``); the others are stacked into features.",
    "data.feature_dims": "The dimensions stacked into features; default: all but "
    "``sample_dims``.",
    "data.weights": "``sqrt_coslat`` or ``coslat`` (from the latitude coordinate), or the "
    "name of a variable of the store: per-feature weights multiplied into the data.",
    "data.format": "What ``data.path`` is: ``zarr``, ``netcdf``, ``anndata`` (an AnnData "
    "``.zarr`` store or ``.h5ad`` file, read lazily as a sparse cell × gene "
    "matrix) or ``bed`` (PLINK genotypes with their ``.bim`` and ``.fam``, a "
    "sample × SNP matrix, float32, missing calls NaN; fit it with "
    "``model.standardize: genotype``). Default: recognised from the path's "
    "ending or first bytes.",
    "data.layer": "AnnData: the layer to read (e.g. ``counts``); ``null`` reads ``X``. "
    "AnnData is a cell × gene matrix already: ``variable``, ``sample_dims`` and "
    "``feature_dims`` are refused for it (as ``open_matrix`` refuses them).",
    "data.task_size": "Bytes of data one task reads (``128MiB``) when ``chunks`` is not given: "
    "a store's small chunks are read several per task, whole multiples of "
    "its row chunk, so the task count follows the data size, not the "
    "number of store chunks. ``null``: one task per store chunk.",
    "data.decode_times": "xarray's ``decode_times`` (NetCDF, xarray zarr): ``false`` keeps "
    "the times as numbers, for a time axis xarray cannot decode without "
    "cftime (years before 1678). Default: decoded.",
    "data.use_cftime": "Decode the times to ``cftime`` dates (``true``, needs the cftime "
    "package) or to NumPy datetimes (``false``). Default: xarray's choice.",
    "data.engine": "The xarray engine that reads a NetCDF/HDF5 file (``h5netcdf``, "
    "``netcdf4``, ``scipy``; an installed one). Default: chosen from the "
    "file's first bytes. Not for zarr stores.",
    "data.singlecell": "AnnData raw counts: scanpy's steps before the fit, done inside the "
    "passes and kept by the model (``transform`` repeats them): "
    "``normalize_total``, ``target_sum``, ``exclude_highly_expressed``, "
    "``max_fraction``, ``log1p``, ``flavor`` (``seurat``, ``cell_ranger``, "
    "``seurat_v3``), ``n_top_genes``, ``min_mean``, ``max_mean``, "
    "``min_disp``, ``max_disp``, ``n_bins``, ``scale``, ``max_value``, as "
    "``scalepca.pp.pca`` takes them; ``mask_obs`` (a boolean ``obs`` "
    "column: the cells fitted, read where they lie) and ``mask_var`` (a "
    "boolean ``var`` column: the genes fitted, after normalisation over "
    "all; default ``highly_variable`` when present and no ``flavor``).",
    "data.keep": "PLINK .bed: a keep file (PLINK's ``--keep`` format: ``FID IID`` "
    "per line, or ``IID`` alone; a .fam is one); only its samples are read and "
    "fitted, in the .fam's order. A sample the .fam does not have is refused.",
    "data.exclude_ranges": "PLINK .bed: base-pair ranges of the .bim whose SNPs are "
    "left out (PLINK's ``--exclude range``), "
    "``CHROMOSOME:FIRST-LAST`` with both ends included, "
    "e.g. ``['6:28477797-33448354']`` (the MHC on "
    "GRCh37), or a bare ``CHROMOSOME`` for all of it. A "
    "chromosome the .bim does not have is refused.",
    "data.generate": "Write a synthetic dataset at ``data.path`` first, if it is absent: "
    "``kind`` plus that generator's parameters (below).",
    "output.store": "Folder (or URL) under which the outputs are written; relative to the "
    "config file's folder. ``null``: write nothing.",
    "output.storage_options": "fsspec options for an output URL (an ``s3://`` store's "
    "retries and timeouts: as ``data.storage_options``).",
    "output.model": "Write the fitted model (``model.zarr``, read back with "
    "``scalepca.load``).",
    "output.scores": "Write the scores of the training data (``scores.zarr``): ``scores``; "
    "``mca``: each field's expansion coefficients, ``scores_x`` and "
    "``scores_y``; ``hilbert_eof``: the complex PCs as ``scores_amplitude`` "
    "and ``scores_phase`` (radians); ``bootstrap_eof``: the PCs.",
    "output.reconstruction": "Write the rank-k reconstruction (``reconstruction.zarr``); not "
    "for ``mca``, ``hilbert_eof`` and ``bootstrap_eof``.",
    "output.low_rank": "Robust PCA: write the low-rank part L (``low_rank.zarr``).",
    "output.sparse": "Robust PCA: write the sparse part S (``sparse.zarr``).",
    "output.report": "Write ``report.html``, one self-contained page: summary, figures, time "
    "per stage and pass, cluster, versions and the config (credentials redacted).",
    "output.overwrite": "A rerun replaces the complete outputs of an earlier run at the same "
    "paths (``model.zarr``, ``scores.zarr``, …); ``false`` refuses to. "
    "Whatever it says, nothing else there (a folder of other files, a data "
    "store, a store another program wrote) is ever replaced, and an output "
    "or checkpoint that is, contains or lies inside ``data.path`` is "
    "refused before the fit.",
    "output.update": "Update the model of the previous run (``model.zarr``) with the rows "
    "appended to the zarr store at ``data.path`` since, reading only those "
    "rows, and append their scores to ``scores.zarr`` (the old rows' scores "
    "are kept as they are); ``scalepca run --update`` sets it. The model must "
    "be one ``partial_fit`` updates, fitted with the config's parameters; a "
    "store that shrank, changed features or changed rows the model has seen "
    "is refused before anything is read (see the PCA guide).",
    "output.codec": "Compression of the written arrays: ``lz4`` (Blosc-LZ4 with byte "
    "shuffle, the default, chosen by measurement: see the README), "
    "``lz4-bitshuffle``, ``zstd`` (zarr's default) or ``none``.",
    "output.plink": "Data from a PLINK .bed, fitted with ``model.standardize: "
    "genotype``: also write ``pca.eigenvec`` and ``pca.eigenval`` "
    "under ``output.store`` in PLINK 2's format and convention "
    "(``#FID IID PC1 …``, tab-separated: the unit-length "
    "eigenvectors of the relationship matrix, i.e. the scores over "
    "the singular values; its eigenvalues, the squared singular "
    "values over the SNPs fitted), as ``plink2 --pca`` writes them.",
    "cluster.kind": "Which cluster to start or join.",
    "cluster.n_workers": "Number of workers (local: default from the machine's cores).",
    "cluster.threads_per_worker": "Threads per worker process.",
    "cluster.memory_limit": "Memory per worker (``4GiB``, bytes, or ``auto``).",
    "cluster.dashboard_address": "Where the Dask dashboard listens (``:0``: a free port).",
    "cluster.processes": "local: workers as processes (``true``) or threads; batch kinds: "
    "worker processes per job.",
    "cluster.local_directory": "Scratch folder of the workers (spilled data).",
    "cluster.monitoring": "``light`` (default): the scheduler and workers scalepca starts check "
    "their event loop every 1 s, sample CPU and memory for the dashboard "
    "every 2 s and the running task's stack every 100 ms (Dask: 20 ms, "
    "500 ms, 10 ms): CPU that compute-bound fits share their cores with "
    "(see the README's benchmarks); settings already changed in your Dask "
    "config are kept. ``dask``: Dask's own.",
    "cluster.address": "address: the scheduler's ``tcp://`` or ``tls://`` address; "
    "gateway: the Dask Gateway server.",
    "cluster.security": "TLS files for a ``tls://`` scheduler (see cluster.security below).",
    "cluster.timeout": "How long to wait for the scheduler (``30s``).",
    "cluster.cores": "Cores per batch job.",
    "cluster.memory": "Memory per batch job (``32GiB``).",
    "cluster.walltime": "Wall-clock limit of a job (``02:00:00``).",
    "cluster.queue": "Queue or partition.",
    "cluster.account": "Account or project charged.",
    "cluster.job_name": "Name of the batch jobs.",
    "cluster.job_extra": "Extra scheduler directives, one string each (``--exclusive``).",
    "cluster.job_script_prologue": "Shell lines run before the worker starts (``module "
    "load ...``).",
    "cluster.worker_extra_args": "Extra arguments of the worker command.",
    "cluster.interface": "Network interface of the workers (``ib0``).",
    "cluster.log_directory": "Folder for the jobs' output files.",
    "cluster.python": "Python executable on the compute nodes.",
    "cluster.death_timeout": "Seconds a worker waits for a lost scheduler before exiting.",
    "cluster.jobs": "Number of jobs to submit (when not adaptive).",
    "cluster.adaptive": "Scale between bounds instead (see cluster.adaptive below).",
    "cluster.start_timeout": "How long to wait for the first worker job to start (``30m``, "
    "seconds); default: as long as the queue takes. A job the batch "
    "system rejects or can never run is an error at once.",
    "cluster.resource_spec": "PBS/SGE resource request (``select=1:ncpus=8``).",
    "cluster.disk": "HTCondor: disk per job.",
    "cluster.name": "kubernetes: name of the Dask cluster resource.",
    "cluster.image": "kubernetes: container image of scheduler and workers.",
    "cluster.namespace": "kubernetes: namespace.",
    "cluster.resources": "kubernetes: container resource requests/limits.",
    "cluster.env": "kubernetes: environment variables of the containers.",
    "cluster.proxy_address": "gateway: the proxy address, if separate.",
    "cluster.auth": "gateway: authentication type (``kerberos``, ``jupyterhub``, ...).",
    "cluster.cluster_options": "gateway: options of the new cluster (as the server offers).",
    "cluster.security.tls_ca_file": "CA certificate (PEM) that signed the scheduler's.",
    "cluster.security.tls_client_cert": "This client's certificate (PEM).",
    "cluster.security.tls_client_key": "Its private key, if not inside the certificate file.",
    "cluster.security.require_encryption": "Refuse unencrypted connections.",
    "cluster.adaptive.minimum_jobs": "Fewest jobs kept running.",
    "cluster.adaptive.maximum_jobs": "Most jobs submitted.",
    "cluster.adaptive.minimum": "Fewest workers.",
    "cluster.adaptive.maximum": "Most workers.",
    "progress": "Progress per pass over the data: a bar on a terminal, one line per pass "
    "(tasks, time, rate) in a log. ``--quiet`` switches it off.",
}
