"""Where the repository, its Hydra config and the system's Fashion-MNIST are."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
