"""The web page's HTML: escaping, tables, times and the page around a body. Pure."""

from __future__ import annotations

import html
from collections.abc import Sequence

from services.history.render import utc
from services.history.restapi.routes import HTML_TYPE, Answer

__all__ = ["esc", "page_answer", "table", "utc"]


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value))


def table(header: Sequence[str], rows: Sequence[Sequence[str]], css: str = "") -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def page_answer(title: str, body: str, status: int = 200) -> Answer:
    page_text = PAGE.format(title=esc(title), body=body)
    return Answer(status, HTML_TYPE, page_text.encode())


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 20px 28px; color: #222; }}
nav a {{ margin-right: 16px; }}
table {{ border-collapse: collapse; margin: 8px 0 18px; }}
th, td {{ border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: left; vertical-align: top; }}
th {{ background: #f3f3f3; }}
.outcome {{ font-weight: 600; }}
.completed {{ color: #2e7d32; }} .failed {{ color: #c62828; }} .ignored {{ color: #8d6e00; }}
.in_progress {{ color: #1565c0; }}
.disagrees {{ background: #ffebee; color: #b71c1c; font-weight: 600; }}
.agrees {{ color: #2e7d32; }}
.ambiguous {{ color: #757575; font-style: italic; }}
pre.exception {{ max-width: 800px; max-height: 160px; overflow: auto; margin: 0;
  font-size: 11px; background: #fff3f3; padding: 4px; }}
iframe.timeline {{ width: 100%; height: 420px; border: 1px solid #ddd; }}
.error {{ color: #b71c1c; font-weight: 600; }}
</style></head>
<body><nav><a href="/web/">Fleet</a><a href="/jobs">/jobs (JSON)</a></nav>
<h1>{title}</h1>
{body}
</body></html>
"""
