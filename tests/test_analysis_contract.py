"""MCA, HilbertEOF and BootstrapEOF on the estimators' one contract: exported beside PCA,
``n_components``, one save/load route (``est.save`` / :func:`scalepca.load`)."""

from __future__ import annotations

import pytest

import scalepca
import scalepca.analysis

TOOLS = ("MCA", "HilbertEOF", "BootstrapEOF")


def test_tools_at_the_top_level_and_listed_in_analysis():
    from scalepca.analysis.bootstrap import BootstrapEOF
    from scalepca.analysis.hilbert_eof import HilbertEOF
    from scalepca.analysis.mca import MCA

    assert (scalepca.MCA, scalepca.HilbertEOF, scalepca.BootstrapEOF) == (
        MCA, HilbertEOF, BootstrapEOF)
    assert set(TOOLS) <= set(scalepca.__all__) <= set(dir(scalepca))
    public = scalepca.analysis.__all__
    assert set(TOOLS) | {"Rotator", "north_test", "eofs_as_correlation"} <= set(public)
    assert set(public) <= set(dir(scalepca.analysis))
    for name in public:  # every listed name resolves, to the object its module defines
        assert getattr(scalepca.analysis, name) is not None
    assert scalepca.analysis.MCA is MCA
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        scalepca.analysis.nothing  # noqa: B018


@pytest.mark.parametrize("name", TOOLS)
def test_n_components_is_the_only_name(name):
    cls = getattr(scalepca, name)
    params = cls().get_params()
    assert params["n_components"] == 2 and "n_modes" not in params
    assert cls(3).n_components == 3
    with pytest.raises(TypeError):
        cls(n_modes=3)


def test_analysis_lists_what_it_maps():
    assert sorted(scalepca.analysis.__all__) == sorted(scalepca.analysis._PUBLIC)
