"""Tools over fitted models: EOF analysis (:mod:`~scalepca.analysis.eof`), eofs' scaled views,
reconstructions and projections (:mod:`~scalepca.analysis.eof_fields`), maximum covariance
analysis of two fields (:mod:`~scalepca.analysis.mca`), Hilbert (complex) EOF analysis of
propagating patterns (:mod:`~scalepca.analysis.hilbert_eof`), EOFs with one-pass bootstrap
intervals (:mod:`~scalepca.analysis.bootstrap`) and figures
(:mod:`~scalepca.analysis.plot`, needs matplotlib)."""
