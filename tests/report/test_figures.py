"""Every figure of a multi-block report reads: no text box overlaps another or
leaves the canvas, and points of different variants that coincide in the data
are drawn apart.

The report holds the blocks that make long labels: one dataset x model under
two settings that differ in backend, learning rate and weight decay (all eight
variants, learned temperatures, locality diagnostics and attention maps), a
tuned block beside the shared recipe's (trials of both variants at the same
values), and an official-protocol block. Each figure is checked as it is
saved, drawn at the resolution of its file. Drawing them all takes several
seconds (the slow lane); the fast lane checks a small report whose dataset and
model are named with 200 characters of TeX-like text.
"""
import json
from itertools import combinations, product

import numpy as np
import pytest

from ablation.report import write_report
from tests.helpers.records import BASE_CONFIG, record

TOLERANCE = 1.0  # pixels two boxes may share, or a box may pass the edge (rounding)
APART = 2.0      # pixels at least between points of different variants


def _diagnostics(shift: float, layers: int = 4, heads: int = 3) -> dict:
    rng = np.random.default_rng(round(1000 * abs(shift)))
    return {"probe_images": 4,
            "summary": {"mean_distance_px": 5.0 + shift, "normalized_entropy": 0.6},
            "layers": [{"layer": layer,
                        "mean_distance_px": list(3 + layer + shift + rng.normal(0, 0.3, heads)),
                        "normalized_entropy": list(0.5 + 0.05 * layer
                                                   + rng.normal(0, 0.02, heads))}
                       for layer in range(layers)]}


def _maps(folder, shift: float) -> None:
    """One probe image's attention maps at two layers."""
    rng = np.random.default_rng(round(1000 * abs(shift)))
    maps = rng.uniform(size=(1, 2, 4, 4)).astype("float32")
    np.savez(folder / "attention_maps.npz", images=rng.uniform(size=(1, 8, 8, 1)),
             blocks=np.array([0, 3]), maps=maps / maps.sum(axis=(2, 3), keepdims=True),
             rows=np.array(4), cols=np.array(4), patch_size=np.array(2))


def _settings_blocks(root) -> None:
    """fashion_mnist x vit_tiny_patch4 under two settings, all eight variants (the
    first setting's with learned temperatures and attention maps: fewer panels
    to draw, each kind of figure still with the long labels)."""
    for backend, lr, decay in (("tensorflow", 0.001, 0.05), ("jax", 0.003, 0.1)):
        config = json.loads(json.dumps(BASE_CONFIG))
        config["trainer"].update(learning_rate=lr, weight_decay=decay)
        config["model"].update(key_dim=16)
        for (spt, lsa, temp), seed in product(product((False, True), repeat=3), (0, 1)):
            top1 = 0.80 + 0.01 * spt + 0.005 * lsa + 0.001 * seed
            learned = temp and backend == "jax"
            history = [{"epoch": e, "val/top1": top1 * e / 3,
                        **({f"temperature/block_{b}": 4 * (1 + 0.02 * e * (b + 1))
                            for b in range(4)} if learned else {})} for e in (1, 2, 3)]
            shift = spt - 0.5 * lsa + 0.1 * seed
            folder = record(root, spt, lsa, temp, seed, top1, dataset="fashion_mnist",
                            model="vit_tiny_patch4", config=config,
                            name=f"{backend}-{int(spt)}{int(lsa)}{int(temp)}-s{seed}",
                            extra={"history": history, "environment": {"backend": backend},
                                   "diagnostics": _diagnostics(shift)})
            if backend == "jax":
                _maps(folder, shift)


def _tuned_beside_shared(root) -> None:
    """digits x tiny: ViT and SL-ViT tuned on the same three learning rates (their
    trial points share x), beside the same two variants on the shared recipe."""
    def entry(study, trial, lr):
        return {"study": study, "trial": trial, "values": {"trainer.learning_rate": lr},
                "objective": "final_val_top1", "trials": 3, "params": ["trainer.learning_rate"],
                "spread": 10.0, "sampler_seed": 0, "search_seed": 1000, "epochs": 2}

    def config(lr):
        return {**BASE_CONFIG, "trainer": {**BASE_CONFIG["trainer"], "learning_rate": lr}}

    for on in (False, True):
        study = f"study-{int(on)}"
        for number, lr in enumerate((0.001, 0.003, 0.01)):
            record(root, on, on, on, 1000, 0.5, dataset="digits", model="tiny",
                   name=f"d{int(on)}-trial{number}", config=config(lr),
                   extra={"role": "trial", "tuning": entry(study, number, lr),
                          "metrics": {"test_top1": 0.9, "test_top5": 1.0,
                                      "final_val_top1": 0.84 if number == 1 else 0.8}})
        for seed in (0, 1):
            record(root, on, on, on, seed, 0.9 + 0.01 * on, dataset="digits", model="tiny",
                   name=f"d{int(on)}-final-s{seed}", config=config(0.003),
                   extra={"role": "final", "tuning": entry(study, None, 0.003)})
            record(root, on, on, on, seed, 0.89 + 0.01 * on, dataset="digits", model="tiny",
                   name=f"d{int(on)}-shared-s{seed}", config=config(0.003))


def _official_block(root) -> None:
    config = json.loads(json.dumps(BASE_CONFIG))
    config["trainer"]["protocol"] = "official"
    for (spt, lsa), seed in product(product((False, True), repeat=2), (0, 1)):
        top1 = 0.7 + 0.01 * spt + 0.01 * lsa
        record(root, spt, lsa, lsa, seed, top1, config=config,
               name=f"official-{int(spt)}{int(lsa)}-s{seed}",
               extra={"protocol": "official",
                      "history": [{"epoch": e, "test/top1": top1 * e / 3} for e in (1, 2, 3)],
                      "metrics": {"test_top1": top1, "test_top5": 0.9,
                                  "best_test_top1": top1, "best_test_epoch": 3}})


def _drawn_texts(fig):
    """The visible, non-empty texts a draw of ``fig`` paints, and its renderer."""
    from matplotlib.text import Text

    drawn, draw = [], Text.draw

    def record_draw(self, renderer):
        draw(self, renderer)
        if self.get_visible() and self.get_text().strip():
            drawn.append(self)

    Text.draw = record_draw
    try:
        fig.draw_without_rendering()  # every artist's draw, no pixels
    finally:
        Text.draw = draw
    return drawn, fig.canvas.get_renderer()


def text_problems(fig) -> list[str]:
    """Each text box that overlaps another or passes the canvas edge, and each text
    with a ``$`` read as mathematics, in words."""
    drawn, renderer = _drawn_texts(fig)
    mathematics = [f"{text.get_text()!r} is parsed as mathematics" for text in drawn
                   if "$" in text.get_text() and text.get_parse_math()]
    boxes = [(text.get_text(), text.get_window_extent(renderer)) for text in drawn]
    canvas = fig.bbox
    problems = [f"{text!r} leaves the canvas ({box.x0:.0f}..{box.x1:.0f} x "
                f"{box.y0:.0f}..{box.y1:.0f} of {canvas.width:.0f} x {canvas.height:.0f})"
                for text, box in boxes
                if box.x0 < -TOLERANCE or box.y0 < -TOLERANCE
                or box.x1 > canvas.width + TOLERANCE or box.y1 > canvas.height + TOLERANCE]
    for (a, box_a), (b, box_b) in combinations(boxes, 2):
        wide = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
        high = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
        if wide > TOLERANCE and high > TOLERANCE:
            problems.append(f"{a!r} overlaps {b!r}")
    return mathematics + problems


def coinciding_points(fig) -> list[str]:
    """Points of different series (told apart by colour) drawn on the same spot."""
    from matplotlib.collections import PathCollection
    from matplotlib.colors import to_hex

    problems = []
    for ax in fig.axes:
        points: dict[str, list] = {}
        for line in ax.get_lines():
            if line.get_marker() not in (None, "None", "", " "):
                xy = ax.transData.transform(np.column_stack(line.get_data()).astype(float))
                points.setdefault(to_hex(line.get_color()), []).extend(xy)
        for collection in ax.collections:
            if isinstance(collection, PathCollection) and len(collection.get_offsets()):
                colour = to_hex(collection.get_facecolor()[0])
                points.setdefault(colour, []).extend(
                    collection.get_offset_transform().transform(collection.get_offsets()))
        for (a, xy_a), (b, xy_b) in combinations(points.items(), 2):
            gaps = np.linalg.norm(np.asarray(xy_a)[:, None] - np.asarray(xy_b)[None], axis=-1)
            if (gaps < APART).any():
                problems.append(f"{ax.get_title()!r}: series {a} and {b} share a point")
    return problems


@pytest.fixture
def saved_figures(monkeypatch):
    """Every figure saved while the fixture is active, checked as it is written:
    (text problems, coinciding points, legend entries, texts drawn) in order of
    saving."""
    import matplotlib.figure

    seen = []
    save = matplotlib.figure.Figure.savefig

    def check_then_save(fig, *args, **kwargs):
        dpi = fig.dpi
        fig.set_dpi(kwargs.get("dpi") or dpi)  # checked at the file's resolution
        legends = [t.get_text() for ax in fig.axes if ax.get_legend()
                   for t in ax.get_legend().get_texts()]
        drawn = [t.get_text() for t in _drawn_texts(fig)[0]]
        seen.append((text_problems(fig), coinciding_points(fig), legends, drawn))
        fig.set_dpi(dpi)
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", check_then_save)
    return seen


@pytest.mark.slow
def test_every_figure_of_a_multi_block_report_keeps_its_text_apart_and_inside(
        tmp_path, saved_figures):
    _settings_blocks(tmp_path)
    _tuned_beside_shared(tmp_path)
    _official_block(tmp_path)
    report = write_report(tmp_path, make_plots=True)
    assert len(set(report.table["setting"])) >= 4  # long labels: settings, tuned, shared
    images = [p.name for p in report.files if p.suffix == ".png"]
    assert {"top1.png", "val_top1.png", "temperature.png", "tuning.png",
            "locality_distance.png", "locality_entropy.png"} <= set(images)
    assert any(name.startswith("attention_maps") for name in images)
    assert len(saved_figures) == len(images)  # saved in the order the report lists them
    problems = {name: texts for name, (texts, _, _, _) in zip(images, saved_figures) if texts}
    assert not problems, json.dumps(problems, indent=1, ensure_ascii=False)
    # where trials or heads of different variants share a value, each stays visible
    for name, (_, points, legend, _) in zip(images, saved_figures):
        if name in ("tuning.png", "locality_distance.png", "locality_entropy.png"):
            assert not points, (name, points)
            assert any("ViT" in entry for entry in legend), (name, legend)


def test_a_long_hostile_name_is_shown_whole_literally_and_inside(tmp_path, saved_figures):
    """A dataset and a model named with 200 characters of TeX that would not parse
    (dollars, backslashes, underscores; one name without a space) make figures
    whose text is the names as written, wrapped inside the canvas."""
    dataset = (r"a$\frac$b_c\nope{$" * 11)[:200]
    model = (r"vit_$x$ \tiny_ " * 14)[:200]
    for spt, lsa in ((False, False), (True, True)):
        record(tmp_path, spt, lsa, lsa, 0, 0.5 + 0.1 * spt, dataset=dataset, model=model,
               name=f"hostile-{int(spt)}")
    report = write_report(tmp_path, make_plots=True)
    assert (tmp_path / "top1.png").is_file() and report.files
    assert not [texts for texts, _, _, _ in saved_figures if texts]
    for _, _, _, drawn in saved_figures:  # every word kept, in order, wrapped or not
        shown = ["".join(text.split()) for text in drawn]
        assert any("".join(dataset.split()) in text for text in shown)
        assert any("".join(model.split()) in text for text in shown)
