"""Shared fixtures and helpers for the test suite."""

from __future__ import annotations

from contextlib import contextmanager

import dask
import numpy as np
import pytest
import xarray as xr

# counted_dask and ReadCounter live in support/counting.py (benchmarks use them too);
# named here as well for the tests that import them from conftest
from .support.counting import ComputeCounter, ReadCounter, counted_dask  # noqa: F401
from .support.processes import free_ports


@pytest.fixture(autouse=True)
def _dask_scheduler_setting_kept():
    """Each test leaves dask's ``scheduler`` setting as it found it. A client left as
    the default (two defaults closed out of order, say) made every later test of its
    process fail with "no Client active", far from the cause: this fails the test that
    left it, and restores it for the next."""
    before = dask.config.get("scheduler", None)
    yield
    after = dask.config.get("scheduler", None)
    if after != before:
        dask.config.set(scheduler=before)
        pytest.fail(
            f"the test left dask's scheduler setting at {after!r}, not {before!r}"
        )


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


# -- real data: eofs' example sea-surface temperatures ---------------------------------
@pytest.fixture(scope="session")
def sst_dataset():
    """eofs' example file ``sst_ndjfm_anom.nc`` as a Dataset of its ``sst`` variable,
    loaded: (time 50, latitude 18, longitude 30) winter anomalies, NaN over land (1/6
    of the cells). Shared by the session: tests must not change it in place."""
    eofs_examples = pytest.importorskip("eofs.examples")
    path = eofs_examples.example_data_path("sst_ndjfm_anom.nc")
    # netCDF-3 classic: scipy's engine reads it (netCDF4 and h5netcdf read only
    # netCDF-4)
    with xr.open_dataset(path, engine="scipy") as ds:
        return ds[["sst"]].load()


@pytest.fixture(scope="session")
def sst(sst_dataset):
    """The SST field of :func:`sst_dataset` as a DataArray."""
    return sst_dataset["sst"]


@pytest.fixture(scope="session")
def sst_hgt(sst):
    """(sst, hgt) of eofs' example files over their common winters 1963-2012, the
    time of ``sst`` on both, latitudes in float64 (xeofs computes its √cos φ weights
    in the coordinate's dtype; scalepca always in float64). Shared: tests must not
    change them."""
    eofs_examples = pytest.importorskip("eofs.examples")
    path = eofs_examples.example_data_path("hgt_djf.nc")
    with xr.open_dataset(path, decode_times=False, engine="scipy") as ds:
        hgt = ds["z"].isel(pressure=0, drop=True).load()
    hours = hgt["time"].values.astype("int64").astype("timedelta64[h]")
    years = (np.datetime64("0001-01-01T00", "h") + hours).astype("datetime64[Y]")
    common = years >= np.datetime64("1963", "Y")
    np.testing.assert_array_equal(
        years[common], sst["time"].values.astype("datetime64[Y]")
    )
    hgt = hgt.isel(time=common).assign_coords(time=sst["time"].values)
    f64 = {"latitude": lambda a: a["latitude"].astype(np.float64)}
    return sst.assign_coords(**f64), hgt.assign_coords(**f64)


# -- remote object stores: moto's S3 server --------------------------------------------
S3_BUCKET = "scalepca-test"


@pytest.fixture(scope="module")
def s3():
    """(storage_options, s3fs filesystem) of a moto S3 server with one bucket
    (``S3_BUCKET``), in a thread of the test process on 127.0.0.1 and a free port;
    skips where s3fs or moto is missing."""
    s3fs = pytest.importorskip("s3fs")
    moto_server = pytest.importorskip("moto.server")

    (port,) = free_ports(1)
    server = moto_server.ThreadedMotoServer(
        ip_address="127.0.0.1", port=port, verbose=False
    )
    server.start()
    opts = {
        "key": "testing",
        "secret": "testing",
        "endpoint_url": f"http://127.0.0.1:{port}",
        "client_kwargs": {"region_name": "us-east-1"},
    }
    try:
        s3fs.S3FileSystem.clear_instance_cache()
        import boto3

        boto3.client(
            "s3",
            endpoint_url=opts["endpoint_url"],
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        ).create_bucket(Bucket=S3_BUCKET)
        fs = s3fs.S3FileSystem(**opts)
        yield opts, fs
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
        server.stop()


# -- a synthetic gridded field ---------------------------------------------------------
#: (lat index, lon index) cells of :func:`field` that are land
FIELD_LAND = [(0, 0), (0, 1), (0, 2), (2, 5), (3, 5)]


def field(rng, nt=60, ny=6, nx=8, *, land=True, gaps=0.0, members=None):
    """A (time, lat, lon) field: 3 spatial patterns + noise + a mean, NaN over land."""
    lat = np.linspace(70.0, -70.0, ny)  # descending, as in many climate files
    lon = np.arange(nx) * 45.0
    pats = rng.standard_normal((3, ny, nx))
    amp = rng.standard_normal((nt, 3)) * [3.0, 2.0, 1.0]
    data = (
        np.einsum("tk,kyx->tyx", amp, pats)
        + 0.3 * rng.standard_normal((nt, ny, nx))
        + 5.0
    )
    if land:
        for y, x in FIELD_LAND:
            data[:, y, x] = np.nan
    if gaps:
        sea = ~np.isnan(data)
        data[sea & (rng.random(data.shape) < gaps)] = np.nan
    coords = {"time": np.arange(nt), "lat": lat, "lon": lon}
    arr = xr.DataArray(
        data,
        dims=("time", "lat", "lon"),
        coords=coords,
        name="sst",
        attrs={"units": "K"},
    )
    if members:
        arr = xr.concat(
            [arr + 0.1 * m for m in range(members)], dim="member"
        ).assign_coords(member=np.arange(members))
    return arr


# -- land masks: features NaN in every sample ------------------------------------------
def land_over(X, cols):
    """``X`` with the columns ``cols`` set to NaN in every row, and the mask of the
    kept columns: ``(X with land, keep)``; the fit on it must equal the fit on
    ``X[:, keep]``."""
    Xn = np.array(X, copy=True)
    Xn[:, list(cols)] = np.nan
    keep = np.ones(Xn.shape[1], dtype=bool)
    keep[list(cols)] = False
    return Xn, keep


def land_inserted(X, at):
    """``X`` with all-NaN columns inserted before the columns ``at`` (``np.insert``),
    and the mask of the original columns: ``(X with land, keep)``;
    ``X_with_land[:, keep]`` is ``X``."""
    Xn = np.insert(X, list(at), np.nan, axis=1)
    return Xn, ~np.isnan(Xn).all(axis=0)


def arrays_in(obj):
    """The NumPy arrays inside a computed result (nested dicts, lists and tuples)."""
    if isinstance(obj, np.ndarray):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from arrays_in(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from arrays_in(v)


@contextmanager
def recorded_results():
    """Run dask computes synchronously and collect what each returns to the client (a
    list)."""
    results = []

    def recording_get(dsk, keys, **kwargs):
        out = dask.get(dsk, keys, **kwargs)
        results.append(out)
        return out

    with dask.config.set(scheduler=recording_get):
        yield results


@pytest.fixture
def raise_if_dask_computes():
    """Context factory: ``with raise_if_dask_computes(max_computes=0): ...``."""
    from contextlib import contextmanager

    @contextmanager
    def ctx(max_computes: int = 0):
        counter = ComputeCounter()
        with dask.config.set(scheduler=counter):
            yield counter
        if counter.count > max_computes:
            raise RuntimeError(
                f"dask computed {counter.count} times; at most {max_computes} allowed"
            )

    return ctx


def low_rank_data(rng, n=600, d=24, rank=5, noise=0.3, offset=3.0):
    """Low rank + isotropic noise with a non-zero mean (exercises centring)."""
    A = rng.standard_normal((n, rank)) * np.linspace(5, 1, rank)
    B = np.linalg.qr(rng.standard_normal((d, rank)))[0].T
    return A @ B + offset + noise * rng.standard_normal((n, d))


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A single-node SLURM on loopback (tests/support/slurm.py), for the session; skips,
    saying how to enable it, where the binaries are missing or the tests do not run as
    root.

    ``SLURM_CONF`` is set in this process's environment while it runs, so ``sbatch``,
    ``squeue`` and ``scancel`` — also those dask-jobqueue and the ``scalepca`` CLI
    call — talk to it. At the end every job is cancelled and the daemons are stopped.
    """
    import os

    from .support.slurm import LoopbackSlurm, why_not

    reason = why_not()
    if reason:
        pytest.skip(reason)
    cluster = LoopbackSlurm(tmp_path_factory.mktemp("slurm"))
    old = os.environ.get("SLURM_CONF")
    try:
        cluster.start()
        os.environ.update(cluster.env)
        yield cluster
    finally:
        cluster.stop()
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old


# -- the quick tier: `pytest -m quick` -------------------------------------------------
#: the inner-loop tier (``-m quick``; docs/development.md): a few small tests that
#: between them run every module of ``scalepca/``, checked with
#: ``python -m pytest -m quick -p tests.support.touched``; a test named without
#: parameters runs with all of them
QUICK = (
    "test_analysis_contract.py::test_n_components_is_the_only_name",
    "test_analysis_prep.py::test_cli_transform_refuses_before_compute",
    "test_anndata.py::test_an_anndata_object_is_taken_as_it_is",
    "test_bootstrap_eof.py::test_poisson_weights_depend_on_the_row_only",
    "test_checkpoint.py::test_fingerprint_names_the_differing_key",
    "test_cli.py::test_make_data_matrices",
    "test_cluster.py::test_connect_local_is_a_context_manager",
    "test_coalesce.py::test_many_small_chunks_become_few_tasks",
    "test_codecs.py::test_outputs_round_trip",
    "test_codecs.py::test_registry",
    "test_cohorts.py::test_dosages_are_multiplied_in_float64",
    "test_cohorts.py::test_list_of_beds_is_one_matrix",
    "test_config.py::test_configs_present",
    "test_contract.py::test_contract[PCA-covariance_eigh/numpy/none/MCA-randomized]",
    "test_contract.py::test_contract[PCA-randomized/plink-bed/standardize=genotype/transform]",
    "test_contract.py::test_contract[PCA-sketch/numpy/none/transform]",
    "test_contract.py::test_contract[SparsePCA-elasticnet/numpy/none/transform]",
    "test_count_screen.py::test_screen_gives_the_direct_tests_entries[1000-0.1-None]",
    "test_coupled_fields.py::test_refuses_more_coupled_modes_than_modes",
    "test_csr_gram.py::test_counts_exact",
    "test_dask_frames.py::test_open_matrix_keeps_the_frame_lazy",
    "test_eof.py::test_find_lat_lon",
    "test_eof_fields.py::test_scalings_bad_input",
    "test_extended_eof.py::test_bad_input",
    "test_feature_names.py::test_names_on_one_side_warn_as_scikit_learn_does",
    "test_genotypes.py::test_bad_plink_options_refused_before_compute",
    "test_hilbert_eof.py::test_propagating_wave_has_linear_phase",
    "test_import_time.py::test_import_loads_no_heavy_dependency",
    "test_iterate.py::test_callback_sees_every_iteration",
    "test_kernel_pca.py::test_exact_ratio_and_trace",
    "test_mca.py::test_cross_operator_against_dense",
    "test_min_versions.py::test_persist_under_the_progress_bar_keeps_blocks_on_workers",
    "test_moments.py::test_column_moments_of_2d_blocks",
    "test_multivariate_eof.py::test_bad_input",
    "test_netcdf.py::test_classic_netcdf_and_magic_bytes",
    "test_open_options.py::test_bad_open_options_are_named",
    "test_packed.py::test_block_products_equal_decode_then_multiply",
    "test_packed.py::test_only_a_bed_matrix_as_opened_reads_packed",
    "test_params.py::test_table_is_the_init_signature",
    "test_partial_fit.py::test_an_update_reads_its_batch_once",
    "test_passes.py::test_fold_merges_left_to_right_then_finishes",
    "test_pca.py::test_covariance_eigh_matches_lapack",
    "test_pca.py::test_matches_sklearn",
    "test_pca.py::test_other_solvers_match_lapack",
    "test_plot.py::test_components_as_profiles",
    "test_ppca.py::test_closed_form_formulas",
    "test_ppca_em.py::test_batched_spd_inverse",
    "test_ppca_em.py::test_em_converges_to_closed_form",
    "test_preprocessing.py::test_chunks_by_dim_name_and_axis",
    "test_report.py::test_closed_form_and_chunks_in_words",
    "test_resources.py::test_without_a_client_this_machine",
    "test_robust_pca.py::test_full_svd_path_matches_numpy_reference",
    "test_singlecell.py::test_passes_of_the_pipeline",
    "test_singlecell.py::test_pca_of_a_store_writes_scanpys_results_without_rewriting_x",
    "test_singlecell_counts.py::test_one_nan_is_one_nan",
    "test_solver_choice.py::test_a_need_no_solver_meets_is_named",
    "test_sparse_pca.py::test_adjusted_variance_is_qr_of_the_scores",
    "test_sparse_pca.py::test_enet_gram_path_matches_sklearn_lars",
    "test_store.py::test_round_trip_identical_transform",
    "test_update.py::test_a_store_that_shrank_is_refused",
    "test_update.py::test_only_the_new_rows_are_read",
    "test_validate.py::test_valid_config_reports_the_shape",
    "test_validation.py::test_dense_input_still_accepted",
    "test_validation_sparse.py::test_integer_counts_are_widened_with_a_warning",
    "test_wide.py::test_gram_operator_pass_equals_dense_product",
    "test_xarray_eof.py::test_open_matrix_stacks_lazily",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark the tests of :data:`QUICK` ``quick`` before ``-m`` selects."""
    quick, found, files = set(QUICK), set(), set()
    for item in items:
        name = item.nodeid.removeprefix("tests/")
        files.add(name.split("::", 1)[0])
        for key in (name, name.split("[", 1)[0]):
            if key in quick:
                item.add_marker(pytest.mark.quick)
                found.add(key)
    # a test renamed or removed would leave the tier silently
    lost = sorted(k for k in quick - found if k.split("::", 1)[0] in files)
    if config.getoption("markexpr") == "quick" and lost:
        raise pytest.UsageError(f"QUICK names tests that are not collected: {lost}")
