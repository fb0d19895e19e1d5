"""The config contract, without Keras: switches and names, validation,
folder-name safety, secrets, the settings that identify a run, refusals, and
composing the Hydra config.

The names most callers need are here; each module has one concern.
"""
from ablation.config.compose import compose, compose_config, conf_dir, register_resolvers
from ablation.config.folders import check_folder_name, check_folder_names, folder_suffix
from ablation.config.refusals import ConfigError, Refused, print_refusal
from ablation.config.secrets import check_no_secrets
from ablation.config.settings import check_same_config, differing_keys, settings
from ablation.config.switches import SWITCHES, as_bool, switches, variant_name
from ablation.config.choices import AUGMENTATION_IMPLEMENTATIONS, PRECISIONS, WANDB_MODES
from ablation.config.validate import validate

__all__ = [
    "AUGMENTATION_IMPLEMENTATIONS", "PRECISIONS", "SWITCHES", "WANDB_MODES", "ConfigError",
    "Refused", "as_bool", "check_folder_name", "check_folder_names", "check_no_secrets",
    "check_same_config", "compose", "compose_config", "conf_dir", "differing_keys",
    "folder_suffix", "print_refusal", "register_resolvers", "settings", "switches", "validate",
    "variant_name",
]
