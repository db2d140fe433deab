"""A line chart as SVG text with a log-scale x axis: the scale curve drawn from a run's own numbers.

Written by hand (standard library only) so the harness needs no plotting package.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence
from xml.sax.saxutils import escape

# Tableau's ten colours, then two more: a series gets a colour of its own up to twelve, and past
# that a dash pattern of its own as well, so no two lines ever look alike.
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
           "#bcbd22", "#000000", "#aec7e8")
DASHES = ("", "6 3", "2 2", "8 3 2 3")
PLOT_WIDTH, PLOT_HEIGHT = 760, 360
LEFT, TOP, BOTTOM = 70, 40, 60  # margins; the legend sits under the x axis label
WIDTH = LEFT + PLOT_WIDTH + 20
LEGEND_LEFT = 20
LEGEND_ROW, LEGEND_GAP = 18, 24  # px per legend row, and between legend columns
CHAR_WIDTH = 6.5  # a generous average for 11 px sans-serif (the legend), so a legend entry is never cut off

Series = Mapping[str, Sequence[tuple[float, float]]]
Scale = Callable[[float], float]


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above `value` (the y axis top)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 5, 10) if step * power >= value)


def _scales(xs: Sequence[float], top: float) -> tuple[Scale, Scale]:
    """Data to pixel mappings: log10 across, linear from zero up."""
    low, high = math.log10(min(xs)), math.log10(max(xs))
    pad = ((high - low) or 1.0) * 0.04  # keep the end points off the axis
    low, high = low - pad, high + pad

    def x_of(x: float) -> float:
        return LEFT + (math.log10(x) - low) / (high - low) * PLOT_WIDTH

    def y_of(y: float) -> float:
        return TOP + PLOT_HEIGHT - y / top * PLOT_HEIGHT

    return x_of, y_of


def _axes(xs: Sequence[float], top: float, x_of: Scale, y_of: Scale, x_label: str, y_label: str) -> list[str]:
    """Both axes, a tick at every measured x, five grid lines, and the labels."""
    bottom, right = TOP + PLOT_HEIGHT, LEFT + PLOT_WIDTH
    parts = [f'<line x1="{LEFT}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="black"/>',
             f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="black"/>']
    for x in xs:
        px = x_of(x)
        parts.append(f'<line x1="{px:.1f}" y1="{bottom}" x2="{px:.1f}" y2="{bottom + 5}" stroke="black"/>')
        parts.append(f'<text x="{px:.1f}" y="{bottom + 20}" text-anchor="middle">{x:,.0f}</text>')
    for step in range(6):
        value = top * step / 5
        py = y_of(value)
        parts.append(f'<line x1="{LEFT}" y1="{py:.1f}" x2="{right}" y2="{py:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{LEFT - 8}" y="{py + 4:.1f}" text-anchor="end">{value:,.0f}</text>')
    parts.append(f'<text x="{(LEFT + right) / 2:.1f}" y="{bottom + BOTTOM - 15}" text-anchor="middle">{escape(x_label)}</text>')
    middle = (TOP + bottom) / 2
    parts.append(f'<text x="18" y="{middle:.1f}" text-anchor="middle" transform="rotate(-90 18 {middle:.1f})">'
                 f"{escape(y_label)}</text>")
    return parts


def _style(index: int) -> tuple[str, str]:
    """The colour and dash attribute of the index-th series: unique for every index."""
    colour = COLOURS[index % len(COLOURS)]
    dash = DASHES[index // len(COLOURS) % len(DASHES)]
    return colour, f' stroke-dasharray="{dash}"' if dash else ""


def _legend(names: Sequence[str], top: float) -> tuple[list[str], float]:
    """Legend entries under the plot, in as many columns as fit the chart's width; and their height."""
    column = 26 + CHAR_WIDTH * max((len(name) for name in names), default=0)
    columns = max(1, min(len(names), int((WIDTH - 2 * LEGEND_LEFT + LEGEND_GAP) // (column + LEGEND_GAP))))
    rows = -(-len(names) // columns)
    parts = []
    for index, name in enumerate(names):
        colour, dash = _style(index)
        x, y = LEGEND_LEFT + index // rows * (column + LEGEND_GAP), top + index % rows * LEGEND_ROW
        parts.append(f'<line x1="{x:.0f}" y1="{y}" x2="{x + 20:.0f}" y2="{y}" stroke="{colour}" stroke-width="2"{dash}/>')
        parts.append(f'<text x="{x + 26:.0f}" y="{y + 4}" font-size="11">{escape(name)}</text>')
    return parts, rows * LEGEND_ROW


def line_chart(series: Series, title: str, x_label: str, y_label: str) -> str:
    """SVG text: one polyline (with point markers) per series, x on a log scale, and a legend under it."""
    points = [point for line in series.values() for point in line if point[0] > 0]
    xs = sorted({x for x, _ in points}) or [1.0]
    top = nice_ceiling(max((y for _, y in points), default=0.0))
    x_of, y_of = _scales(xs, top)
    legend, legend_height = _legend(list(series), TOP + PLOT_HEIGHT + BOTTOM + 5)
    height = TOP + PLOT_HEIGHT + BOTTOM + legend_height + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
             f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">',
             f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
             f'<text x="{LEFT}" y="{TOP - 15}" font-size="15">{escape(title)}</text>',
             *_axes(xs, top, x_of, y_of, x_label, y_label)]
    for index, (name, line) in enumerate(series.items()):
        colour, dash = _style(index)
        drawn = [(x_of(x), y_of(y)) for x, y in sorted(line) if x > 0]
        coords = " ".join(f"{px:.1f},{py:.1f}" for px, py in drawn)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="{coords}">'
                     f"<title>{escape(name)}</title></polyline>")
        parts += [f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{colour}"/>' for px, py in drawn]
    parts += legend
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
