"""A line chart as SVG text with a log-scale x axis: the scale curve drawn from a run's own numbers.

Written by hand (standard library only) so the harness needs no plotting package.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence
from xml.sax.saxutils import escape

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")
PLOT_WIDTH, HEIGHT = 540, 460
LEFT, TOP, BOTTOM = 70, 40, 60  # margins; the legend sits right of the plot
CHAR_WIDTH = 7  # a generous average for 12 px sans-serif, so a legend entry is never cut off

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
    plot_h = HEIGHT - TOP - BOTTOM

    def x_of(x: float) -> float:
        return LEFT + (math.log10(x) - low) / (high - low) * PLOT_WIDTH

    def y_of(y: float) -> float:
        return TOP + plot_h - y / top * plot_h

    return x_of, y_of


def _axes(xs: Sequence[float], top: float, x_of: Scale, y_of: Scale, x_label: str, y_label: str) -> list[str]:
    """Both axes, a tick at every measured x, five grid lines, and the labels."""
    bottom, right = HEIGHT - BOTTOM, LEFT + PLOT_WIDTH
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
    parts.append(f'<text x="{(LEFT + right) / 2:.1f}" y="{HEIGHT - 15}" text-anchor="middle">{escape(x_label)}</text>')
    middle = (TOP + bottom) / 2
    parts.append(f'<text x="18" y="{middle:.1f}" text-anchor="middle" transform="rotate(-90 18 {middle:.1f})">'
                 f"{escape(y_label)}</text>")
    return parts


def line_chart(series: Series, title: str, x_label: str, y_label: str) -> str:
    """SVG text: one polyline (with point markers) and one legend entry per series, x on a log scale."""
    points = [point for line in series.values() for point in line if point[0] > 0]
    xs = sorted({x for x, _ in points}) or [1.0]
    top = nice_ceiling(max((y for _, y in points), default=0.0))
    x_of, y_of = _scales(xs, top)
    width = LEFT + PLOT_WIDTH + 50 + CHAR_WIDTH * max((len(name) for name in series), default=0)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{HEIGHT}" '
             f'viewBox="0 0 {width} {HEIGHT}" font-family="sans-serif" font-size="12">',
             f'<rect width="{width}" height="{HEIGHT}" fill="white"/>',
             f'<text x="{LEFT}" y="{TOP - 15}" font-size="15">{escape(title)}</text>',
             *_axes(xs, top, x_of, y_of, x_label, y_label)]
    for index, (name, line) in enumerate(series.items()):
        colour = COLOURS[index % len(COLOURS)]
        drawn = [(x_of(x), y_of(y)) for x, y in sorted(line) if x > 0]
        coords = " ".join(f"{px:.1f},{py:.1f}" for px, py in drawn)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{coords}">'
                     f"<title>{escape(name)}</title></polyline>")
        parts += [f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{colour}"/>' for px, py in drawn]
        legend_y = TOP + 10 + index * 20
        legend_x = LEFT + PLOT_WIDTH + 20
        parts.append(f'<line x1="{legend_x}" y1="{legend_y}" x2="{legend_x + 20}" y2="{legend_y}" '
                     f'stroke="{colour}" stroke-width="2"/>')
        parts.append(f'<text x="{legend_x + 26}" y="{legend_y + 4}">{escape(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
