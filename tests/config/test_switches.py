"""A switch is declared once (ablation/config/switches.py): adding a toy fourth
switch the way docs/development/README.md says (its registry entry, its config key,
the argument of the layer it changes) reaches the folder names, the records,
the table with nothing else edited; and no module outside
config/ and model/ spells a switch's key."""
import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.helpers.paths import ROOT

from ablation.config.switches import REGISTRY, SWITCHES, card_sweep, variant_label, variants

TOY = '''    Switch("toy", short="toy", column="Toy", alone="Toy", piece="toy", factor="Toy",
           line=("toy", "on", "off")),
'''


def test_the_paper_names_and_the_tables_order_come_from_the_registry():
    assert list(variants().values()) == [
        "ViT", "SPT", "LSA mask", "Learnable temp.", "SPT + LSA mask", "SPT + temp.",
        "LSA (mask + temp.)", "SL-ViT"]
    assert variant_label({"spt": True}) == "SPT"
    assert card_sweep() == ["spt=true,false", "lsa=true,false"]
    assert len({s.short for s in REGISTRY}) == len({s.column for s in REGISTRY}) == len(SWITCHES)


def test_no_module_outside_config_and_model_spells_a_switch():
    spelled = []
    for path in sorted((ROOT / "ablation").rglob("*.py")):
        if path.relative_to(ROOT / "ablation").parts[0] in ("config", "model"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and any(
                    node.value == key or node.value.startswith(f"{key}=") for key in SWITCHES):
                spelled.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not spelled, spelled


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))


@pytest.mark.slow
def test_a_toy_switch_reaches_folders_records_and_table(tmp_path):
    copy = tmp_path / "checkout"
    for name in ("ablation", "conf", "run_sweep.py", "pyproject.toml"):
        source = ROOT / name
        (shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
         if source.is_dir() else shutil.copy2(source, copy / name))
    # the three edits docs/development/README.md lists, and nothing else
    _edit(copy / "ablation/config/switches.py", "           follows=\"lsa\"),\n)",
          "           follows=\"lsa\"),\n" + TOY + ")")
    _edit(copy / "conf/config.yaml", "seed: 0\n", "toy: false\nseed: 0\n")
    _edit(copy / "ablation/model/vit.py", "    learnable_temperature: bool,\n",
          "    learnable_temperature: bool,\n    toy: bool = False,\n")
    results = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(copy)}
    env.pop("WANDB_SERVICE", None)
    done = subprocess.run(
        [sys.executable, "run_sweep.py", "-m", "toy=true,false", "spt=false", "lsa=false",
         "experiment=smoke", "trainer.epochs=1", "trainer.verbose=0", f"results_dir={results}",
         "wandb.mode=offline", "estimate=false", "report.plots=false",
         "diagnostics.enabled=false"],
        cwd=copy, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "toy=on" in done.stdout and "toy=off" in done.stdout          # the job line
    sweep = results / "smoke"
    jobs = {p.name for p in sweep.iterdir() if (p / "run.json").exists()}
    assert jobs == {"toy-s0_trainer.epochs=1", "vit-s0_trainer.epochs=1"}   # the folder names
    record = json.loads((sweep / "toy-s0_trainer.epochs=1" / "run.json").read_text())
    assert record["switches"] == {"spt": False, "lsa": False, "learnable_temperature": False,
                                  "toy": True}
    assert record["variant"] == "toy" and record["config"]["toy"] is True
    table = (sweep / "comparison.md").read_text()
    assert "| Variant | SPT | LSA | Temp. | Toy | n |" in table
    assert "\n| Toy |  |  |  | ✓ | 1 |" in table
