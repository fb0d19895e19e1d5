"""What a report's figures show, read from their matplotlib objects as they are saved."""
import json


def saved(draw) -> list:
    """The figures ``draw`` saves, to be looked at as they were saved (savefig
    intercepted; a closed figure keeps its artists)."""
    import matplotlib.figure

    seen = []
    original = matplotlib.figure.Figure.savefig

    def capture(fig, *args, **kwargs):
        seen.append(fig)
        return original(fig, *args, **kwargs)

    matplotlib.figure.Figure.savefig = capture
    try:
        draw()
    finally:
        matplotlib.figure.Figure.savefig = original
    return seen


def titles(draw) -> str:
    """Every axis title and label of the figures ``draw`` makes, and their y limits."""
    seen = []
    for fig in saved(draw):
        seen.extend([fig._suptitle.get_text() if fig._suptitle else ""]
                    + [t for ax in fig.axes for t in (ax.get_title(), ax.get_ylabel(),
                                                      ax.get_xlabel())])
        seen.append(json.dumps([list(ax.get_ylim()) for ax in fig.axes if ax.get_visible()]))
    return "\n".join(seen)
