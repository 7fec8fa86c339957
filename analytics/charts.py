"""Inline SVG charts for the staff dashboard: no scripts, no external resources.

Every label goes through ``escape``; the markup is built here, so templates
only place it.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

PALETTE: dict[str, str] = {
    "normal": "#2e7d32", "clarify": "#f9a825", "block": "#c62828", "guardian_block": "#6a1b9a",
    "p50": "#1565c0", "p95": "#90caf9", "bar": "#417690",
}
FONT = 'font-family="sans-serif" font-size="11"'


def _frame(width: int, height: int, body: list[str], title: str) -> SafeString:
    return mark_safe(  # noqa: S308  (every text below is escaped)
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(title)}" width="100%" '
        f'style="max-width:{width}px" viewBox="0 0 {width} {height}"><title>{escape(title)}</title>{"".join(body)}</svg>'
    )


def bar_chart(bars: Sequence[tuple[str, float]], *, title: str, width: int = 420, height: int = 180,
              color: str = PALETTE["bar"]) -> SafeString:
    """Vertical bars with their values on top and labels below."""
    top, bottom, left = 16, 28, 8
    plot = height - top - bottom
    peak = max((v for _, v in bars), default=0) or 1
    step = (width - 2 * left) / max(1, len(bars))
    body = [f'<line x1="{left}" y1="{top + plot}" x2="{width - left}" y2="{top + plot}" stroke="#999"/>']
    for i, (label, value) in enumerate(bars):
        h = plot * value / peak
        x = left + i * step + step * 0.1
        body.append(f'<rect x="{x:.1f}" y="{top + plot - h:.1f}" width="{step * 0.8:.1f}" height="{h:.1f}" fill="{color}">'
                    f"<title>{escape(label)}: {value:g}</title></rect>")
        cx = x + step * 0.4
        body.append(f'<text x="{cx:.1f}" y="{top + plot - h - 3:.1f}" text-anchor="middle" {FONT}>{value:g}</text>')
        body.append(f'<text x="{cx:.1f}" y="{height - 10}" text-anchor="middle" {FONT}>{escape(label)}</text>')
    return _frame(width, height, body, title)


def stacked_bars(columns: Sequence[tuple[str, dict[str, int]]], *, series: Sequence[str], title: str,
                 width: int = 640, height: int = 220) -> SafeString:
    """One stacked bar per column (e.g. a day), one colour per series (e.g. an action), with a legend."""
    top, bottom, left, legend = 10, 30, 30, 130
    plot_w, plot_h = width - left - legend, height - top - bottom
    peak = max((sum(c.values()) for _, c in columns), default=0) or 1
    step = plot_w / max(1, len(columns))
    body = [f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#999"/>',
            f'<text x="{left - 4}" y="{top + 8}" text-anchor="end" {FONT}>{peak}</text>',
            f'<text x="{left - 4}" y="{top + plot_h}" text-anchor="end" {FONT}>0</text>']
    label_every = max(1, len(columns) // 10)
    for i, (label, counts) in enumerate(columns):
        x, y = left + i * step + step * 0.1, float(top + plot_h)
        for name in series:
            value = counts.get(name, 0)
            if not value:
                continue
            h = plot_h * value / peak
            y -= h
            body.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{step * 0.8:.1f}" height="{h:.1f}" '
                        f'fill="{PALETTE.get(name, PALETTE["bar"])}"><title>{escape(label)} {escape(name)}: {value}</title></rect>')
        if i % label_every == 0:
            body.append(f'<text x="{x + step * 0.4:.1f}" y="{height - 12}" text-anchor="middle" {FONT}>{escape(label)}</text>')
    for j, name in enumerate(series):
        ly = top + 14 * j
        body.append(f'<rect x="{width - legend + 10}" y="{ly}" width="10" height="10" fill="{PALETTE.get(name, PALETTE["bar"])}"/>'
                    f'<text x="{width - legend + 26}" y="{ly + 9}" {FONT}>{escape(name)}</text>')
    return _frame(width, height, body, title)


def paired_hbars(rows: Sequence[tuple[str, float | None, float | None]], *, title: str, unit: str = "ms",
                 width: int = 520) -> SafeString:
    """Two horizontal bars per row (p50 and p95), values written at the end."""
    row_h, left, right = 34, 70, 90
    height = row_h * max(1, len(rows)) + 24
    peak = max((v or 0 for _, a, b in rows for v in (a, b)), default=0) or 1
    plot = width - left - right
    body = []
    for i, (label, p50, p95) in enumerate(rows):
        y = 6 + i * row_h
        body.append(f'<text x="{left - 6}" y="{y + 17}" text-anchor="end" {FONT}>{escape(label)}</text>')
        for k, (name, value) in enumerate((("p50", p50), ("p95", p95))):
            w = plot * (value or 0) / peak
            body.append(f'<rect x="{left}" y="{y + k * 13}" width="{w:.1f}" height="11" fill="{PALETTE[name]}"/>')
            shown = "—" if value is None else f"{value:,.0f} {unit}"
            body.append(f'<text x="{left + w + 4:.1f}" y="{y + k * 13 + 9}" {FONT}>{name} {escape(shown)}</text>')
    return _frame(width, height, body, title)
