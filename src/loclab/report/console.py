"""The results on the terminal (rich): a table per case, device and size, invalid rows in red.

Case, size and device move from columns into titles, so that a table fits 80 columns; the same
tables go to a file or a pipe (rich then renders 80 columns wide, without colour).
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table as RichTable
from rich.text import Text

from loclab.cases.base import dims_text
from loclab.report.kernels import disagreements, kernel_note, kernel_table
from loclab.report.phases import phase_note, phase_table
from loclab.report.text import (Table, by_case, by_section, case_heading, case_table, failures,
                                 gpu_note, number, reuse_lines, roof_line, skips)


def _case_title(document: dict[str, Any], case: str) -> Text:
    """The case's name and lesson, wrapped by the console to its width."""
    return Text.assemble((case, "bold"), "  ", (case_heading(document, case), "dim"))


def _table(title: str, table: Table, width: int) -> RichTable:
    """A table that fits ``width`` columns without cutting what a user needs: where it would
    be too wide, headers wrap at their spaces ('median ms' over two lines), then the columns
    move closer; a variant name or a number keeps its whole width (rich, left to itself,
    would shorten them to 'cpu-re…')."""

    def build(widths: list[int] | None, gap: int) -> RichTable:
        rich_table = RichTable(title=title, title_justify="left", box=box.SIMPLE_HEAD,
                               padding=(0, gap), pad_edge=False, collapse_padding=True)
        for index, (header, numeric) in enumerate(zip(table.headers, table.numeric)):
            rich_table.add_column(header, justify="right" if numeric else "left",
                                  width=widths[index] if widths else None)
        for cells, valid in zip(table.rows, table.valid):
            rich_table.add_row(*cells, style=None if valid else "bold red")
        return rich_table

    cells = [max((len(line[i]) for line in table.rows), default=0)
             for i in range(len(table.headers))]
    widest = [max(cell, len(header)) for cell, header in zip(cells, table.headers)]
    wide = Console(width=10**4)
    for gap in (1, 0):
        natural = build(None, gap)
        frame = Measurement.get(wide, wide.options, natural).maximum - sum(widest)
        if sum(widest) + frame <= width:
            return natural
        widths = _wrapped_header_widths(table.headers, cells, width - frame)
        if widths:
            return build(widths, gap)
    return build(None, 1)  # nothing fits: rich shortens what it must


def _wrapped_header_widths(headers: list[str], cells: list[int],
                           room: int) -> list[int] | None:
    """Column widths within ``room`` that wrap headers at their spaces and never cut a cell,
    the most wrappable headers first; None where they cannot fit."""
    widest = [max(cell, len(header)) for cell, header in zip(cells, headers)]
    narrowest = [max(cell, *(len(word) for word in header.split()))
                 for cell, header in zip(cells, headers)]
    widths = list(widest)
    for index in sorted(range(len(widths)), key=lambda i: narrowest[i] - widest[i]):
        widths[index] -= min(max(sum(widths) - room, 0), widest[index] - narrowest[index])
    return widths if sum(widths) <= room else None


def print_results(document: dict[str, Any], console: Console) -> None:
    """Per case its lesson, then a table per device and size (a case may sweep several
    sizes), its own metric first."""
    for case, rows in by_case(document).items():
        console.print(_case_title(document, case))
        for (device, size), section in by_section(rows).items():
            console.print(_table(f"{device.upper()}, {size}",
                                 case_table(document, case, section, place=False),
                                 console.width))
            kernels = kernel_table(section)
            if kernels:
                console.print(_table(f"{device.upper()}, {size}: kernels", kernels,
                                     console.width))
                for line in disagreements(section):
                    console.print(Text(line, style="yellow"))
            phases = phase_table(section)
            if phases:
                console.print(_table(f"{device.upper()}, {size}: where the time goes (ms)", phases,
                                     console.width))
    console.print(Text(roof_line(document)))
    if any(row.get("kernels") for row in document["results"]):
        console.print(Text(f"kernels: {kernel_note()}", style="dim"))
    if any(phase_table([row]) for row in document["results"]):
        console.print(Text(f"where the time goes: {phase_note()}", style="dim"))
    note = gpu_note(document)
    if note:
        console.print(Text(note, style="yellow"))
    for line in reuse_lines(document):
        console.print(Text.assemble(("in theory ", "dim"), line))
    for line in skips(document):
        console.print(Text.assemble(("not applicable ", "dim"), line))
    for line in failures(document):
        console.print(Text.assemble(("FAILED ", "bold red"), line))
    print_tuned_rows(document, console)


def print_tuned_rows(document: dict[str, Any], console: Console) -> None:
    """Which rows ran with a configuration from the tuning cache (the table does not say)."""
    from loclab.measure.space import text

    for row in document["results"]:
        if row["tuned"]:
            console.print(Text.assemble(("tuned ", "dim"), f"{row['case']} {row['variant']} "
                                        f"{dims_text(row['size'])}: "
                                        f"{text(row['tuned']['params'])} "
                                        f"(tuning cache, {row['tuned']['date']})"))


def size_text(record: dict[str, Any]) -> str:
    return f"({record['device']}, {dims_text(record['size'])})"


TRIAL_ORDER = {"valid": 0, "invalid": 1, "error": 2, "rejected": 3}


def _tune_rate(record: dict[str, Any]) -> tuple[str, int]:
    """The rate a tune table shows, and the golden work it divides: G of the case's unit per
    second, else GFlop/s, else GB/s."""
    if record.get("unit") and record.get("items"):
        return f"G {record['unit']}/s", record["items"]
    if record["flops"]:
        return "GFlop/s", record["flops"]
    return "GB/s", record["bytes"]


def print_tunings(document: dict[str, Any], console: Console) -> None:
    """A table per search: valid configurations fastest first, then those that failed, and
    a count of those the restrictions rejected (never built); the best beside the default, and
    where it was stored."""
    from loclab.measure.space import text

    for record in document["tunings"]:
        title = Text.assemble((f"{record['case']} {record['variant']}", "bold"),
                              f" {size_text(record)} {record['strategy']}, "
                              f"{record['evaluated']} built")
        if record["skipped"]:
            console.print(Text.assemble(title, (f"  not applicable: {record['skipped']}",
                                                "dim")))
            continue
        rate, per = _tune_rate(record)
        table = RichTable(title=title, title_justify="left", box=box.SIMPLE_HEAD,
                          padding=(0, 1), pad_edge=False, collapse_padding=True)
        for header in ("params", "median ms", rate, "status"):
            table.add_column(header, justify="right" if header in ("median ms", rate)
                             else "left")
        best, default = record["best"], record["default"]
        built = [trial for trial in record["trials"] if trial["status"] != "rejected"]
        rejected = [trial for trial in record["trials"] if trial["status"] == "rejected"]
        for trial in sorted(built, key=lambda t: (TRIAL_ORDER[t["status"]],
                                                  t["median_s"] or 0.0)):
            median = trial["median_s"]
            marks = [mark for mark, chosen in (("best", best), ("default", default))
                     if chosen and chosen["config"] == trial["config"]]
            status = trial["status"] + (f": {trial['reason']}" if trial["reason"] else "")
            table.add_row(Text(text(trial["config"]) + "".join(f" ({m})" for m in marks)),
                          number(median * 1e3 if median else None),
                          number(per / median / 1e9 if median else None), Text(status),
                          style="bold green" if "best" in marks else
                          None if trial["status"] == "valid" else "red")
        console.print(table)
        if rejected:
            console.print(Text(f"{len(rejected)} configurations rejected by the restrictions "
                               f"(never built), e.g. {text(rejected[0]['config'])}: "
                               f"{rejected[0]['reason']}", style="dim"))
        if best:
            speedup = (f", {record['speedup']:.2f}x the default ({text(default['config'])}: "
                       f"{number(default['median_s'] * 1e3)} ms)" if record["speedup"] else "")
            console.print(Text(f"best {text(best['config'])}: "
                               f"{number(best['median_s'] * 1e3)} ms{speedup}; stored in "
                               f"{document['cache']}"))
