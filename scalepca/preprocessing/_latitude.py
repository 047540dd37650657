"""The latitude of gridded data, found by its meaning, and the area weights computed from it.

One rule for every caller: ``open_matrix(weights="sqrt_coslat" | "coslat")``, the CLI's
``data.weights``, :func:`scalepca.analysis.eof.coslat_weights` and
:func:`scalepca.analysis.eof.find_lat_lon` (map axes of :mod:`scalepca.analysis.plot`).

A coordinate is the latitude when cf_xarray (an optional dependency, the ``netcdf`` extra)
identifies it as ``latitude`` after ``guess_coord_axis``: by its CF attributes
(``standard_name: latitude``, ``units: degrees_north``, ``_CoordinateAxisType: Lat``) or by a
latitude name (``lat``, ``latitude``, ``nav_lat``, ...). Without cf_xarray the names ``lat``
and ``latitude`` are. A generic ``y`` axis is not a latitude (it is often a projected
coordinate in metres). The coordinate found must then be in degrees: units, if given, of
degrees (north), and values within [−90, 90]; otherwise the data are refused, since cos φ of
a distance in metres is no area weight.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

#: names taken as latitude / longitude when cf_xarray is not installed
LATITUDE_NAMES = ("lat", "latitude")
LONGITUDE_NAMES = ("lon", "longitude")

#: units of a latitude in degrees (CF's degrees_north spellings, and plain degrees)
DEGREES_NORTH = ("degrees_north", "degree_north", "degree_N", "degrees_N", "degreeN",
                 "degreesN", "degrees", "degree", "deg")


class LatitudeError(KeyError, ValueError):
    """The data have no latitude coordinate in degrees (a ``KeyError`` for a missing
    coordinate, as :func:`scalepca.analysis.eof.find_lat_lon` documents, and a ``ValueError``)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def _guessed(obj, key: str, names: tuple) -> list[str]:
    """Names of the coordinates of ``obj`` that are ``key`` (``latitude``/``longitude``)."""
    try:
        import cf_xarray  # noqa: F401  (registers the .cf accessor)
    except ImportError:
        return [n for n in names if n in obj.coords]
    guessed = obj.cf.guess_coord_axis(verbose=False)
    return [n for n in guessed.cf.coordinates.get(key, []) if n in obj.coords]


def find_latitude(obj) -> xr.DataArray:
    """The latitude coordinate of ``obj`` (DataArray or Dataset), checked to be in degrees.

    Raises :class:`LatitudeError` when there is none, or when the coordinate found is not a
    latitude in degrees (other units, values beyond ±90).
    """
    found = _guessed(obj, "latitude", LATITUDE_NAMES)
    if not found:
        coords = ", ".join(map(str, obj.coords)) or "none"
        raise LatitudeError(
            f"the data have no latitude coordinate (coordinates: {coords}); weighting by "
            "latitude needs a 'lat' or 'latitude' coordinate in degrees north, or one with "
            "standard_name='latitude' or units='degrees_north' (a projected y is no latitude)"
        )
    lat = obj.coords[found[0]]
    units = lat.attrs.get("units")
    if units is not None and str(units) not in DEGREES_NORTH:
        raise LatitudeError(f"coordinate {lat.name!r} has units {units!r}; a latitude is in "
                            "degrees north (units='degrees_north')")
    values = np.asarray(lat.values)
    if values.dtype.kind not in "iuf":
        raise LatitudeError(f"coordinate {lat.name!r} is of dtype {values.dtype}; a latitude is "
                            "a number of degrees north")
    worst = float(np.nanmax(np.abs(values), initial=0.0))
    if worst > 90.0:
        raise LatitudeError(f"coordinate {lat.name!r} reaches {worst:.6g}, beyond ±90: it is not "
                            "a latitude in degrees north")
    return lat


def find_longitude(obj) -> xr.DataArray | None:
    """The longitude coordinate of ``obj`` found as :func:`find_latitude` finds the latitude,
    or ``None`` (used for map axes only, so not checked further)."""
    found = _guessed(obj, "longitude", LONGITUDE_NAMES)
    return obj.coords[found[0]] if found else None


def coslat(obj, power: float = 1.0) -> xr.DataArray:
    """``cos(latitude) ** power`` over the latitude coordinate of ``obj``.

    Negative cosines from rounding at the poles are clipped to 0; ``power=0.5`` is taken as
    ``np.sqrt`` (the √cos φ weighting of EOF analysis).
    """
    lat = find_latitude(obj)
    w = np.cos(np.deg2rad(lat.astype(np.float64))).clip(min=0.0)
    return np.sqrt(w) if power == 0.5 else w if power == 1 else w**power
