"""Array typing shared by the step-time modules."""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
import numpy.typing as npt

FloatArray: TypeAlias = npt.NDArray[np.float64]
StrArray: TypeAlias = npt.NDArray[np.str_]
ArrayLike: TypeAlias = npt.ArrayLike


def as_float_array(values: ArrayLike) -> FloatArray:
    """``values`` as a float64 array of at least one dimension (no copy when possible)."""
    return np.atleast_1d(np.asarray(values, dtype=np.float64))
