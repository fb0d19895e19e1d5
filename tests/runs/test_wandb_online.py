"""W&B online without network or credentials: offline fallback, bounded, no secrets leaked."""
import pytest
import http.server
import threading

from ablation.runs.record import find_records, read_record
from tests.helpers.commands import run_cli, smoke_overrides

PLANTED_ENV = "plantedenvkey" + "0" * 27          # 40 characters, like a W&B key


def online_sweep(tmp_path, env, *extra):
    """The sweep with W&B online; a fallback that hangs fails on run_cli's timeout."""
    return run_cli("-m", "wandb.mode=online", *smoke_overrides(tmp_path, "trainer.epochs=1"),
                   *extra, env={"HOME": str(tmp_path / "home"), **env}, timeout=300)


@pytest.mark.slow
def test_no_network_falls_back_to_offline_and_leaks_no_secret(tmp_path):
    result = online_sweep(
        tmp_path / "out", {"WANDB_API_KEY": PLANTED_ENV, "WANDB_BASE_URL": "http://127.0.0.1:9"})
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout + result.stderr
    assert "W&B online is unavailable (cannot reach 127.0.0.1:9" in out
    assert "upload later with: wandb sync" in out
    (path,) = find_records(tmp_path / "out")
    record = read_record(path)
    assert record["status"] == "completed" and record["wandb"]["mode"] == "offline"
    # the key nowhere: records, Hydra's saved configs, logs, W&B files, console
    for file in (tmp_path / "out").rglob("*"):
        if file.is_file():
            assert PLANTED_ENV.encode() not in file.read_bytes(), file
    assert PLANTED_ENV not in out


class Unauthorized(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(401)
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args):
        pass


@pytest.mark.slow
def test_no_credentials_falls_back_to_offline(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Unauthorized)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = online_sweep(
            tmp_path / "out", {"WANDB_BASE_URL": f"http://127.0.0.1:{server.server_port}",
                               "WANDB_API_KEY": PLANTED_ENV})
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr[-2000:]
    assert "W&B online is unavailable (" in result.stdout + result.stderr
    (path,) = find_records(tmp_path / "out")
    assert read_record(path)["wandb"]["mode"] == "offline"
    # the online attempts' folders (the job's and the report's) are set aside, so a
    # `wandb sync` of the sweep finds only the offline runs, the report's among them
    sweep = path.parent.parent
    for wandb_dir in (sweep / "wandb", path.parent / "wandb"):
        names = [p.name for p in wandb_dir.iterdir() if p.name.startswith(("run-", "offline-"))]
        assert len(names) == 1 and names[0].startswith("offline-run-"), (wandb_dir, names)
    assert list((path.parent / ".replaced").glob("*/wandb/run-*"))


@pytest.mark.slow
def test_a_netrc_that_is_not_text_is_one_line(tmp_path):
    """W&B's own exporter reads ~/.netrc at exit and printed two tracebacks for one
    that is not text: now one warning, and the sweep as without it."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_bytes(b'machine api.wandb.ai\n login u\n password "x\n\x00\xff\n')
    result = online_sweep(tmp_path, {"WANDB_BASE_URL": "http://127.0.0.1:9"})  # HOME: home
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-2000:]
    assert "Traceback" not in out, out[-3000:]
    assert out.count(".netrc is not text (invalid start byte)") == 1
