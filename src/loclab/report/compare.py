"""A comparison of two runs (``loclab.bench.compare``) on the terminal, as HTML and Markdown,
and as a chart of every matched row's speedup.

The three renderings say the same things in the same words: which runs are compared, the two
machines where they differ, a table per case, device and size (BASE and NEW median, their
spreads, the speedup and its verdict, validity), validation changes, rows found in one run
only, the rule a verdict follows, and a one-line summary. They read only the comparison
document, so a saved ``comparison.json`` is the whole story.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from loclab.cases.base import dims_text
from loclab.report.text import Table, number, ratio, spread, valid_cell

Comparison = dict[str, Any]
Row = dict[str, Any]

# How a verdict shows in a table, and its colour on a terminal and in the chart.
MARKS = {"faster": "faster", "slower": "slower", "same": "same", "undecided": "?",
         "not timed": "-"}
STYLES = {"faster": "green", "slower": "bold red", "same": None, "undecided": "yellow",
          "not timed": "dim"}
COLOURS = {"faster": "#2ca02c", "slower": "#d62728", "same": "#9e9e9e", "undecided": "#e0e0e0"}
HEADERS = ["variant", "BASE ms", "IQR", "NEW ms", "IQR", "speedup", "change", "valid"]
STATES = {"valid": "valid", "invalid": "INVALID", "skipped": "not applicable"}
CHART = "speedup.png"
CHART_TITLE = "The speedup of every row timed in both runs"


# -- text shared by every rendering ---------------------------------------------------------


def _ms(side: dict[str, Any]) -> str:
    return number(side["median_s"] * 1e3 if side["median_s"] else None)


def _valid(row: Row) -> str:
    """'yes', 'NO', 'n/a' (not applicable at its size), or the change: 'yes → NO'."""
    before, after = valid_cell(row["base"]), valid_cell(row["new"])
    return after if before == after else f"{before} → {after}"


def _cells(row: Row) -> list[str]:
    return [row["variant"], _ms(row["base"]), spread(row["base"]), _ms(row["new"]),
            spread(row["new"]), ratio(row["speedup"]), MARKS[row["change"]], _valid(row)]


def _place(item: Row) -> tuple[str, str, str]:
    return item["case"], item["device"], dims_text(item["size"])


def sections(comparison: Comparison) -> dict[tuple[str, str, str], list[Row]]:
    """The matched rows of each (case, device, size), in BASE's run order."""
    grouped: dict[tuple[str, str, str], list[Row]] = {}
    for row in comparison["rows"]:
        grouped.setdefault(_place(row), []).append(row)
    return grouped


def section_table(rows: list[Row]) -> Table:
    """The rows of one case, device and size; a row is shown as failed when NEW's is."""
    return Table(headers=HEADERS, rows=[_cells(row) for row in rows],
                 valid=[row["new"]["valid"] or bool(row["new"]["skipped"]) for row in rows],
                 numeric=[False, True, True, True, True, True, False, False])


def run_lines(comparison: Comparison) -> list[tuple[str, str]]:
    """('BASE', 'before.json: loclab 0.1.0, size small, cpu, 2025-...'), and NEW's."""
    return [(name.upper(), f"{run['label']}: loclab {run['loclab']}, size {run['size']}, "
                           f"{', '.join(run['devices'])}, {run['created']}")
            for name, run in (("base", comparison["base"]), ("new", comparison["new"]))]


def _machine_value(value: Any) -> str:
    if value is None:
        return "-"
    return number(value) if isinstance(value, float) else str(value)


def machine_rows(comparison: Comparison) -> list[tuple[str, str, str, bool]]:
    """(label, BASE, NEW, differs) per key; ``differs`` only for what makes the machines or
    settings differ (references, measured in each run, always differ a little)."""
    return [(f["label"], _machine_value(f["base"]), _machine_value(f["new"]),
             f["differs"] and f["identity"]) for f in comparison["machines"]["fields"]]


def same_machine_line(comparison: Comparison) -> str:
    """One line naming the machine and settings both runs share."""
    fields = {f["key"]: f["base"] for f in comparison["machines"]["fields"]}
    threads = f", {fields['cpu_threads']} threads" if fields["cpu_threads"] else ""
    gpu = f"GPU {fields['gpu']}" if fields["gpu"] else "no GPU"
    return (f"Same machine and settings in both runs: {fields['cpu'] or 'unknown CPU'}{threads}, "
            f"{gpu}; loclab {fields['loclab']}, size {fields['size']}, "
            f"devices {fields['devices']}.")


def difference_line(comparison: Comparison) -> str:
    """What differs between the runs, by name: their machines (CPU, GPU) or, on one machine,
    only their settings (threads, loclab, size preset, devices)."""
    machines = comparison["machines"]
    machine, settings = ", ".join(machines["machine"]), ", ".join(machines["settings"])
    if machine and settings:
        return f"The runs' machines differ: {machine}; and their settings: {settings}"
    if machine:
        return f"The runs' machines differ: {machine}"
    return f"Same machine; the runs' settings differ: {settings}"


def cases_line(comparison: Comparison) -> str | None:
    """'The runs ran different cases: transpose only in BASE; scan only in NEW', or None."""
    cases = comparison["cases"]
    parts = [f"{', '.join(cases[f'only_in_{name}'])} only in {name.upper()}"
             for name in ("base", "new") if cases[f"only_in_{name}"]]
    return f"The runs ran different cases: {'; '.join(parts)}" if parts else None


REFERENCE_DRIFT = 1.1  # references further apart than this are pointed out


def reference_lines(comparison: Comparison) -> list[str]:
    """The references (copy bandwidth, peaks) each run measured, where they differ by more
    than 10%: on one machine, a sign that its state (clocks, other load) changed between the
    runs, and that the rows may have changed with it rather than with the code."""
    lines = []
    for f in comparison["machines"]["fields"]:
        before, after = f["base"], f["new"]
        if (not f["identity"] and before and after
                and max(before / after, after / before) > REFERENCE_DRIFT):
            lines.append(f"{f['label']}: {number(before)} in BASE, {number(after)} in NEW "
                         f"({ratio(after / before)}), measured in each run")
    return lines


def validation_lines(comparison: Comparison) -> list[str]:
    """One line per row whose validation changed: 'valid in BASE, INVALID in NEW: why'."""
    lines = []
    for row in comparison["rows"]:
        change = row["validation"]
        if not change:
            continue
        why = [f"{name.upper()}: {row[name]['error'] or row[name]['skipped']}"
               for name in ("base", "new")
               if change[name] != "valid" and (row[name]["error"] or row[name]["skipped"])]
        lines.append(f"{_name(row)}: {STATES[change['base']]} in BASE, "
                     f"{STATES[change['new']]} in NEW" + (f" ({'; '.join(why)})" if why else ""))
    return lines


def _name(item: Row) -> str:
    case, device, size = _place(item)
    return f"{case} {item['variant']} ({device}, {size})"


def unmatched_lines(items: list[Row]) -> list[str]:
    """The rows of one run the other lacks, a line per case, device and size."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for item in items:
        grouped.setdefault(_place(item), []).append(item["variant"])
    return [f"{case} ({device}, {size}): {', '.join(variants)}"
            for (case, device, size), variants in grouped.items()]


def legend_lines(comparison: Comparison) -> list[str]:
    """What the columns mean and the rule behind a verdict, with any approximation made."""
    lines = ["speedup = BASE median / NEW median: above 1x NEW is faster; IQR: interquartile "
             "range of the timings, relative to the median.", comparison["rule"]["text"]]
    for name, count in comparison["summary"]["approximated_quartiles"].items():
        if count:
            lines.append(f"{name.upper()} records no quartiles (an older loclab): its "
                         f"interquartile ranges are approximated as median -/+ IQR/2 "
                         f"({count} rows).")
    return lines


def summary_line(comparison: Comparison) -> str:
    """'12 rows matched: 2 faster, 1 slower, 8 same (within the noise), 1 ?; ...'."""
    summary = comparison["summary"]
    unmatched = (f"{_rows(summary['only_in_base'])} only in BASE, "
                 f"{summary['only_in_new']} only in NEW")
    if not summary["matched"]:
        return f"No rows in common (matched by case, variant, device and size): {unmatched}."
    parts = [f"{summary['faster']} faster", f"{summary['slower']} slower",
             f"{summary['same']} same (within the noise)"]
    parts += [f"{count} {what}" for count, what in ((summary["undecided"], "? (too few timings)"),
                                                    (summary["not_timed"], "not timed"))
              if count]
    changes = summary["validation_changes"]
    return (f"{_rows(summary['matched'])} matched: {', '.join(parts)}; {changes} validation "
            f"change{'' if changes == 1 else 's'}; {unmatched}.")


def _rows(count: int) -> str:
    return f"{count} row{'' if count == 1 else 's'}"


# -- the terminal ---------------------------------------------------------------------------


NARROWEST_VARIANT = 12  # fewer columns for the variant: the IQR columns are left out


def _fitted(table: Table, width: int) -> Table:
    """``table``, less its IQR columns where keeping them would leave the variant fewer than
    :data:`NARROWEST_VARIANT` columns (a terminal narrower than 80): a name folded into
    three-letter pieces reads worse than a spread left out."""
    widths = [max(len(header), *(len(cells[i]) for cells in table.rows))
              for i, header in enumerate(table.headers)]
    room = width - sum(widths[1:]) - 2 * len(widths)  # a column's padding: 2
    if room >= min(widths[0], NARROWEST_VARIANT):
        return table
    keep = [i for i, header in enumerate(table.headers) if header != "IQR"]
    return Table(headers=[table.headers[i] for i in keep],
                 rows=[[cells[i] for i in keep] for cells in table.rows], valid=table.valid,
                 numeric=[table.numeric[i] for i in keep])


def _rich_table(title: str, table: Table, rows: list[Row]) -> RichTable:
    """A section's table: the variant folds where the table must narrow, numbers never; the
    verdict in its colour, a row whose NEW output is wrong in red."""
    rich_table = RichTable(title=title, title_justify="left", box=box.SIMPLE_HEAD,
                           padding=(0, 1), pad_edge=False, collapse_padding=True)
    for index, (header, numeric) in enumerate(zip(table.headers, table.numeric)):
        rich_table.add_column(header, justify="right" if numeric else "left",
                              overflow="fold", no_wrap=index > 0)
    change = table.headers.index("change")
    for cells, valid, row in zip(table.rows, table.valid, rows):
        shown: list[str | Text] = list(cells)
        shown[change] = Text(cells[change], style=STYLES[row["change"]] or "")
        rich_table.add_row(*shown, style=None if valid else "bold red")
    return rich_table


def _machine_table(comparison: Comparison) -> RichTable:
    table = RichTable(title=difference_line(comparison), title_justify="left",
                      box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False,
                      collapse_padding=True)
    for header in ("", "BASE", "NEW"):
        table.add_column(header)
    for label, before, after, differs in machine_rows(comparison):
        table.add_row(label, before, after, style="bold yellow" if differs else None)
    return table


def print_comparison(comparison: Comparison, console: Console) -> None:
    """The comparison on the terminal, fitting its width (80 columns in a pipe)."""
    for label, text in run_lines(comparison):
        console.print(Text.assemble((f"{label:<4} ", "bold"), text))
    if comparison["machines"]["differ"]:
        console.print(_machine_table(comparison))
    else:
        console.print(Text(same_machine_line(comparison), style="dim"))
        for line in reference_lines(comparison):
            console.print(Text.assemble(("references differ ", "yellow"), line))
    different_cases = cases_line(comparison)
    if different_cases:
        console.print(Text(f"{different_cases}.", style="yellow"))
    case, narrow = None, False
    for (name, device, size), rows in sections(comparison).items():
        if name != case:
            console.print(Text(name, style="bold"))
            case = name
        table = _fitted(section_table(rows), console.width)
        narrow = narrow or "IQR" not in table.headers
        console.print(_rich_table(f"{device.upper()}, {size}", table, rows))
    for line in validation_lines(comparison):
        console.print(Text.assemble(("VALIDATION ", "bold red"), line))
    for name in ("base", "new"):
        for line in unmatched_lines(comparison[f"only_in_{name}"]):
            console.print(Text.assemble((f"only in {name.upper()} ", "yellow"), line))
    for line in legend_lines(comparison):
        console.print(Text(line, style="dim"))
    if narrow:
        console.print(Text(f"IQR columns left out to fit {console.width} columns.",
                           style="dim"))
    console.print(Text(summary_line(comparison), style="bold"))


# -- the chart ------------------------------------------------------------------------------

TICKS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 0.8, 0.9, 1, 1.1, 1.25, 2, 5, 10, 20, 50, 100)
ROW_INCHES = 0.24
HATCHES = {"undecided": "///"}  # no verdict: the bar is drawn, but hatched
EDGES = {"undecided": "#606060"}


def _limits(rows: list[Row]) -> tuple[float, float]:
    """A log axis symmetric about 1x that holds every bar and whisker."""
    values = [row["speedup"] for row in rows] + [
        end for row in rows for end in (row["speedup_range"] or [])]
    reach = max([abs(math.log10(value)) for value in values] + [math.log10(1.1)])
    return 10 ** -(reach * 1.15), 10 ** (reach * 1.15)


def _ticks(low: float, high: float) -> list[float]:
    """The ticks of :data:`TICKS` within the axis, outwards from 1x, none closer to the one
    before than a twelfth of the axis (0.9x and 1.1x only where the axis spans little)."""
    gap = math.log10(high / low) / 12
    ticks = [1.0]
    for tick in sorted((t for t in TICKS if low <= t <= high), key=lambda t: abs(math.log10(t))):
        if all(abs(math.log10(tick / other)) >= gap for other in ticks):
            ticks.append(tick)
    return sorted(ticks)


def speedup_figure(comparison: Comparison) -> Any:
    """Horizontal bars from 1x to each timed row's speedup on a log axis, coloured by verdict,
    under a heading per case, device and size; the whisker is the speedup between the
    compared spreads (clear of 1x: a change beyond the noise); each speedup and verdict is
    written in a column at the right."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from loclab.report.charts.style import pyplot

    slots: list[tuple[str, Row | None]] = []  # (heading, None) or (variant, row), top down
    for (case, device, size), rows in sections(comparison).items():
        timed = [row for row in rows if row["speedup"]]
        if timed:
            slots.append((f"{case}: {device.upper()}, {size}", None))
            slots += [(row["variant"], row) for row in timed]
    low, high = _limits([row for _, row in slots if row])
    fig, ax = pyplot().subplots(figsize=(8, 1.3 + ROW_INCHES * len(slots)), dpi=110,
                                 layout="constrained")
    ax.set_xscale("log")
    ax.set_xlim(low, high)
    ax.set_ylim(-len(slots) + 0.4, 0.6)
    ax.axvline(1, color="black", linewidth=0.8)
    for y, (label, row) in enumerate(slots):
        if row is None:
            ax.text(0.005, -y, label, transform=ax.get_yaxis_transform(), va="center",
                    fontsize=8, fontweight="bold", bbox={"facecolor": "white", "pad": 1,
                                                        "edgecolor": "none"})
        else:
            _bar(ax, -y, row)
    variants = [(-y, label) for y, (label, row) in enumerate(slots) if row]
    ax.set_yticks([y for y, _ in variants], [label for _, label in variants], fontsize=8)
    ticks = _ticks(low, high)
    ax.set_xticks(ticks, [f"{tick:g}x" for tick in ticks], fontsize=8)
    ax.minorticks_off()
    ax.tick_params(axis="x", top=len(slots) > 20, labeltop=len(slots) > 20)  # a tall chart
    ax.grid(axis="x", color="#e6e6e6", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.set_xlabel("speedup of NEW over BASE (BASE median / NEW median; log scale)", fontsize=8)
    fig.legend(handles=[Patch(facecolor=COLOURS[name], label=MARKS[name],
                              hatch=HATCHES.get(name), edgecolor=EDGES.get(name, "none"))
                        for name in COLOURS]
               + [Line2D([], [], color="black", marker="|", label="speedup between the "
                         "compared spreads")],
               loc="outside lower left", ncol=5, frameon=False, fontsize=8)
    fig.suptitle(f"NEW {comparison['new']['label']} against BASE "
                 f"{comparison['base']['label']}", fontsize=9, x=0.01, ha="left")
    return fig


def _bar(ax: Any, y: float, row: Row) -> None:
    """One row: a bar from 1x, its whisker, and its speedup and verdict right of the axes."""
    speedup, span = row["speedup"], row["speedup_range"]
    ax.barh(y, speedup - 1, left=1, height=0.7, color=COLOURS[row["change"]],
            edgecolor=EDGES.get(row["change"], "none"), hatch=HATCHES.get(row["change"]),
            linewidth=0.5)
    if span:
        ax.errorbar(speedup, y, xerr=[[speedup - span[0]], [span[1] - speedup]], fmt="none",
                    ecolor="black", elinewidth=0.8, capsize=2)
    ax.text(1.01, y, f"{ratio(speedup)} {MARKS[row['change']]}",
            transform=ax.get_yaxis_transform(), va="center", ha="left", fontsize=7)


# -- pages ----------------------------------------------------------------------------------


def _title(comparison: Comparison) -> str:
    return (f"loclab compare: {comparison['new']['label']} against "
            f"{comparison['base']['label']}")


def _machine_table_data(comparison: Comparison) -> Table:
    """The machines side by side; rows that make them differ are marked as a failed row is."""
    rows = machine_rows(comparison)
    return Table(headers=["", "BASE", "NEW"], rows=[list(row[:3]) for row in rows],
                 valid=[not row[3] for row in rows], numeric=[False, False, False])


def write_html(comparison: Comparison, chart: str | None, path: Path) -> Path:
    from loclab.outputs import REPORT_MARK
    from loclab.report.pages import STYLE, html_table

    esc = html.escape
    runs = "".join(f"<dt>{esc(label)}</dt><dd>{esc(text)}</dd>"
                   for label, text in run_lines(comparison))
    tables = "".join(f"<h2>{esc(case)}: {esc(device.upper())}, {esc(size)}</h2>"
                     f"{html_table(section_table(rows))}"
                     for (case, device, size), rows in sections(comparison).items())
    lists = "".join(f"<h2>{esc(title)}</h2><ul>{''.join(f'<li>{esc(x)}</li>' for x in lines)}</ul>"
                    for title, lines in _lists(comparison) if lines)
    legend = "".join(f"<p>{esc(line)}</p>" for line in legend_lines(comparison))
    image = (f'<h2>{CHART_TITLE}</h2><img src="{esc(chart)}" alt="{CHART_TITLE}">'
             if chart else "")
    path.write_text(f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">{REPORT_MARK}<title>{esc(_title(comparison))}</title>
<style>{STYLE}</style></head><body>
<h1>{esc(_title(comparison))}</h1>
<dl>{runs}</dl>
<p><strong>{esc(summary_line(comparison))}</strong></p>
<h2>Machines</h2>
<p>{esc(_machine_sentence(comparison))}</p>
{html_table(_machine_table_data(comparison))}
{legend}
{tables}
{lists}
{image}
</body></html>
""")
    return path


def _machine_sentence(comparison: Comparison) -> str:
    different_cases = cases_line(comparison)
    cases = f" {different_cases}." if different_cases else ""
    if comparison["machines"]["differ"]:
        return f"{difference_line(comparison)} (highlighted).{cases}"
    drift = reference_lines(comparison)
    return ("Same machine and settings; the references were measured in each run" +
            ("; they differ by more than 10%, so the machine's state (clocks, other load) "
             "changed between the runs and may explain changes of the rows." if drift else ".")
            + cases)


def _lists(comparison: Comparison) -> list[tuple[str, list[str]]]:
    return [("Validation changes", validation_lines(comparison)),
            ("Only in BASE", unmatched_lines(comparison["only_in_base"])),
            ("Only in NEW", unmatched_lines(comparison["only_in_new"]))]


def write_markdown(comparison: Comparison, chart: str | None, path: Path) -> Path:
    from loclab.report.pages import markdown_table

    lines = [f"# {_title(comparison)}", ""]
    lines += [f"- **{label}**: {text}" for label, text in run_lines(comparison)]
    lines += ["", f"**{summary_line(comparison)}**", "", "## Machines", "",
              _machine_sentence(comparison), ""]
    lines += markdown_table(_machine_table_data(comparison))
    for line in legend_lines(comparison):
        lines += ["", line]
    for (case, device, size), rows in sections(comparison).items():
        lines += ["", f"## {case}: {device.upper()}, {size}", ""]
        lines += markdown_table(section_table(rows))
    for title, items in _lists(comparison):
        if items:
            lines += ["", f"## {title}", ""] + [f"- {item}" for item in items]
    if chart:
        lines += ["", f"## {CHART_TITLE}", "", f"![{CHART_TITLE}]({chart})"]
    path.write_text("\n".join(lines) + "\n")
    return path


def write_comparison_report(comparison: Comparison, directory: Path) -> Path:
    """Write index.html, README.md, comparison.json and the speedup chart (when a row was
    timed in both runs) into ``directory``; return index.html."""
    from loclab.bench.results import write_json
    from loclab.errors import LoclabError
    from loclab.outputs import remove_stale, report_files
    from loclab.report.charts.style import pyplot

    try:
        earlier = report_files(directory)
        directory.mkdir(parents=True, exist_ok=True)
        chart = None
        if any(row["speedup"] for row in comparison["rows"]):
            figure = speedup_figure(comparison)
            figure.savefig(directory / CHART)
            pyplot().close(figure)
            chart = CHART
        write_json(comparison, directory / "comparison.json")
        write_markdown(comparison, chart, directory / "README.md")
        index = write_html(comparison, chart, directory / "index.html")
        remove_stale(directory, earlier, ["index.html", "README.md", "comparison.json",
                                          *([chart] if chart else [])])
        return index
    except OSError as err:
        raise LoclabError(f"{directory}: cannot write the report: {err.strerror or err}") from None
