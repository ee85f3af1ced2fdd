"""Small bar charts as inline SVG, rendered on the server: no JavaScript, no CDN, readable in any browser.

Every label is escaped here (the SVG goes into the page as markup); numbers are formatted by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape


@dataclass(frozen=True)
class Bar:
    """One bar: its axis label, its value, the tooltip text, an optional link and whether it is highlighted."""

    label: str
    value: float
    tooltip: str
    href: str | None = None
    current: bool = False


def bar_chart(bars: Sequence[Bar], *, title: str, element_id: str, width: int = 720, height: int = 160) -> str:
    """A vertical bar chart (one bar per item, e.g. per version) as an ``<svg>`` element."""
    pad_left, pad_bottom, pad_top = 8, 18, 18
    plot_w, plot_h = width - 2 * pad_left, height - pad_bottom - pad_top
    top = max((b.value for b in bars), default=0.0) or 1.0
    step = plot_w / max(len(bars), 1)
    bar_w = min(max(step * 0.8, 1.0), 48.0)
    parts = [
        f'<svg id="{escape(element_id)}" class="chart" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
        f"<title>{escape(title)}</title>",
        f'<text x="{pad_left}" y="12" class="chart-title">{escape(title)}</text>',
        f'<line x1="{pad_left}" y1="{pad_top + plot_h}" x2="{pad_left + plot_w}" y2="{pad_top + plot_h}" '
        'class="axis"/>',
    ]
    label_every = max(1, len(bars) // 12)
    for i, b in enumerate(bars):
        h = max(plot_h * max(b.value, 0.0) / top, 1.0 if b.value > 0 else 0.0)
        x, y = pad_left + i * step + (step - bar_w) / 2, pad_top + plot_h - h
        rect = (
            f'<rect class="bar{" current" if b.current else ""}" x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" '
            f'height="{h:.1f}"><title>{escape(b.tooltip)}</title></rect>'
        )
        parts.append(f'<a href="{escape(b.href)}">{rect}</a>' if b.href else rect)
        if i % label_every == 0 or b.current:
            parts.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{height - 4}" class="tick" text-anchor="middle">'
                f"{escape(b.label)}</text>"
            )
    parts.append("</svg>")
    return "".join(parts)


def hbar_chart(bars: Sequence[Bar], *, title: str, element_id: str, width: int = 720, row: int = 16) -> str:
    """A horizontal bar chart (one row per item with its label, e.g. per partition) as an ``<svg>``."""
    label_w, pad = 220, 8
    height = 22 + row * max(len(bars), 1)
    plot_w = width - label_w - 2 * pad - 150
    top = max((b.value for b in bars), default=0.0) or 1.0
    parts = [
        f'<svg id="{escape(element_id)}" class="chart" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
        f"<title>{escape(title)}</title>",
        f'<text x="{pad}" y="12" class="chart-title">{escape(title)}</text>',
    ]
    for i, b in enumerate(bars):
        y = 20 + i * row
        w = max(plot_w * max(b.value, 0.0) / top, 1.0 if b.value > 0 else 0.0)
        label = b.label if len(b.label) <= 34 else b.label[:33] + "…"
        parts.append(f'<text x="{pad}" y="{y + row - 4}" class="tick">{escape(label)}</text>')
        parts.append(
            f'<rect class="bar" x="{label_w:.1f}" y="{y + 2}" width="{w:.1f}" height="{row - 4}">'
            f"<title>{escape(b.tooltip)}</title></rect>"
        )
        parts.append(f'<text x="{label_w + w + 4:.1f}" y="{y + row - 4}" class="tick">{escape(b.tooltip)}</text>')
    parts.append("</svg>")
    return "".join(parts)
