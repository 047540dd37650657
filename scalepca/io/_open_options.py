"""xarray's open options for stores read through xarray (NetCDF/HDF5 files, xarray zarr
stores).

``open_options`` (``open_matrix(..., open_options=...)``, the config's
``data.decode_times``, ``data.engine`` and ``data.use_cftime``) go to
``xr.open_dataset`` / ``xr.open_mfdataset`` / ``xr.open_zarr``:

- ``decode_times`` (bool): decode CF times (default true, xarray's); ``false`` keeps
  them as numbers in their stored units, e.g. for a calendar NumPy cannot hold without
  cftime;
- ``use_cftime`` (bool): decode times to ``cftime`` objects (``true``, needs the cftime
  package) or to NumPy datetimes (``false``); given to xarray as its time coder;
- ``engine`` (str): the xarray backend that reads a NetCDF/HDF5 file (``h5netcdf``,
  ``netcdf4``, ``scipy``; default: xarray's choice from the file's first bytes).

A time axis xarray cannot decode (``hours since 1-1-1`` in the Gregorian calendar, as
in eofs' ``hgt_djf.nc``, without cftime) is reported as :class:`TimeDecodeError`,
which names the options that open the file.
"""

from __future__ import annotations

import importlib.util

import xarray as xr

__all__ = [
    "OPEN_OPTIONS",
    "OpenOptionError",
    "TimeDecodeError",
    "check_open_options",
    "xarray_kwargs",
]

#: the accepted open options and their types
OPEN_OPTIONS = {"decode_times": bool, "use_cftime": bool, "engine": str}


class TimeDecodeError(ValueError):
    """xarray could not decode the time axis of ``path``; ``reason`` is xarray's
    message.

    The message says what to pass in Python; an application states it in its own words
    (the config's keys) from ``path`` and ``reason``."""

    def __init__(self, path: str, reason: str):
        self.path, self.reason = path, reason
        super().__init__(
            f"cannot decode the times of {path!r} ({reason.split('. Try')[0]}); "
            "open it with open_options={'decode_times': False} to keep the "
            "times as numbers, or install cftime (pip install cftime) and pass "
            "open_options={'use_cftime': True}"
        )


class OpenOptionError(ValueError):
    """An open option that does not apply to the store at hand, or that failed to
    open it: ``key`` (the option) and ``detail`` (the rest of the sentence), so that
    an application names the option in its own words."""

    def __init__(self, key: str, detail: str):
        self.key, self.detail = key, detail
        super().__init__(f"open_options[{key!r}] {detail}")


def is_time_decode_error(err: BaseException) -> bool:
    """Whether ``err`` is xarray's refusal to decode a time axis."""
    text = str(err)
    return isinstance(err, ValueError) and (
        "decode time" in text or "decode_times" in text
    )


def check_open_options(options, *, netcdf: bool, name=None) -> dict:
    """``options`` checked (names, types, engine installed); ``{}`` for None.

    ``netcdf``: the store is a NetCDF/HDF5 file (``engine`` applies; a zarr store is
    read by xarray's zarr engine). ``name(key)`` names an option in messages (default
    ``open_options['key']``; an application passes its own, e.g. ``'data.key'``)."""
    if name is None:

        def name(key):
            return f"open_options[{key!r}]"

    if options is None:
        return {}
    if not isinstance(options, dict):
        raise ValueError(
            f"open_options must be a mapping of xarray open options "
            f"({', '.join(OPEN_OPTIONS)}); got {options!r}"
        )
    unknown = sorted(set(options) - set(OPEN_OPTIONS))
    if unknown:
        raise ValueError(
            f"open_options: unknown option(s) {unknown}; allowed: "
            f"{', '.join(OPEN_OPTIONS)}"
        )
    out = {k: v for k, v in options.items() if v is not None}
    for key, value in out.items():
        if not isinstance(value, OPEN_OPTIONS[key]):
            raise ValueError(
                f"{name(key)} must be "
                f"{'true or false' if OPEN_OPTIONS[key] is bool else 'a name'}; got {value!r}"
            )
    if out.get("use_cftime") is not None and out.get("decode_times") is False:
        raise ValueError(
            f"{name('use_cftime')} chooses how times are decoded, and "
            f"{name('decode_times')} is false: set one of them"
        )
    if out.get("use_cftime") and importlib.util.find_spec("cftime") is None:
        raise ValueError(
            f"{name('use_cftime')} is true, but cftime is not installed "
            "(pip install cftime)"
        )
    if "engine" in out:
        if not netcdf:
            raise ValueError(
                f"{name('engine')} applies to NetCDF/HDF5 files; a zarr store is "
                "read by xarray's zarr engine (remove it)"
            )
        engines = sorted(
            e for e in xr.backends.list_engines() if e not in ("store", "zarr")
        )
        if out["engine"] not in engines:
            raise ValueError(
                f"{name('engine')} {out['engine']!r} is not an installed xarray "
                f"engine for NetCDF/HDF5 files; installed: {', '.join(engines)}"
            )
    return out


def config_problem(keys: dict) -> str | None:
    """What is wrong with a run config's ``data`` open keys (``decode_times``,
    ``use_cftime``, ``engine``; None values unset) in the config's words, from names
    and types alone (whether they apply to the store at ``data.path`` is checked by
    the config, from ``data.format``, and when it is opened); None if nothing."""
    given = {k: v for k, v in keys.items() if v is not None}
    if not given:
        return None
    try:
        check_open_options(given, netcdf=True, name=lambda key: f"'data.{key}'")
    except ValueError as err:
        return str(err)
    return None


def xarray_kwargs(options: dict) -> dict:
    """Checked ``options`` as keywords of xarray's open functions (``use_cftime`` as the
    ``decode_times`` time coder, xarray's current spelling)."""
    kwargs = {k: v for k, v in options.items() if k != "use_cftime"}
    if options.get("use_cftime") is not None:
        kwargs["decode_times"] = xr.coders.CFDatetimeCoder(
            use_cftime=options["use_cftime"]
        )
    return kwargs
