"""Which keys are settings (ablation/config/settings.py): a record written before a
setting existed compares equal to today's config at that setting's old value."""
from ablation.config.compose import compose_config
from ablation.config.settings import ADDED_SETTINGS, differing_keys, flatten


def _without(config: dict, dotted: str) -> dict:
    """``config`` without the key ``dotted``, as a record from before it existed."""
    head, _, rest = dotted.partition(".")
    if not rest:
        return {k: v for k, v in config.items() if k != head}
    return {**config, head: _without(config[head], rest)}


def test_a_record_from_before_a_setting_existed_has_the_same_settings():
    config = compose_config(["experiment=smoke"])
    flat = flatten(config)
    for key, old in ADDED_SETTINGS.items():
        if key in flat and flat[key] == __import__("json").dumps(old, sort_keys=True):
            assert differing_keys(_without(config, key), config) == [], key
    older = config
    for key in ("model.architecture", "model.class_depth", "model.official_cait_mask"):
        older = _without(older, key)
    assert differing_keys(older, config) == []
    cait = compose_config(["experiment=smoke", "model=cait"])
    assert "model.architecture" in differing_keys(older, cait)
