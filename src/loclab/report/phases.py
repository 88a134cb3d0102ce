"""Where each row's time goes: the phases of a run made of steps (copy in, compute, copy out)
and, for a row whose data crosses the link between host and device, the ideal time
max(bytes in / H2D, bytes out / D2H, compute) and the time with no overlap at all (their sum).
The device-centric ``A x B x C`` shows its copies outweighing its products here; ``streams-k``
its time against both bounds."""

from __future__ import annotations

from loclab.cases.base import COMPUTE
from loclab.report.text import PLACE_COLUMNS, Column, Row, Table, number


def _ms(seconds: float | None) -> str:
    return number(seconds * 1e3 if seconds is not None else None)


def shown_rows(rows: list[Row]) -> list[Row]:
    """The timed rows that compute: with a compute phase, or an ideal with a compute term
    (copies alone are what the host-device case's own table rates)."""
    return [row for row in rows if row.get("median_s") and (
        COMPUTE in (row.get("phases") or {}) or (row.get("ideal") or {}).get("compute_s"))]


def phase_table(rows: list[Row], place: bool = False) -> Table | None:
    """The phases of ``rows`` beside their ideal and no-overlap times, or None where no row
    has either; ``place`` adds the device and size columns (the console shows one device and
    size a table, and says which in its title)."""
    shown = shown_rows(rows)
    if not shown:
        return None
    phases = list(dict.fromkeys(phase for row in shown for phase in row.get("phases") or {}))
    columns = [Column("variant", lambda r: r["variant"], numeric=False),
               *(PLACE_COLUMNS if place else []),
               Column("median", lambda r: _ms(r["median_s"]))]
    columns += [Column(phase, lambda r, p=phase: _ms((r.get("phases") or {}).get(p)))
                for phase in phases]
    columns += [Column("ideal", lambda r: _ms(r.get("ideal_s"))),
                Column("no overlap", lambda r: _ms(r.get("no_overlap_s")))]
    return Table.of(shown, columns)


def phase_note() -> str:
    return ("milliseconds; each phase timed on its own (the median of a few runs); ideal = "
            "max(bytes in / pinned H2D, bytes out / pinned D2H, bytes in and out / the link "
            "both ways at once, the fastest compute phase at this size), no overlap = in + out "
            "+ compute")
