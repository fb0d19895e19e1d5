"""Names that become folders (ablation/config/folders.py): each value a safe path
component, and only the overrides that are settings in a job folder's name."""
import pytest

from ablation.config import ConfigError, check_folder_name, folder_suffix
from ablation.config.folders import split_overrides


@pytest.mark.parametrize("value, problem", [
    ("../../etc", "path separator"), ("a\\b", "path separator"), ("..", "starts with a dot"),
    (".hidden", "starts with a dot"), ("", "empty"),
    ("a\nb", "control, bidirectional or zero-width character"), ("a\u200bb", "zero-width"),
    ("a\u202eb", "bidirectional"),
    ("x" * 121, "121 characters")])
def test_folder_names(value, problem):
    with pytest.raises(ConfigError, match=problem):
        check_folder_name("name", value)
    check_folder_name("name", "smoke-2026.11_lr=0.1,seed+1")


def test_overrides_split_at_their_own_commas():
    assert split_overrides("a='x,y',b=[1,2],c=3") == ["a='x,y'", "b=[1,2]", "c=3"]


def test_data_locations_never_name_job_folders():
    """A path given on the command line holds '/', which no folder name may."""
    from ablation.config import compose

    cfg = compose(["dataset=fashion_mnist", "dataset.search_paths=[/a/b,/c]",
                   "dataset.path=/x/y", "trainer.epochs=2"], hydra_config=True)
    suffix = folder_suffix(cfg.hydra.job.override_dirname)
    assert suffix == "_dataset=fashion_mnist,trainer.epochs=2"
