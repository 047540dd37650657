"""The latitude of gridded data, found by its meaning, and the area weights computed
from it.

One rule for every caller: ``open_matrix(weights="sqrt_coslat" | "coslat")``, the CLI's
``data.weights``, :func:`scalepca.analysis.eof.coslat_weights` and
:func:`scalepca.analysis.eof.find_lat_lon` (map axes of :mod:`scalepca.analysis.plot`).

A coordinate is the latitude when its CF attributes say so (CF conventions §4.1:
``standard_name: latitude``, or ``units`` of degrees north in any of CF's spellings, or
netCDF-Java's ``_CoordinateAxisType: Lat``); failing that, when it has a latitude's name
(``lat``, ``latitude``, ``nav_lat``, ``lat_z``, ...: the names cf_xarray guesses);
failing that, when its ``axis`` is ``Y``. The attributes are read here, so no extra is
needed. A generic ``y`` is not a latitude (it is often a projected coordinate in
metres), and the coordinate found must be in degrees: units, if given, of degrees
(north), and values within [−90, 90]; otherwise the data are refused, since cos φ of a
distance in metres is no area weight.
"""

from __future__ import annotations

import re

import numpy as np
import xarray as xr

#: CF's units of a latitude (§4.1) and of a longitude (§4.2)
LATITUDE_UNITS = (
    "degrees_north",
    "degree_north",
    "degree_N",
    "degrees_N",
    "degreeN",
    "degreesN",
)
LONGITUDE_UNITS = (
    "degrees_east",
    "degree_east",
    "degree_E",
    "degrees_E",
    "degreeE",
    "degreesE",
)

#: units of a latitude in degrees (CF's degrees_north spellings, and plain degrees)
DEGREES_NORTH = (*LATITUDE_UNITS, "degrees", "degree", "deg")

#: what says latitude / longitude, strongest first: CF attributes (standard_name,
#: units, _CoordinateAxisType), a name (cf_xarray's guesses, matched from its start),
#: axis
_EVIDENCE = {
    "latitude": (
        {
            "standard_name": ("latitude",),
            "units": LATITUDE_UNITS,
            "_CoordinateAxisType": ("Lat",),
        },
        re.compile(r"y?(nav_lat|lat|gphi)[a-z0-9]*"),
        "Y",
    ),
    "longitude": (
        {
            "standard_name": ("longitude",),
            "units": LONGITUDE_UNITS,
            "_CoordinateAxisType": ("Lon",),
        },
        re.compile(r"x?(nav_lon|lon|glam)[a-z0-9]*"),
        "X",
    ),
}


class LatitudeError(KeyError, ValueError):
    """The data have no latitude coordinate in degrees (a ``KeyError`` for a missing
    coordinate, as :func:`scalepca.analysis.eof.find_lat_lon` documents, and a
    ``ValueError``)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def _guessed(obj, key: str) -> list:
    """Names of the coordinates of ``obj`` that are ``key`` (``latitude`` or
    ``longitude``), those of the strongest evidence found (the module's docstring)."""
    attributes, name, axis = _EVIDENCE[key]
    coords = obj.coords
    tiers = (
        lambda c: any(
            str(c.attrs.get(a, "")) in said for a, said in attributes.items()
        ),
        lambda c: name.match(str(c.name).lower()) is not None,
        lambda c: c.attrs.get("axis") == axis,
    )
    for says in tiers:
        found = [n for n in coords if says(coords[n])]
        if found:
            return found
    return []


def find_latitude(obj) -> xr.DataArray:
    """The latitude coordinate of ``obj`` (DataArray or Dataset), checked to be in
    degrees.

    Raises :class:`LatitudeError` when there is none, or when the coordinate found is
    not a latitude in degrees (other units, values beyond ±90).
    """
    found = _guessed(obj, "latitude")
    if not found:
        coords = ", ".join(map(str, obj.coords)) or "none"
        raise LatitudeError(
            f"the data have no latitude coordinate (coordinates: {coords}); "
            "weighting by latitude needs a 'lat' or 'latitude' coordinate in "
            "degrees north, or one with standard_name='latitude', "
            "units='degrees_north' or axis='Y' (a projected y is no latitude)"
        )
    lat = obj.coords[found[0]]
    units = lat.attrs.get("units")
    if units is not None and str(units) not in DEGREES_NORTH:
        raise LatitudeError(
            f"coordinate {lat.name!r} has units {units!r}; a latitude is in "
            "degrees north (units='degrees_north')"
        )
    values = np.asarray(lat.values)
    if values.dtype.kind not in "iuf":
        raise LatitudeError(
            f"coordinate {lat.name!r} is of dtype {values.dtype}; a latitude is "
            "a number of degrees north"
        )
    worst = float(np.nanmax(np.abs(values), initial=0.0))
    if worst > 90.0:
        raise LatitudeError(
            f"coordinate {lat.name!r} reaches {worst:.6g}, beyond ±90: it is not "
            "a latitude in degrees north"
        )
    return lat


def find_longitude(obj) -> xr.DataArray | None:
    """The longitude coordinate of ``obj`` found as :func:`find_latitude` finds the
    latitude, or ``None`` (used for map axes only, so not checked further)."""
    found = _guessed(obj, "longitude")
    return obj.coords[found[0]] if found else None


def coslat(obj, power: float = 1.0) -> xr.DataArray:
    """``cos(latitude) ** power`` over the latitude coordinate of ``obj``.

    Negative cosines from rounding at the poles are clipped to 0; ``power=0.5`` is
    taken as ``np.sqrt`` (the √cos φ weighting of EOF analysis).
    """
    lat = find_latitude(obj)
    w = np.cos(np.deg2rad(lat.astype(np.float64))).clip(min=0.0)
    if power == 0.5:
        return np.sqrt(w)
    if power == 1:
        return w
    return w**power
