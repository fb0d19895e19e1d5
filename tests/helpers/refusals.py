"""What a refusal of bad input looks like: exit 2, one line, nothing left behind."""


def listing(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def assert_refused(result, message, tmp_path, before=()):
    """Exit 2, the message on one line of its own, nothing trained, and the
    folder's listing what it was before (``before``: an empty folder by default)."""
    out = result.stdout + result.stderr
    assert result.returncode == 2, out[-2000:]
    assert message in out, out[-2000:]
    lines = [line for line in out.splitlines() if message in line]
    assert len(lines) == 1 and len(lines[0]) < 400 and "Traceback" not in out, out[-2000:]
    assert lines[0].startswith("error: "), lines  # one format, printed once
    assert "Epoch 1" not in out
    assert listing(tmp_path) == list(before), listing(tmp_path)
