"""Remote object stores: s3:// input and output through fsspec, against moto's S3
server.

The server runs in a thread of the test process on 127.0.0.1 and a free port; nothing
leaves the machine.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import yaml
import zarr

import scalepca
from scalepca.cli import EXIT_OK, EXIT_USER_ERROR, main
from scalepca.datasets import make_low_rank, write_dataset

from .conftest import S3_BUCKET as BUCKET

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")


@pytest.fixture(scope="module")
def remote_data(s3):
    opts, _ = s3
    url = f"s3://{BUCKET}/data/x.zarr"
    data = make_low_rank(2000, 16, rank=3, chunk_rows=400, seed=5)
    write_dataset(data, url, storage_options=opts)
    return url, data.compute()


def _main(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_open_matrix_from_s3(s3, remote_data):
    opts, _ = s3
    url, X = remote_data
    A = scalepca.open_matrix(
        url, storage_options=opts, task_size=None
    )  # the store's chunks
    assert A.shape == X.shape and A.chunks[0] == (400,) * 5
    np.testing.assert_array_equal(A.compute(), X)


def test_python_calls_get_the_s3_defaults_and_the_users_options_win(
    s3, remote_data, monkeypatch
):
    """Every s3fs filesystem that ``open_matrix``, ``save`` and ``load`` open from
    Python (no config checked on the way) gets scalepca's retries and timeouts
    (``S3_CONFIG``); the user's ``config_kwargs`` win key by key, ``retries`` merged,
    and the user's dict is left as given."""
    import s3fs

    from scalepca.io._fs import S3_CONFIG

    opts, _ = s3
    url, X = remote_data
    made = []
    init = s3fs.S3FileSystem.__init__

    def spy(self, *args, **kwargs):
        config = copy.deepcopy(kwargs.get("config_kwargs"))
        # botocore rewrites the ``retries`` it is given as the same count of requests
        # (``total_max_attempts`` = retries + 1), and a filesystem unpickled (dask's
        # tokenize, a worker) is built from that form
        retries = (config or {}).get("retries") or {}
        if "total_max_attempts" in retries:
            retries["max_attempts"] = retries.pop("total_max_attempts") - 1
        made.append(config)
        init(self, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "__init__", spy)
    mine = {"connect_timeout": 3, "retries": {"max_attempts": 1}}
    merged = {
        **S3_CONFIG,
        "connect_timeout": 3,
        "retries": {**S3_CONFIG["retries"], "max_attempts": 1},
    }
    store = f"s3://{BUCKET}/models/defaults.zarr"
    for given, expected in (
        (opts, S3_CONFIG),
        ({**opts, "config_kwargs": mine}, merged),
    ):
        made.clear()
        s3fs.S3FileSystem.clear_instance_cache()  # each call opens its own
        A = scalepca.open_matrix(url, storage_options=given)
        np.testing.assert_array_equal(A.compute(), X)
        pca = scalepca.PCA(2).fit(A)
        pca.save(store, storage_options=given, overwrite=True)
        scalepca.load(store, storage_options=given)
        assert made and all(c == expected for c in made), made
    assert mine == {"connect_timeout": 3, "retries": {"max_attempts": 1}}


def test_model_round_trip_on_s3(s3, remote_data, capsys):
    opts, fs = s3
    url, X = remote_data
    ppca = scalepca.PPCA(3).fit(scalepca.open_matrix(url, storage_options=opts))
    store = f"s3://{BUCKET}/models/ppca.zarr"
    ppca.save(store, storage_options=opts)
    back = scalepca.load(store, storage_options=opts)
    np.testing.assert_array_equal(back.transform(X), ppca.transform(X))
    assert fs.exists(f"{BUCKET}/models/ppca.zarr/zarr.json")
    rc, out, _ = _main(capsys, "info", store, "--storage-options", json.dumps(opts))
    assert rc == EXIT_OK and "scalepca.models.ppca:PPCA (complete)" in out
    # remote stores cannot be renamed: the complete flag, written last, guards them
    group = zarr.open_group(
        zarr.storage.FsspecStore.from_url(store, storage_options=opts), mode="r+"
    )
    group.attrs["complete"] = False
    with pytest.raises(ValueError, match="incomplete model store"):
        scalepca.load(store, storage_options=opts)
    with pytest.raises(FileNotFoundError, match="no zarr store"):
        scalepca.load(f"s3://{BUCKET}/models/none.zarr", storage_options=opts)


def _s3_config(tmp_path, url, opts, out_url, *, n_components, threads, **output):
    """A run config of PCA on the data at ``url``, writing to ``out_url`` (one local
    worker)."""
    cfg = {
        "data": {"path": url, "storage_options": opts},
        "model": {"method": "pca", "n_components": n_components},
        "cluster": {
            "kind": "local",
            "n_workers": 1,
            "threads_per_worker": threads,
            "processes": False,
        },
        "output": {"store": out_url, "storage_options": opts, **output},
        "progress": False,
    }
    path = tmp_path / "s3.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_cli_run_and_transform_on_s3(tmp_path, s3, remote_data, capsys):
    opts, fs = s3
    url, X = remote_data
    out_url = f"s3://{BUCKET}/out"
    path = _s3_config(
        tmp_path, url, opts, out_url, n_components=3, threads=2, reconstruction=True
    )
    rc, out, err = _main(capsys, "run", path)
    assert rc == EXIT_OK, err
    assert f"written: {out_url}/scores.zarr" in out
    model = scalepca.load(f"{out_url}/model.zarr", storage_options=opts)
    ref = scalepca.PCA(3).fit(X)
    np.testing.assert_allclose(
        model.explained_variance_, ref.explained_variance_, rtol=1e-10
    )
    scores = scalepca.open_matrix(
        f"{out_url}/scores.zarr", variable="scores", storage_options=opts
    ).compute()
    np.testing.assert_array_equal(scores, model.transform(X))
    rec = scalepca.open_matrix(
        f"{out_url}/reconstruction.zarr",
        variable="reconstruction",
        storage_options=opts,
    ).compute()
    np.testing.assert_allclose(
        rec, model.inverse_transform(model.transform(X)), atol=1e-12
    )

    rc, out, err = _main(
        capsys,
        "transform",
        f"{out_url}/model.zarr",
        url,
        "--out",
        f"s3://{BUCKET}/scores2.zarr",
        "--storage-options",
        json.dumps(opts),
        "--no-processes",
        "--n-workers",
        1,
        "--no-progress",
    )
    assert rc == EXIT_OK, err
    again = scalepca.open_matrix(
        f"s3://{BUCKET}/scores2.zarr", variable="scores", storage_options=opts
    ).compute()
    np.testing.assert_array_equal(again, scores)


def test_cli_missing_s3_store(tmp_path, s3, capsys):
    opts, _ = s3
    cfg = {
        "data": {"path": f"s3://{BUCKET}/nothing.zarr", "storage_options": opts},
        "model": {"method": "pca"},
    }
    path = tmp_path / "missing.yaml"
    path.write_text(yaml.safe_dump(cfg))
    rc, _, err = _main(capsys, "run", path)
    assert rc == EXIT_USER_ERROR and "no zarr store at 's3://" in err
    assert len(err.strip().splitlines()) == 1


def test_make_data_to_s3(s3, capsys):
    opts, fs = s3
    url = f"s3://{BUCKET}/gen/rings.zarr"
    rc, _, err = _main(
        capsys,
        "make-data",
        url,
        "--kind",
        "rings",
        "--n-samples",
        500,
        "--chunk-rows",
        100,
        "--storage-options",
        json.dumps(opts),
        "--no-progress",
    )
    assert rc == EXIT_OK, err
    A = scalepca.open_matrix(
        url, storage_options=opts, task_size=None
    )  # the store's chunks
    assert A.shape == (500, 2) and A.chunks[0] == (100,) * 5


@pytest.mark.slow
@pytest.mark.distributed
def test_worker_processes_read_and_write_s3(s3, remote_data):
    """Worker processes (not threads of this process) read the input and write the
    scores."""
    from distributed import LocalCluster

    opts, _ = s3
    url, X = remote_data
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=True, dashboard_address=":0"
        ) as cluster,
        scalepca.connect(address=cluster.scheduler_address, quiet=True),
    ):
        A = scalepca.open_matrix(url, storage_options=opts)
        pca = scalepca.PCA(2).fit(A)
        from scalepca.io import write_array

        write_array(
            pca.transform(A), f"s3://{BUCKET}/proc/scores.zarr", storage_options=opts
        )
    got = scalepca.open_matrix(
        f"s3://{BUCKET}/proc/scores.zarr", variable="scores", storage_options=opts
    ).compute()
    np.testing.assert_allclose(
        got, scalepca.PCA(2).fit(X).transform(X), rtol=1e-9, atol=1e-9
    )


def test_in_place_writes_are_flagged_until_complete(s3, capsys):
    """Object stores have no rename: a dataset is flagged incomplete until its last
    block."""
    from scalepca.app.pipeline import generate_data

    opts, _ = s3
    url = f"s3://{BUCKET}/flag/x.zarr"
    gen = {
        "kind": "low_rank",
        "n_samples": 300,
        "n_features": 12,
        "rank": 2,
        "chunk_rows": 100,
    }
    generate_data(gen, url, storage_options=opts)
    store = zarr.storage.FsspecStore.from_url(
        url, storage_options=opts, read_only=False
    )
    arr = zarr.open_array(store=store, mode="r+")
    assert arr.attrs["complete"] is True
    X = arr[...]
    arr.attrs["complete"] = False  # as a killed writer leaves it
    with pytest.raises(ValueError, match="incomplete: its write was interrupted"):
        scalepca.open_matrix(url, storage_options=opts)
    generate_data(gen, url, storage_options=opts)  # `scalepca run` regenerates it
    assert "interrupted write; generating it again" in capsys.readouterr().out
    np.testing.assert_array_equal(
        scalepca.open_matrix(url, storage_options=opts).compute(), X
    )


def test_rewrite_keeps_previous_until_complete(s3, remote_data, monkeypatch):
    """An in-place rewrite on S3 first copies the complete store to ``.previous``; a
    rewrite that fails mid-way leaves it readable there, and the next complete
    rewrite removes it."""
    from scalepca.models import _saving as persist

    opts, fs = s3
    url, X = remote_data
    store = f"s3://{BUCKET}/rewrite/pca.zarr"
    first = scalepca.PCA(2).fit(X)
    first.save(store, storage_options=opts)
    assert not fs.exists(f"{BUCKET}/rewrite/pca.zarr.previous")

    real_write = persist.atomic_group

    def dies_mid_write(path, *, write=None, **kwargs):
        def half(group):
            group.attrs["format"] = "scalepca-model"
            # the process is stopped while the new store is written
            raise KeyboardInterrupt

        return real_write(path, write=half, **kwargs)

    monkeypatch.setattr(persist, "atomic_group", dies_mid_write)
    with pytest.raises(KeyboardInterrupt):
        scalepca.PCA(3).fit(X).save(store, storage_options=opts, overwrite=True)
    monkeypatch.undo()
    with pytest.raises(ValueError, match=r"pca\.zarr\.previous"):
        scalepca.load(store, storage_options=opts)
    kept = scalepca.load(f"{store}.previous", storage_options=opts)
    np.testing.assert_array_equal(kept.components_, first.components_)

    second = scalepca.PCA(3).fit(X)
    second.save(store, storage_options=opts)
    np.testing.assert_array_equal(
        scalepca.load(store, storage_options=opts).components_, second.components_
    )
    assert not fs.exists(f"{BUCKET}/rewrite/pca.zarr.previous")


def test_s3_writes_never_destroy(tmp_path, s3, remote_data, capsys):
    """On S3 as on disk (issue 38, item 5): notes under a prefix, the input store, a
    model without overwrite are never replaced; a missing bucket is found by validate
    (item 19)."""
    opts, fs = s3
    url, X = remote_data
    fs.pipe(f"{BUCKET}/notes/readme.txt", b"field notes\n")
    pca = scalepca.PCA(2).fit(X)
    with pytest.raises(FileExistsError, match="not a zarr store"):
        pca.save(f"s3://{BUCKET}/notes", storage_options=opts, overwrite=True)
    with pytest.raises(FileExistsError, match="not a scalepca model store"):
        pca.save(url, storage_options=opts, overwrite=True)
    assert fs.cat_file(f"{BUCKET}/notes/readme.txt") == b"field notes\n"
    np.testing.assert_array_equal(
        scalepca.open_matrix(url, storage_options=opts).compute(), X
    )
    store = f"s3://{BUCKET}/kept/m.zarr"
    pca.save(store, storage_options=opts)
    with pytest.raises(FileExistsError, match="pass overwrite=True"):
        scalepca.PPCA(2).fit(X).save(store, storage_options=opts)
    assert type(scalepca.load(store, storage_options=opts)) is scalepca.PCA
    # transform --out the data itself: refused before anything is read or written
    rc, _, err = _main(
        capsys,
        "transform",
        store,
        url,
        "--out",
        url,
        "--overwrite",
        "--storage-options",
        json.dumps(opts),
        "--quiet",
    )
    assert rc == EXIT_USER_ERROR and "is the data" in err, err
    cfg = {
        "data": {"path": url, "storage_options": opts},
        "model": {"method": "pca"},
        "output": {
            "store": "s3://no-such-bucket-scalepca/out",
            "storage_options": opts,
        },
    }
    path = tmp_path / "nobucket.yaml"
    path.write_text(yaml.safe_dump(cfg))
    rc, _, err = _main(capsys, "validate", path)
    assert rc == EXIT_USER_ERROR and "no bucket 'no-such-bucket-scalepca'" in err, err


def test_report_on_s3_shows_the_config_without_credentials(
    tmp_path, s3, remote_data, capsys
):
    """The run's report (written to S3) reproduces the config, credentials redacted."""
    import html

    opts, fs = s3
    url, _ = remote_data
    secret_opts = {
        **opts,
        "token": "session-token-4f2a9c",
    }  # moto accepts any session token
    out_url = f"s3://{BUCKET}/reported"
    path = _s3_config(
        tmp_path, url, secret_opts, out_url, n_components=2, threads=1, scores=False
    )
    rc, out, err = _main(capsys, "run", path)
    assert rc == EXIT_OK, err
    assert f"written: {out_url}/report.html" in out
    page = fs.cat(f"{BUCKET}/reported/report.html").decode()
    for value in ("testing", "session-token-4f2a9c"):
        assert value not in page, value
    text = html.unescape(
        page.split("<h2>Config</h2>", 1)[1].split("<pre>")[1].split("</pre>")[0]
    )
    shown = yaml.safe_load(text)
    for section in ("data", "output"):
        so = shown[section]["storage_options"]
        assert so["key"] == so["secret"] == so["token"] == "<redacted>"
        # what is not a credential stays, so the run can be repeated with the keys put
        # back
        assert so["endpoint_url"] == opts["endpoint_url"]
        assert so["client_kwargs"] == {"region_name": "us-east-1"}
    assert shown["data"]["path"] == url
