"""Results -> a human-readable form: a console table, an HTML page and Markdown with charts.

Everything here reads the JSON document (``loclab.bench.results``), so a report can be made
again later from a saved file (``loclab report out.json``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def write_report(document: dict[str, Any], directory: Path) -> Path:
    """Write index.html, README.md, results.json and one PNG per chart; return index.html.
    Over an earlier report, the files it wrote that this one does not (the charts of cases
    no longer in the results) are removed once this one is written: a page never shows a
    stale chart, and a file of the user's in the directory stays."""
    from loclab.bench.results import write_json
    from loclab.errors import LoclabError
    from loclab.outputs import remove_stale, report_files
    from loclab.report.charts import write_charts
    from loclab.report.pages import write_html, write_markdown

    try:
        earlier = report_files(directory)
        directory.mkdir(parents=True, exist_ok=True)
        charts = write_charts(document, directory)
        write_json(document, directory / "results.json")
        write_markdown(document, charts, directory / "README.md")
        index = write_html(document, charts, directory / "index.html")
        remove_stale(directory, earlier, ["index.html", "README.md", "results.json",
                                          *(name for _, name in charts)])
        return index
    except OSError as err:
        raise LoclabError(f"{directory}: cannot write the report: {err.strerror or err}") from None
