"""Persistence: the registry of scalepca's estimators (method and class names,
parameter checks) and reading model stores back (:func:`scalepca.load`). Writing them
(``est.save``) is the estimators' own step, in :mod:`scalepca.models._saving`."""
