"""The in-memory trajectory frame of docs/design.md: one row per point.

Columns: ``object_id`` (str), ``traj_id`` (int), ``seq`` (int, order within the trajectory),
``t`` (datetime64[UTC]), ``lon``, ``lat`` (EPSG:4326); after projection ``x``, ``y`` (metres, local CRS);
after gridding ``cell`` (int, from a :class:`trajpub.grid.GridSpec`).
"""

from __future__ import annotations

import pandas as pd

from trajpub.errors import InputError


def require_columns(df: pd.DataFrame, columns: tuple[str, ...], where: str) -> None:
    """Raise :class:`InputError` naming the missing columns."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", where)
