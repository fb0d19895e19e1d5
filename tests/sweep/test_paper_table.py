"""The paper's table from one command: the five architectures of ``experiment=paper_cifar100``
at their CIFAR sizes, plain and SL, through the real command line on CIFAR-100 files made
in the official format (a few images, one epoch), reported one block per architecture in the
paper's order with the published top-1 beside each measured cell."""
import json

import pytest

from tests.helpers.archives import make_cifar_archive
from tests.helpers.commands import run_cli

pytestmark = pytest.mark.slow

MODELS = {"paper": "ViT", "t2t": "T2T", "cait": "CaiT", "pit": "PiT", "swin": "Swin"}


def test_one_command_gives_the_papers_table_one_block_per_architecture(tmp_path):
    from ablation.config.compose import compose_config

    archive = tmp_path / "cifar-100-python.tar.gz"
    make_cifar_archive(archive, fine=True, n_train=16, n_test=8)
    # lsa follows spt: the paper's plain and SL variants of each model, as its table
    done = run_cli("-m", f"model={','.join(MODELS)}", "spt=true,false", "lsa=${spt}",
                   "experiment=paper_cifar100", f"dataset.path={archive}",
                   "trainer.epochs=1", "trainer.batch_size=16", "trainer.verbose=0",
                   "diagnostics.probe_images=8", "wandb.mode=disabled",
                   f"results_dir={tmp_path / 'results'}", timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    sweep = tmp_path / "results" / "paper-cifar100"
    page = (sweep / "comparison.md").read_text()
    published = compose_config(["experiment=paper_cifar100"])["report"]["published"]["top1"]

    heads = [page.index(f"## cifar100 × {model}, official protocol") for model in MODELS]
    assert heads == sorted(heads)  # ViT, T2T, CaiT, PiT, Swin: the paper's order
    for (model, name), start, end in zip(MODELS.items(), heads, [*heads[1:], None]):
        block = page[start:end]
        plain, sl = published[model]["ViT"], published[model]["SL-ViT"]
        # its own plain model as the reference, the published figure beside each variant
        assert f"| ΔTop-1 vs {name} |" in block
        assert f"| {name} |" in block and f"{plain:.2f}" in block
        assert f"| SL-{name} |" in block and f"{sl:.2f}" in block
    summary = page[page.index("## Across models: cifar100, official protocol"):]
    for model, name in MODELS.items():
        plain, sl = published[model]["ViT"], published[model]["SL-ViT"]
        assert f"| {name} ({model}) |" in summary and f"{plain:.2f} → {sl:.2f}" in summary

    records = [json.loads(p.read_text()) for p in sweep.glob("*/run.json")]
    assert sorted((r["model"], r["variant"]) for r in records) == sorted(
        (model, variant) for model in MODELS for variant in ("vit", "spt+lsa+temp"))
    assert all(r["status"] == "completed" for r in records)
    # locality on every architecture, and one line for CaiT's class-attention layers
    assert all(r["diagnostics"]["layers"] for r in records)
    assert "CaiT's 2 class-attention layers attend from the class token only" in page
