"""The config contract, without Keras: switches, validation, folder names,
secrets, settings, refusals and composing the Hydra config; each module has one
concern, and the names most callers need are here."""
from ablation.config.compose import compose, compose_config, conf_dir, register_resolvers
from ablation.config.folders import check_folder_name, check_folder_names, folder_suffix
from ablation.config.refusals import ConfigError, Refused, print_refusal
from ablation.config.secrets import check_no_secrets
from ablation.config.settings import check_same_config, settings
from ablation.config.switches import SWITCHES, switches, variant_name
from ablation.config.validate import validate
