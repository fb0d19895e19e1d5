"""``pip install .`` gives a working package: the code, the configs, both commands."""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_wheel_holds_every_module_every_config_and_both_commands(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    for name in ("ablation", "conf", "hydra_plugins"):
        shutil.copytree(ROOT / name, source / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path / "dist"), str(source)], check=True,
                   capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("vit_ablation-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(archive.read(n).decode() for n in names
                            if n.endswith(".dist-info/entry_points.txt"))
    modules = {p.relative_to(ROOT).as_posix() for package in ("ablation", "hydra_plugins")
               for p in (ROOT / package).rglob("*.py")}
    configs = {"ablation/conf/" + p.relative_to(ROOT / "conf").as_posix()
               for p in (ROOT / "conf").rglob("*.yaml")}
    assert modules - names == set()
    assert configs - names == set()
    assert "ablation/report/__main__.py" in names and "ablation/conf/config.yaml" in names
    assert "vit-ablation = ablation.sweep.cli:main" in entry_points
    assert "vit-ablation-report = ablation.report.__main__:main" in entry_points
    assert not any(n.startswith(("tests/", "results/")) for n in names)
