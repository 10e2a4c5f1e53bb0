"""Interpolation of measured latency tables, in log-log space.

Kernel latencies grow roughly as a power of the problem size between a fixed floor and a
linear regime, so tables are interpolated linearly in ``(log x, log t)``. Between two table
points the interpolant is monotone and stays between their values; at table points it
returns them exactly. Beyond the last point latencies are extrapolated in proportion to
the size (the linear, throughput-bound regime); below the first point they are held at
the first value (the latency floor).
"""

from __future__ import annotations

import numpy as np

from servesize.core.steptime._arrays import ArrayLike, FloatArray, as_float_array

__all__ = ["bilinear_loglog", "loglog_interp"]


def loglog_interp(x: ArrayLike, xp: FloatArray, fp: FloatArray) -> FloatArray:
    """Piecewise-linear interpolation of ``log fp`` over ``log xp`` at ``x``.

    ``xp`` must be strictly increasing and positive, ``fp`` positive. Values of ``x`` above
    ``xp[-1]`` scale as ``fp[-1] * x / xp[-1]``; values below ``xp[0]`` give ``fp[0]``.

    >>> import numpy as np
    >>> loglog_interp([1.0, 2.0, 4.0, 16.0], np.array([1.0, 4.0]), np.array([10.0, 40.0]))
    array([ 10.,  20.,  40., 160.])
    """
    xs = as_float_array(x)
    lx = np.log(np.maximum(xs, xp[0]))
    out: FloatArray = np.exp(np.interp(lx, np.log(xp), np.log(fp)))
    above = xs > xp[-1]
    if np.any(above):
        out[above] = fp[-1] * xs[above] / xp[-1]
    hit, index = _hits(xs, xp)
    out[hit] = fp[index[hit]]
    return out


def _hits(x: FloatArray, grid: FloatArray) -> tuple[np.ndarray, np.ndarray]:
    """Where ``x`` equals a grid point (exactly), and that point's index."""
    index = np.clip(np.searchsorted(grid, x), 0, len(grid) - 1)
    return np.asarray(grid[index] == x, dtype=bool), index


def bilinear_loglog(
    x: ArrayLike, y: ArrayLike, xp: FloatArray, yp: FloatArray, fp: FloatArray
) -> FloatArray:
    """Bilinear interpolation of ``log fp`` (shape ``(len(xp), len(yp))``) in ``(log x, log y)``.

    Queries are clamped to the grid on the ``x`` axis; on the ``y`` axis values beyond the last
    point scale linearly with ``y`` (as :func:`loglog_interp`). Exact at grid points.

    >>> import numpy as np
    >>> grid = np.array([[1.0, 2.0], [4.0, 8.0]])
    >>> bilinear_loglog([1.0, 2.0], [1.0, 2.0], np.array([1.0, 2.0]), np.array([1.0, 2.0]), grid)
    array([1., 8.])
    """
    xs, ys = np.broadcast_arrays(as_float_array(x), as_float_array(y))
    lxp, lyp, lf = np.log(xp), np.log(yp), np.log(fp)
    lx = np.clip(np.log(np.maximum(xs, xp[0])), lxp[0], lxp[-1])
    ly_raw = np.log(np.maximum(ys, yp[0]))
    ly = np.minimum(ly_raw, lyp[-1])
    i = np.clip(np.searchsorted(lxp, lx, side="right") - 1, 0, max(len(xp) - 2, 0))
    j = np.clip(np.searchsorted(lyp, ly, side="right") - 1, 0, max(len(yp) - 2, 0))
    if len(xp) == 1:
        wx = np.zeros_like(lx)
        i1 = i
    else:
        wx = (lx - lxp[i]) / (lxp[i + 1] - lxp[i])
        i1 = i + 1
    if len(yp) == 1:
        wy = np.zeros_like(ly)
        j1 = j
    else:
        wy = (ly - lyp[j]) / (lyp[j + 1] - lyp[j])
        j1 = j + 1
    value = (
        lf[i, j] * (1 - wx) * (1 - wy)
        + lf[i1, j] * wx * (1 - wy)
        + lf[i, j1] * (1 - wx) * wy
        + lf[i1, j1] * wx * wy
    )
    out = np.asarray(np.exp(value + (ly_raw - ly)), dtype=np.float64)
    hit_x, ix = _hits(xs, xp)
    hit_y, iy = _hits(ys, yp)
    both = hit_x & hit_y
    out[both] = fp[ix[both], iy[both]]
    return out
