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
from loclab.report.text import (failures, gpu_note, number, prefixed, results_table,
                                 reuse_lines, roof_line, skips)


UNIT_HIDES = ("GFlop/s", "% peak")  # console columns a case rated in its own unit leaves out


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
        rows = [(row, cells, valid) for row, row_section, cells, valid
                in zip(document["results"], sections, table.rows, table.valid)
                if row_section == section]
        # A column no row of this section fills (no flops, no unit) would only take width; so
        # would GFlop/s where the case's own unit says the same (the JSON and HTML keep it).
        unit = next((row["unit"] for row, _, _ in rows if row.get("unit")), None)
        hidden = UNIT_HIDES if unit else ()
        shown = [i for i, numeric in enumerate(table.numeric)
                 if table.headers[i] not in hidden
                 and (not numeric or any(cells[i] != "-" for _, cells, _ in rows))]
        rate = table.headers.index("rate") if unit else None
        for i in shown:
            rich_table.add_column(f"{unit}/s" if i == rate else table.headers[i],
                                  justify="right" if table.numeric[i] else "left")
        for row, cells, valid in rows:
            # The unit is in the header: '2.93 G' under 'pairs/s'.
            rich_table.add_row(*(prefixed(row.get("items_per_s")) if i == rate else cells[i]
                                 for i in shown), style=None if valid else "bold red")
        console.print(rich_table)
    console.print(Text(roof_line(document)))
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
    from loclab.bench.tuning.space import text

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
    from loclab.bench.tuning.space import text

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
