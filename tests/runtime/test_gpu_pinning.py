"""Jobs side by side on several GPUs get one each: the choice is a pure function,
tested here without a GPU."""
import pytest

from ablation.runtime import gpu_pinning
from ablation.runtime.gpu_pinning import chosen_devices, gpu_for_job, pin, visible_devices


def test_jobs_take_the_gpus_round_robin():
    assert [gpu_for_job(n, ["0", "1", "2"]) for n in range(7)] == [
        "0", "1", "2", "0", "1", "2", "0"]
    assert gpu_for_job(3, []) is None


@pytest.mark.parametrize("listed, found, ids", [
    (None, 4, ["0", "1", "2", "3"]),          # the driver's GPUs
    ("2,3", 4, ["2", "3"]),                   # a scheduler's or the user's choice
    ("GPU-1a2b, GPU-3c4d", 2, ["GPU-1a2b", "GPU-3c4d"]),
    ("1,-1,2", 4, ["1"]),                     # CUDA stops reading at -1
    ("", 4, []),
])
def test_visible_devices_read_cuda_visible_devices_as_cuda_does(listed, found, ids):
    env = {} if listed is None else {"CUDA_VISIBLE_DEVICES": listed}
    assert visible_devices(env, found) == ids


def test_gpu_devices_keeps_the_visible_ones_in_its_order(caplog):
    assert chosen_devices(None, ["0", "1"]) == ["0", "1"]
    assert chosen_devices([3, 1], ["0", "1", "2", "3"]) == ["3", "1"]
    assert chosen_devices([1, 7], ["0", "1"]) == ["1"]
    assert "gpu.devices names 7, not visible here" in caplog.text


@pytest.fixture
def fresh_process(monkeypatch):
    monkeypatch.setattr(gpu_pinning, "_pinned", None)


def test_a_process_is_pinned_once_by_its_first_job(fresh_process):
    env = {"CUDA_VISIBLE_DEVICES": "4,5"}
    assert pin(3, None, env) == "5" and env["CUDA_VISIBLE_DEVICES"] == "5"
    assert pin(4, None, env) == "5" and env["CUDA_VISIBLE_DEVICES"] == "5"  # its backend saw 5


@pytest.mark.parametrize("job_num, setting, env, found", [
    (None, None, {}, 4),                               # a single run
    (2, None, {}, 1),                                  # one GPU: nothing to choose
    (2, None, {}, 0),                                  # a CPU machine
    (2, None, {"CUDA_VISIBLE_DEVICES": "3"}, 4),       # Slurm gave the job its GPU
])
def test_nothing_changes_without_a_choice(fresh_process, job_num, setting, env, found):
    before = dict(env)
    assert pin(job_num, setting, env, found) is None and env == before


def test_a_named_gpu_is_used_even_alone(fresh_process):
    env = {}
    assert pin(5, [1], env, found=2) == "1" and env == {"CUDA_VISIBLE_DEVICES": "1"}


@pytest.mark.parametrize("value", [[], ["0;rm"], [-1], [True], "0,1", 1])
def test_a_bad_devices_setting_is_one_line(value):
    from omegaconf import OmegaConf

    from ablation.config import ConfigError, validate
    from tests.helpers.config import compose

    config = OmegaConf.to_container(compose("experiment=smoke"), resolve=True)
    config["gpu"]["devices"] = value
    with pytest.raises(ConfigError, match="gpu.devices.*must be a list of GPU ids"):
        validate(config)
