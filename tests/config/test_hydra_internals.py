"""Hydra's private API, used through ablation/config/hydra_internals.py only: these
tests fail, naming the piece, when a Hydra release moves it."""
from importlib.metadata import version

from tests.helpers.paths import CONF, ROOT
from hydra.core.override_parser.overrides_parser import OverridesParser

from ablation.config.hydra_internals import args_parser, config_loader, sweep_jobs


def test_hydra_is_a_version_the_bound_allows():
    major, minor = (int(p) for p in version("hydra-core").split(".")[:2])
    assert (major, minor) == (1, 3), "hydra_internals.py was written against Hydra 1.3"


def test_the_argument_parser_reads_hydras_flags():
    parsed = args_parser().parse_args(["-m", "--cfg", "job", "spt=true,false", "seed=1"])
    assert parsed.multirun and parsed.cfg == "job"
    assert parsed.overrides == ["spt=true,false", "seed=1"]
    assert parsed.config_dir is None and not parsed.help and not parsed.hydra_help


def test_the_config_loader_lists_a_groups_options():
    loader = config_loader(CONF)
    assert loader.repository.group_exists("dataset")
    assert not loader.repository.group_exists("no_such_group")
    assert {"digits", "cifar100"} <= set(loader.get_group_options("dataset"))
    assert "basic" in loader.get_group_options("hydra/launcher")   # plugins' configs too


def test_the_sweeper_expands_every_combination_in_order():
    overrides = OverridesParser.create().parse_overrides(["spt=true,false", "lsa=true,false",
                                                          "seed=3"])
    assert sweep_jobs(overrides) == [
        ["spt=True", "lsa=True", "seed=3"], ["spt=True", "lsa=False", "seed=3"],
        ["spt=False", "lsa=True", "seed=3"], ["spt=False", "lsa=False", "seed=3"]]


def test_no_other_module_reaches_into_hydra_internals():
    users = [p.relative_to(ROOT).as_posix() for p in (ROOT / "ablation").rglob("*.py")
             if "hydra._internal" in p.read_text()]
    assert users == ["ablation/config/hydra_internals.py"]
