"""A hostile model store on s3:// (moto's S3 server, the ``s3`` fixture): refused
like a local one, and the command it names never runs."""

from __future__ import annotations

import pytest
import zarr

from scalepca.persistence.loading import load

from .conftest import S3_BUCKET as BUCKET


def test_hostile_store_on_s3_never_runs(s3, tmp_path):
    opts, _ = s3
    url = f"s3://{BUCKET}/models/evil.zarr"
    out = tmp_path / "pwned"
    store = zarr.storage.FsspecStore.from_url(
        url, storage_options=opts, read_only=False
    )
    group = zarr.open_group(store=store, mode="w")
    group.attrs.update(
        {
            "format": "scalepca-model",
            "format_version": 1,
            "complete": True,
            "class": "subprocess:Popen",
            "params": {"args": f"echo pwned > {out}", "shell": True},
            "scalars": {"n_features_in_": 2},
            "arrays": [],
            "lazy_arrays": [],
        }
    )
    with pytest.raises(
        ValueError, match=r"class 'subprocess:Popen' is not a scalepca estimator"
    ):
        load(url, storage_options=opts)
    assert not out.exists(), "the command named in the store ran"
