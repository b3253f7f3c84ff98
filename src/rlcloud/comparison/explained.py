"""Tables for people and for JSON: why a cell is empty (a notebook shows it instead of NaN), plain records."""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows as plain dicts for JSON/YAML: NaN becomes None (JSON has no NaN), numpy scalars Python's."""
    out = []
    for row in table.to_dict(orient="records"):
        out.append({str(k): _json_value(v) for k, v in row.items()})
    return out


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    item = getattr(value, "item", None)  # numpy scalars
    return _json_value(item()) if callable(item) and not isinstance(value, list | dict | str) else value


#: Reasons a summary cell is empty, in a few words, per column family (the ``notes`` column holds them).
_REASON_SEP = "; "


def _explained_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as a :class:`pandas.DataFrame` whose notebook view shows each empty cell's reason (from its
    row's ``notes``) instead of NaN; data, columns and dtypes are the frame's own."""
    explained = _explained_class()
    return explained(frame)


@functools.cache
def _explained_class() -> type[pd.DataFrame]:
    import pandas as pd  # built on first use: pandas is not imported with rlcloud

    class ExplainedFrame(pd.DataFrame):  # type: ignore[misc]  # pandas is untyped here
        """A DataFrame whose HTML view (a notebook's) shows why a cell is empty instead of NaN."""

        @property
        def _constructor(self) -> Any:
            return ExplainedFrame

        def _repr_html_(self) -> str | None:
            html: str | None = pd.DataFrame(explain(self))._repr_html_()
            return html

    # pickled as rlcloud.comparison.ExplainedFrame, which the module's __getattr__ builds in a new process
    ExplainedFrame.__module__ = __name__
    ExplainedFrame.__qualname__ = "ExplainedFrame"
    return ExplainedFrame


def __getattr__(name: str) -> Any:
    if name == "ExplainedFrame":  # built on first use (pandas); found here by pickle
        return _explained_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def row_reasons(notes: Any) -> dict[str, str]:
    """A summary row's ``notes`` as ``{column: reason}`` (a statistic's reason covers its bounds)."""
    out: dict[str, str] = {}
    if not isinstance(notes, str):
        return out
    for part in notes.split(_REASON_SEP):
        column, _, text = part.partition(": ")
        if text:
            out[column] = text
    return out


#: Why a per-run cell is empty, by column (the per-run table has no ``notes`` column).
RUN_REASONS: dict[str, str] = {
    "objective": "no episode yet",
    "final_evaluation": "no evaluation round",
    "wall_time": "no episode time",
    "steps_per_second": "not recorded",
    "seed": "unseeded",
    "threshold_timesteps": "not reached",
    "threshold_wall_time": "not reached",
}


def explain(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of a table for people: each NaN replaced by its reason in parentheses, ``"(needs 3 seeds)"``:
    in a summary the reason its row's ``notes`` gives for that column, in a per-run table the column's
    (:data:`RUN_REASONS`); other values as they are (object columns)."""
    out = frame.astype(object)
    notes = frame["notes"] if "notes" in frame.columns else [None] * len(frame)
    for i, row_notes in enumerate(notes):
        why = row_reasons(row_notes)
        for j, column in enumerate(frame.columns):
            cell = frame.iat[i, j]
            if isinstance(cell, float) and math.isnan(cell):
                base = str(column).removesuffix("_low").removesuffix("_high")
                text = why.get(str(column)) or why.get(base) or RUN_REASONS.get(str(column))
                out.iat[i, j] = f"({text})" if text else "-"
    return out


def _short_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
