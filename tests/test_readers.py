"""The readers of input kinds (scalepca.preprocessing.readers): one registry, one
``detect``, and the contract matrix's input kinds all read through it."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from scalepca import open_matrix
from scalepca.app.config import DATA_FORMATS
from scalepca.preprocessing._steps import ATTR
from scalepca.preprocessing.readers import FORMATS, READERS, detect

from . import _contract as C


@pytest.fixture(scope="module")
def contract_kinds(tmp_path_factory):
    """Every input kind of the contract matrix as the user holds it, with the
    reader ``detect`` gives it."""
    pytest.importorskip("anndata")
    pytest.importorskip("bed_reader")
    out = {}
    for kind in C.INPUT_KINDS:
        tmp = tmp_path_factory.mktemp(kind.name)
        X = C.genotype_data() if kind.genotypes else C.base_data()
        source = kind.make(X, tmp)
        out[kind.name] = (kind, source, detect(source))
    return out


def test_every_reader_has_a_contract_kind(contract_kinds):
    """A new reader joins the contract matrix: each kind of the registry is the kind
    of at least one input of tests/_contract.py, and every input is read by one."""
    found = {reader for _, _, reader in contract_kinds.values()}
    assert found == set(READERS)


def test_path_kinds_are_path_readers(contract_kinds):
    """The contract's path inputs go to readers of paths, the others to readers of
    objects."""
    for kind, _, reader in contract_kinds.values():
        assert READERS[reader].paths if kind.path else READERS[reader].objects, (
            kind.name,
            reader,
        )


def test_config_formats_are_the_path_readers():
    """``data.format`` takes exactly the kinds a path may be read as."""
    assert set(DATA_FORMATS) == set(FORMATS)
    assert all(READERS[f].paths for f in FORMATS)


def test_describe_names_each_store(contract_kinds):
    """Every reader of paths describes its store (what ``scalepca info`` prints),
    naming the path on the first line, from metadata."""
    described = set()
    for kind, source, reader in contract_kinds.values():
        if not kind.path:
            continue
        lines = READERS[reader].describe(source)
        paths = source if isinstance(source, list) else [source]  # a list of .bed
        assert lines and all(p in lines[0] for p in paths), (kind.name, lines)
        described.add(reader)
    assert described == set(FORMATS)


def test_open_returns_the_matrix_and_its_record(contract_kinds):
    """A reader's ``open`` gives the matrix ``open_matrix`` returns and, beside it, the
    record of the steps that made it (the one the DataArray carries)."""
    _, field, reader = contract_kinds["xarray-field"]
    options = READERS[reader].options(field, dict(C.FIELD, weights="sqrt_coslat"))
    opened = READERS[reader].open(field, options)
    assert opened.preparation.weights is not None
    assert opened.matrix.attrs[ATTR] is opened.preparation
    X = open_matrix(field, weights="sqrt_coslat", **C.FIELD)
    np.testing.assert_array_equal(X.values, opened.matrix.values)
    np.testing.assert_allclose(
        X.values[:, :2] / C.base_data()[:, :2], np.sqrt(np.cos(np.deg2rad(-60.0)))
    )


def test_format_decides_a_path_and_not_an_object(tmp_path):
    """``format`` names the kind of a path; an object is of the kind its type says."""
    assert detect(str(tmp_path / "a.nc")) == "netcdf"
    assert detect(str(tmp_path / "a.nc"), format="zarr") == "zarr"
    assert detect(str(tmp_path / "x.h5ad")) == "anndata"
    assert detect(str(tmp_path / "x.zarr")) == "zarr"
    assert detect([str(tmp_path / "a.bed"), str(tmp_path / "b.bed")]) == "bed"
    assert detect(np.zeros((2, 2)), format="netcdf") == "array"
    assert detect(xr.DataArray(np.zeros((2, 2)))) == "xarray"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(layer="counts"), "layer='counts' applies to AnnData only"),
        (dict(dtype="float64"), "applies to PLINK .bed files only"),
        (dict(open_options={"decode_times": False}), "opened already"),
    ],
)
def test_options_of_another_kind_are_refused(kwargs, message):
    """An option that belongs to another kind is refused by name, before anything
    is read."""
    with pytest.raises(ValueError, match=message):
        open_matrix(np.zeros((4, 3)), **kwargs)
