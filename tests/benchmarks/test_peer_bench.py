"""``bench peer``: its argument checks, the commands it builds and its figures'
arithmetic. No torch here: the official side needs another python."""
from __future__ import annotations

import argparse
import ast
import subprocess
import sys

import pytest

from benchmarks import peer
from benchmarks.__main__ import parser
from tests.helpers.paths import ROOT


@pytest.fixture
def official(tmp_path):
    """A folder shaped like the official checkout (only what the check looks at)."""
    for name in ("models/vit.py", "utils/losses.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    return tmp_path


def args_for(*extra: str) -> argparse.Namespace:
    return parser().parse_args(["peer", *extra])


def test_arguments_are_checked_in_one_line(official, tmp_path):
    good = ["--official", str(official), "--peer-python", sys.executable]
    assert peer.check_arguments(args_for(*good)) is None
    assert "--steps must be >= 1" in peer.check_arguments(args_for(*good, "--steps", "0"))
    assert "--batch must be >= 1" in peer.check_arguments(args_for(*good, "--batch", "-1"))
    wrong_repo = peer.check_arguments(args_for("--official", str(tmp_path / "nope"),
                                               "--peer-python", sys.executable))
    assert "not a checkout of aanna0701/SPT_LSA_ViT" in wrong_repo
    no_python = peer.check_arguments(args_for("--official", str(official),
                                              "--peer-python", str(tmp_path / "python")))
    assert "no such executable" in no_python


def test_bad_arguments_exit_2_before_any_process(tmp_path):
    done = subprocess.run([sys.executable, "-m", "benchmarks", "peer", "--official",
                           str(tmp_path), "--peer-python", sys.executable],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("bench peer: --official")


def test_both_sides_get_the_same_batch_steps_and_precision(official):
    args = args_for("--official", str(official), "--peer-python", sys.executable,
                    "--batch", "64", "--steps", "7", "--bf16", "--compile", "seed=3")
    official_cmd, project_cmd = peer.official_command(args), peer.project_command(args)
    assert official_cmd[:2] == [sys.executable, str(peer.WORKER)]
    assert official_cmd[official_cmd.index("--batch") + 1] == "64"
    assert official_cmd[official_cmd.index("--steps") + 1] == "7"
    assert "--bf16" in official_cmd and "--compile" in official_cmd
    assert project_cmd[project_cmd.index("--steps") + 1] == "7"
    assert {"model=paper", "trainer.batch_size=64", "trainer.precision=mixed_bfloat16",
            "seed=3"} <= set(project_cmd)
    plain = args_for("--official", str(official), "--peer-python", sys.executable)
    assert "--bf16" not in peer.official_command(plain)
    assert "trainer.precision=float32" in peer.project_command(plain)


def test_ratio_of_medians_and_round_ratios():
    runs = {"project": [{"train_images_per_s": v} for v in (300.0, 100.0, 200.0)],
            "official": [{"train_images_per_s": v} for v in (100.0, 50.0, 400.0)]}
    out = peer.summarise(runs)
    assert out["project_images_per_s"] == 200.0 and out["official_images_per_s"] == 100.0
    assert out["ratio_of_medians"] == 2.0
    assert out["round_ratios"] == [3.0, 2.0, 0.5]
    skewed = peer.summarise({"project": [{"train_images_per_s": v} for v in (10.0, 40.0)],
                             "official": [{"train_images_per_s": v} for v in (20.0, 5.0)]})
    # the ratio of the medians, not the median of the round ratios (0.5 and 8: 4.25)
    assert skewed["ratio_of_medians"] == pytest.approx(25.0 / 12.5)
    assert skewed["round_ratios"] == [0.5, 8.0]
    with pytest.raises(ValueError):
        peer.summarise({"project": [{"train_images_per_s": 1.0}], "official": []})


def test_the_official_worker_imports_neither_ablation_nor_keras():
    tree = ast.parse(peer.WORKER.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert "torch" in names
    assert not {n for n in names if n.split(".")[0] in ("ablation", "keras", "tensorflow")}
