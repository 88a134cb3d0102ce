"""The report as an HTML page and as Markdown: machine, roofs, table, failures, charts."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from loclab.outputs import REPORT_MARK
from loclab.report.kernels import kernel_note, kernel_table
from loclab.report.phases import phase_note, phase_table
from loclab.report.text import (Table, by_case, case_heading, case_table, failures,
                                 machine_lines, reuse_lines, roof_line, skips)

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25em 0.6em; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.invalid td { color: #b00; font-weight: bold; }
.failures li { color: #b00; }
img { max-width: 100%; margin: 1em 0; }
"""


REUSE_TITLE = "Data reuse in theory, next to the measured rate"


def _title(document: dict[str, Any]) -> str:
    return (f"loclab {document['loclab']}: size {document['size']}, "
            f"{', '.join(document['devices'])}, {document['created']}")


def _case_sections(document: dict[str, Any]
                   ) -> list[tuple[str, str, Table, Table | None, Table | None]]:
    """(case, heading, table, kernels, phases) per case: its lesson and rate, its rows in its
    metric, the kernels of its GPU rows and where its rows' time goes (None where there is
    nothing to show)."""
    return [(case, case_heading(document, case), case_table(document, case, rows),
             kernel_table(rows), phase_table(rows, place=True))
            for case, rows in by_case(document).items()]


def html_table(table: Table) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(h)}</th>" for h in table.headers)
    body = []
    for cells, valid in zip(table.rows, table.valid):
        tds = "".join(f'<td class="num">{esc(c)}</td>' if numeric else f"<td>{esc(c)}</td>"
                      for c, numeric in zip(cells, table.numeric))
        body.append(f'<tr class="{"valid" if valid else "invalid"}">{tds}</tr>')
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def write_html(document: dict[str, Any], charts: list[tuple[str, str]], path: Path) -> Path:
    esc = html.escape
    machine = "".join(f"<dt>{esc(label)}</dt><dd>{esc(text)}</dd>"
                      for label, text in machine_lines(document["machine"]))
    tables = "".join(f"<h2>{esc(case)}</h2><p>{esc(heading)}.</p>{html_table(table)}"
                     + (f"<p>GPU kernels: {esc(kernel_note())}.</p>{html_table(kernels)}"
                        if kernels else "")
                     + (f"<p>Where the time goes: {esc(phase_note())}.</p>{html_table(phases)}"
                        if phases else "")
                     for case, heading, table, kernels, phases in _case_sections(document))
    failed = "".join(f"<li>{esc(line)}</li>" for line in failures(document))
    skipped = "".join(f"<li>{esc(line)}</li>" for line in skips(document))
    reuse = "".join(f"<li>{esc(line)}</li>" for line in reuse_lines(document))
    images = "".join(f'<h2>{esc(title)}</h2><img src="{esc(name)}" alt="{esc(title)}">'
                     for title, name in charts)
    path.write_text(f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">{REPORT_MARK}<title>{esc(_title(document))}</title>
<style>{STYLE}</style></head><body>
<h1>{esc(_title(document))}</h1>
<dl>{machine}</dl>
<p>{esc(roof_line(document))}. Rates use the golden algorithm's bytes and flops; times are
medians (IQR beside them); every row was validated against the golden output.</p>
{tables}
{f'<h2>Failures</h2><ul class="failures">{failed}</ul>' if failed else ''}
{f'<h2>{REUSE_TITLE}</h2><ul>{reuse}</ul>' if reuse else ''}
{f'<h2>Not applicable at their size</h2><ul>{skipped}</ul>' if skipped else ''}
{images}
</body></html>
""")
    return path


def markdown_table(table: Table) -> list[str]:
    lines = ["| " + " | ".join(table.headers) + " |",
             "|" + "|".join("---:" if numeric else "---" for numeric in table.numeric) + "|"]
    for cells, valid in zip(table.rows, table.valid):
        shown = cells if valid else [f"**{cell}**" for cell in cells]
        lines.append("| " + " | ".join(shown) + " |")
    return lines


def write_markdown(document: dict[str, Any], charts: list[tuple[str, str]], path: Path) -> Path:
    lines = [f"# {_title(document)}", ""]
    lines += [f"- **{label}**: {text}" for label, text in machine_lines(document["machine"])]
    lines += ["", roof_line(document) + "."]
    for case, heading, table, kernels, phases in _case_sections(document):
        lines += ["", f"## {case}", "", f"{heading}.", ""] + markdown_table(table)
        if kernels:
            lines += ["", f"GPU kernels: {kernel_note()}.", ""] + markdown_table(kernels)
        if phases:
            lines += ["", f"Where the time goes: {phase_note()}.", ""] + markdown_table(phases)
    failed = failures(document)
    if failed:
        lines += ["", "## Failures", ""] + [f"- {line}" for line in failed]
    reuse = reuse_lines(document)
    if reuse:
        lines += ["", f"## {REUSE_TITLE}", ""] + [f"- {line}" for line in reuse]
    skipped = skips(document)
    if skipped:
        lines += ["", "## Not applicable at their size", ""] + [f"- {line}" for line in skipped]
    for title, name in charts:
        lines += ["", f"## {title}", "", f"![{title}]({name})"]
    path.write_text("\n".join(lines) + "\n")
    return path
