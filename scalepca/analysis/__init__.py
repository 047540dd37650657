"""Tools over fitted models: EOF analysis (:mod:`~scalepca.analysis.eof`), eofs' scaled views,
reconstructions and projections (:mod:`~scalepca.analysis.eof_fields`), maximum covariance
analysis of two fields (:mod:`~scalepca.analysis.mca`) and figures
(:mod:`~scalepca.analysis.plot`, needs matplotlib)."""
