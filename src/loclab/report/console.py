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
from loclab.report.text import failures, gpu_note, results_table, roof_line, skips


def _section_title(document: dict[str, Any], case: str, device: str, size: str) -> Text:
    lesson = document.get("cases", {}).get(case, {}).get("lesson", "")
    return Text.assemble((case, "bold"), f" ({device} {size})",
                         (f"  {lesson}" if lesson else "", "dim"))


def print_results(document: dict[str, Any], console: Console) -> None:
    """One table per case, device and size (a case may sweep several sizes)."""
    full = results_table(document)
    table = full.without("case", "size", "dev")
    sections = [(row["case"], row["device"], dims_text(row["size"]))
                for row in document["results"]]
    for section in dict.fromkeys(sections):
        rich_table = RichTable(title=_section_title(document, *section), title_justify="left",
                               box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False,
                               collapse_padding=True)
        for header, numeric in zip(table.headers, table.numeric):
            rich_table.add_column(header, justify="right" if numeric else "left")
        for row_section, cells, valid in zip(sections, table.rows, table.valid):
            if row_section == section:
                rich_table.add_row(*cells, style=None if valid else "bold red")
        console.print(rich_table)
    console.print(Text(roof_line(document)))
    note = gpu_note(document)
    if note:
        console.print(Text(note, style="yellow"))
    for line in skips(document):
        console.print(Text.assemble(("not applicable ", "dim"), line))
    for line in failures(document):
        console.print(Text.assemble(("FAILED ", "bold red"), line))
