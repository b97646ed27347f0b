"""A peer path's loss as the screens write it: on the same side of its limit as the loss itself (no UI)."""

from __future__ import annotations

#: Most decimals a loss figure takes to stand on the right side of its limit.
LOSS_MAX_DECIMALS = 4


def loss_figure(loss_pct: float, limit_pct: float | None, width: int | None = None) -> str:
    """A window's loss (``3%``), with the decimals it needs near ``limit_pct`` to show on the same side
    of it as the loss itself: ``2.4%`` over a 2 % limit (whole, it read ``2%``, as if at the limit and
    not over it), ``1.6%`` under it; ``2%`` at it; whole without a limit.

    ``width``: the most cells the figure may take (a link matrix cell). When the decimals do not fit,
    the figure says the side instead: ``>12%`` for 12.4 % over a 12 % limit, ``<2%`` for 1.96 % under 2 %.
    """
    figure = f"{loss_pct:.0f}"
    for decimals in range(1, LOSS_MAX_DECIMALS + 1):
        shown = float(figure)
        if limit_pct is None or ((shown > limit_pct) == (loss_pct > limit_pct)
                                 and (shown == limit_pct) == (loss_pct == limit_pct)):
            break
        figure = f"{loss_pct:.{decimals}f}"
    if width is not None and limit_pct is not None and len(figure) + 1 > width and "." in figure:
        return f"{'>' if loss_pct > limit_pct else '<'}{limit_pct:g}%"
    return f"{figure}%"
