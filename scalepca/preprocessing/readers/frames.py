"""Data frames: a dask DataFrame read as the dask array of its partitions, a pandas
DataFrame as the NumPy array of its values."""

from __future__ import annotations

import numpy as np

from .._steps import frame_matrix, is_dask_frame
from ._reader import Opened, Reader
from .arrays import ArrayOptions, dense_opened

__all__ = ["FrameReader"]


class FrameReader(Reader):
    """A dask or pandas DataFrame (columns: the features)."""

    kind = "frame"
    title = "DataFrame"
    paths, objects = False, True
    Options = ArrayOptions
    ignored = ("variable", "sample_dims", "feature_dims")

    def claims(self, source, storage_options=None) -> bool:
        return is_dask_frame(source) or (
            type(source).__module__.partition(".")[0] == "pandas"
            and hasattr(source, "columns")
        )

    def open(self, source, options: ArrayOptions) -> Opened:
        if not is_dask_frame(source):
            return dense_opened(np.asarray(source), options)
        # refused from its metadata before its partitions' rows are counted
        arr = frame_matrix(source, what="the DataFrame", weights=options.weights)
        return dense_opened(arr, options)
