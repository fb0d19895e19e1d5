"""What a report's figures show, read from their matplotlib objects as they are saved."""
import json


def titles(draw) -> str:
    """Every axis title and label of the figures ``draw`` makes (savefig intercepted)."""
    import matplotlib.figure

    seen = []
    original = matplotlib.figure.Figure.savefig

    def capture(fig, *args, **kwargs):
        seen.extend([fig._suptitle.get_text() if fig._suptitle else ""]
                    + [t for ax in fig.axes for t in (ax.get_title(), ax.get_ylabel(),
                                                      ax.get_xlabel())])
        seen.append(json.dumps([list(ax.get_ylim()) for ax in fig.axes if ax.get_visible()]))
        return original(fig, *args, **kwargs)

    matplotlib.figure.Figure.savefig = capture
    try:
        draw()
    finally:
        matplotlib.figure.Figure.savefig = original
    return "\n".join(seen)
