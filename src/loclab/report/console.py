"""The results on the terminal (rich): a table per case, invalid rows in red.

Case, size and device move from columns into each table's title, so that it fits 80 columns.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from loclab.cases.base import dims_text
from loclab.report.text import failures, gpu_note, results_table, roof_line


def _section_title(document: dict[str, Any], case: str) -> Text:
    sizes = {}
    for row in document["results"]:
        if row["case"] == case:
            sizes.setdefault(row["device"], dims_text(row["size"]))
    lesson = document.get("cases", {}).get(case, {}).get("lesson", "")
    where = ", ".join(f"{device} {size}" for device, size in sizes.items())
    return Text.assemble((case, "bold"), f" ({where})", (f"  {lesson}" if lesson else "", "dim"))


def print_results(document: dict[str, Any], console: Console) -> None:
    full = results_table(document)
    table = full.without("case", "size", "dev")
    cases = [cells[0] for cells in full.rows]
    for case in dict.fromkeys(cases):
        rich_table = RichTable(title=_section_title(document, case), title_justify="left",
                               box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False,
                               collapse_padding=True)
        for header, numeric in zip(table.headers, table.numeric):
            rich_table.add_column(header, justify="right" if numeric else "left")
        for row_case, cells, valid in zip(cases, table.rows, table.valid):
            if row_case == case:
                rich_table.add_row(*cells, style=None if valid else "bold red")
        console.print(rich_table)
    console.print(Text(roof_line(document)))
    note = gpu_note(document)
    if note:
        console.print(Text(note, style="yellow"))
    for line in failures(document):
        console.print(Text.assemble(("FAILED ", "bold red"), line))
