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


@dataclass(frozen=True)
class Node:
    """One dataset version in a lineage graph: its label, its tooltip and the link to its page."""

    label: str
    tooltip: str
    href: str | None = None
    how: str | None = None  # the edge to this node: "declared" (named by the writer) or "inferred"


HOW_TEXT = {
    "declared": "declared: the writer named this input (dal.write inputs=)",
    "inferred": "inferred: read by the writing process since its previous write, not named by it",
}
MAX_NODES = 12  # per side of a lineage graph; the rest is counted in a "+N more" line


def lineage_graph(
    upstream: Sequence[Node], this: Node, downstream: Sequence[Node], *, element_id: str, width: int = 720
) -> str:
    """Upstream versions → this version → downstream versions as an ``<svg>``: three columns of linked boxes
    joined by arrows. Labels are escaped and cut to fit; the full text is in each box's tooltip."""
    node_w, node_h, gap, top = 210, 26, 10, 24
    cols = (8.0, (width - node_w) / 2, float(width - node_w - 8))
    shown_up, shown_down = list(upstream[:MAX_NODES]), list(downstream[:MAX_NODES])
    more_up, more_down = len(upstream) - len(shown_up), len(downstream) - len(shown_down)
    rows = max(len(shown_up) + (1 if more_up else 0), len(shown_down) + (1 if more_down else 0), 1)
    height = top + rows * (node_h + gap) + 4
    parts = [
        f'<svg id="{escape(element_id)}" class="chart lineage" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
        "<title>lineage: upstream versions, this version, downstream versions</title>",
        '<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" markerHeight="7" '
        'orient="auto"><path d="M0,0 L8,4 L0,8 z" class="arrow"/></marker></defs>',
        f'<text x="{cols[0]:.0f}" y="14" class="chart-title">upstream (its inputs)</text>',
        f'<text x="{cols[1]:.0f}" y="14" class="chart-title">this version</text>',
        f'<text x="{cols[2]:.0f}" y="14" class="chart-title">downstream (its outputs)</text>',
    ]

    def y_of(i: int, n: int) -> float:
        block = n * (node_h + gap) - gap
        return top + (rows * (node_h + gap) - gap - block) / 2 + i * (node_h + gap)

    centre_y = y_of(0, 1) + node_h / 2

    def edge(node: Node, x1: float, y1: float, x2: float, y2: float) -> str:
        # an inferred edge is dashed: a guess from what the process read, not a fact its writer stated
        how = node.how if node.how in HOW_TEXT else None
        dash = ' stroke-dasharray="5 3"' if how == "inferred" else ""
        return (
            f'<line class="edge{" " + how if how else ""}" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}"'
            f'{dash} marker-end="url(#arrow)"/>'
        )

    for i, n in enumerate(shown_up):
        y = y_of(i, len(shown_up)) + node_h / 2
        parts.append(edge(n, cols[0] + node_w, y, cols[1], centre_y))
    for i, n in enumerate(shown_down):
        y = y_of(i, len(shown_down)) + node_h / 2
        parts.append(edge(n, cols[1] + node_w, centre_y, cols[2], y))

    def box(node: Node, x: float, y: float, kind: str) -> str:
        how = node.how if node.how in HOW_TEXT else None
        room = 21 if how else 30
        label = node.label if len(node.label) <= room else node.label[: room - 1] + "…"
        tip = node.tooltip + (f" — {HOW_TEXT[how]}" if how else "")
        tag = (
            f'<text x="{x + node_w - 6:.1f}" y="{y + node_h / 2 + 4:.1f}" text-anchor="end" class="how">{how}</text>'
            if how
            else ""
        )
        inner = (
            f'<g class="node {kind}{" " + how if how else ""}"><title>{escape(tip)}</title>'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{node_w}" height="{node_h}" rx="4"/>'
            f'<text x="{x + 8:.1f}" y="{y + node_h / 2 + 4:.1f}">{escape(label)}</text>{tag}</g>'
        )
        return f'<a href="{escape(node.href)}">{inner}</a>' if node.href else inner

    for i, n in enumerate(shown_up):
        parts.append(box(n, cols[0], y_of(i, len(shown_up)), "upstream"))
    parts.append(box(this, cols[1], y_of(0, 1), "current"))
    for i, n in enumerate(shown_down):
        parts.append(box(n, cols[2], y_of(i, len(shown_down)), "downstream"))
    for more, x, count in ((more_up, cols[0], len(shown_up)), (more_down, cols[2], len(shown_down))):
        if more:
            parts.append(
                f'<text x="{x + 8:.1f}" y="{y_of(count, count + 1) + node_h / 2 + 4:.1f}" class="tick">+{more} more '
                "(see the JSON)</text>"
            )
    parts.append("</svg>")
    return "".join(parts)
