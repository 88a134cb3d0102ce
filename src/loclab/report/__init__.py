"""Results -> a human-readable form: a console table, an HTML page and Markdown with charts.

Everything here reads the JSON document (``loclab.bench.results``), so a report can be made
again later from a saved file (``loclab report out.json``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def write_report(document: dict[str, Any], directory: Path) -> Path:
    """Write index.html, README.md, results.json and one PNG per chart; return index.html."""
    from loclab.bench.results import write_json
    from loclab.errors import LoclabError
    from loclab.report.charts import write_charts
    from loclab.report.pages import write_html, write_markdown

    try:
        directory.mkdir(parents=True, exist_ok=True)
        charts = write_charts(document, directory)
        write_json(document, directory / "results.json")
        write_markdown(document, charts, directory / "README.md")
        return write_html(document, charts, directory / "index.html")
    except OSError as err:
        raise LoclabError(f"{directory}: cannot write the report: {err.strerror or err}") from None
