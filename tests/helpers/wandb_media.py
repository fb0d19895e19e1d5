"""``python -m tests.helpers.wandb_media``: write a file into wandb's media
folder, as logging a table does, and print the folder."""
from pathlib import Path

from wandb.sdk.data_types._private import MEDIA_TMP

if __name__ == "__main__":
    (Path(MEDIA_TMP.name) / "table.json").write_text("{}")
    print(MEDIA_TMP.name)
