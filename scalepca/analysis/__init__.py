"""Tools over fitted models: EOF analysis (:mod:`~scalepca.analysis.eof`) and figures
(:mod:`~scalepca.analysis.plot`, needs matplotlib)."""
