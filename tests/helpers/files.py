"""What the suite reads back about files a test made."""
import stat


def file_modes(folder):
    """File name -> permission bits, for every file below ``folder``."""
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.rglob("*") if p.is_file()}
