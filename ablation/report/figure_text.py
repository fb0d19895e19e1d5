"""Figure text that reads: every title, axis label, legend entry and category
label wrapped to the room it has, inside the canvas, taken literally.

:func:`fit` is the last step before a figure is saved: long setting labels would
overrun a neighbour or the canvas edge. Each text is wrapped to the width it is
shown over, constrained layout makes room and the figure grows by the lines
added, repeated until the wrapping stops changing. Text is set literally: a name
with dollar signs is not parsed as TeX mathematics.
"""
from __future__ import annotations

from matplotlib.text import Text
from matplotlib.ticker import FixedLocator

ROUNDS = 4            # wrap-and-layout passes at most (two suffice in practice)
FIGURE_MARGIN = 0.96  # of the figure's width that a figure title may span
LEGEND_SHARE = 0.9    # of the axes' width that a legend entry may span
CATEGORY_SHARE = 0.92  # of the tick spacing that a category label may span


def _width(text: Text, line: str, renderer) -> float:
    """Pixels ``line`` spans in ``text``'s font, set literally."""
    width, _, _ = renderer.get_text_width_height_descent(line, text.get_fontproperties(),
                                                          ismath=False)
    return width


def _fitting(text: Text, word: str, room: float, renderer) -> int:
    """How many leading characters of ``word`` fit in ``room`` (at least one)."""
    return max([k for k in range(1, len(word)) if _width(text, word[:k], renderer) <= room],
               default=1)


def wrap(text: Text, words: str, room: float, renderer) -> str:
    """``words`` broken into lines no wider than ``room`` pixels: at spaces, and a
    word too wide alone at the last character that fits."""
    lines = []
    for paragraph in words.split("\n"):
        line = ""
        for word in paragraph.split(" "):
            joined = f"{line} {word}" if line else word
            if line and _width(text, joined, renderer) > room:
                lines.append(line)
                joined = word
            while len(joined) > 1 and _width(text, joined, renderer) > room:
                cut = _fitting(text, joined, room, renderer)
                lines.append(joined[:cut])
                joined = joined[cut:]
            line = joined
        lines.append(line)
    return "\n".join(lines)


def _tick_labels(axis) -> list[str]:
    """The labels ``axis`` shows at its major ticks."""
    return [label.get_text() for label in axis.get_majorticklabels()]


def _category_labels(axis) -> list[str] | None:
    """The labels of an axis with ticks at fixed places (variant names), or None."""
    fixed = isinstance(axis.get_major_locator(), FixedLocator)
    return _tick_labels(axis) if fixed and any(_tick_labels(axis)) else None


def _tick_spacing(ax, axis) -> float:
    """Pixels between neighbouring ticks of ``axis`` (its whole length for one tick)."""
    along = 0 if axis is ax.xaxis else 1
    points = [(t, t) for t in axis.get_majorticklocs()]
    pixels = sorted(ax.transData.transform(points)[:, along]) if points else []
    gaps = [b - a for a, b in zip(pixels, pixels[1:]) if b > a]
    return min(gaps, default=ax.bbox.width if along == 0 else ax.bbox.height)


def _row(ax) -> int | None:
    """The grid row of ``ax`` (None outside a grid)."""
    spec = ax.get_subplotspec() if ax is not None else None
    return spec.rowspan.start if spec is not None else None


class _Slot:
    """One text, the room it is wrapped to, and the grid row its added lines make
    taller (None: the figure's, "side": none)."""

    def __init__(self, text: Text, room, row):
        self.text, self.original, self.room, self.row = text, text.get_text(), room, row
        self.lines = self.original.count("\n") + 1

    def refit(self, renderer) -> bool:
        new = wrap(self.text, self.original, self.room(), renderer)
        if new == self.text.get_text():
            return False
        self.text.set_text(new)
        return True

    def added(self) -> float:
        """Pixels the wrapping added to the text's height."""
        return _line_px(self.text) * (self.text.get_text().count("\n") + 1 - self.lines)


def _line_px(text: Text) -> float:
    """Pixels one line of ``text`` takes (matplotlib's line spacing: 1.2)."""
    return 1.2 * text.get_fontsize() * text.figure.dpi / 72


def _slots(fig) -> list[_Slot]:
    """Every text :func:`fit` wraps."""
    slots = [_Slot(text, lambda f=fig: FIGURE_MARGIN * f.bbox.width, None)
             for text in fig.texts]
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        width, row = (lambda a=ax: a.bbox.width), _row(ax)
        slots += [_Slot(ax.title, width, row), _Slot(ax.xaxis.label, width, row),
                  _Slot(ax.yaxis.label, lambda a=ax: a.bbox.height, "side")]
        legend = ax.get_legend()
        slots += [_Slot(text, lambda a=ax: LEGEND_SHARE * a.bbox.width, "side")
                  for text in (legend.get_texts() if legend else [])]
        slots += [_Slot(text, width, "side") for text in ax.texts]  # annotations
    return [slot for slot in slots if slot.original]


class _Categories:
    """The variant names under a category axis, each wrapped to the tick spacing."""

    def __init__(self, ax, axis, labels: list[str]):
        self.ax, self.axis, self.original = ax, axis, labels
        self.row = _row(ax) if axis is ax.xaxis else "side"
        self.lines = max(label.count("\n") + 1 for label in labels)

    def refit(self, renderer) -> bool:
        probe = self.axis.get_ticklabels()[0]
        room = CATEGORY_SHARE * _tick_spacing(self.ax, self.axis)
        new = [wrap(probe, label, room, renderer) for label in self.original]
        if new == _tick_labels(self.axis):
            return False
        self.axis.set_ticks(self.axis.get_majorticklocs(), new)
        return True

    def added(self) -> float:
        labels = self.axis.get_ticklabels()
        now = max(label.get_text().count("\n") + 1 for label in labels)
        return _line_px(labels[0]) * (now - self.lines)


def _grow(fig, slots, base_height: float) -> None:
    """Make the figure taller by the height the wrapping added (each row's largest
    addition, plus the figure title's), so the panels keep their height."""
    by_row: dict = {}
    for slot in slots:
        if slot.row != "side":
            by_row.setdefault(slot.row, []).append(slot.added())
    extra = sum(max(values) if row is not None else sum(values)
                for row, values in by_row.items())
    fig.set_size_inches(fig.get_size_inches()[0], base_height + max(extra, 0.0) / fig.dpi)


def fit(fig) -> None:
    """Wrap every text of ``fig`` to its room and lay the figure out around it."""
    if fig.get_layout_engine() is None:
        fig.set_layout_engine("constrained")
    slots = _slots(fig)
    for slot in slots:
        slot.text.set_parse_math(False)
    slots += [_Categories(ax, axis, labels) for ax in fig.axes if ax.get_visible()
              for axis in (ax.xaxis, ax.yaxis)
              for labels in [_category_labels(axis)] if labels]
    base_height = fig.get_size_inches()[1]
    renderer = fig.canvas.get_renderer()
    for _ in range(ROUNDS):  # the first to the room before layout, then after each
        changed = [slot.refit(renderer) for slot in slots]
        if not any(changed):
            break
        _grow(fig, slots, base_height)
        fig.draw_without_rendering()  # the layout around the new text, no pixels
