"""Image folders made of real files in every mode and bit depth PIL writes, and
the files a careless or hostile user leaves there: each image reaches the model
in the 8-bit range, unusable files are skipped and counted by reason, and a
folder too small to split is refused in one line naming the class."""
import json
import logging
import os
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ablation.data import DataError, load_dataset
from tests.helpers.config import compose

TRANSPARENT = Image.new("P", (8, 8), 1)
TRANSPARENT.putpalette([0, 0, 0, 250, 250, 250] + [0] * 762)
TRANSPARENT.info["transparency"] = 1  # palette entry 1 (light grey) is see-through


def flat(value, mode, size=(8, 8)):
    return Image.new(mode, size, value)


# (what is saved, file suffix, expected value of every pixel as RGB, as L)
MODES = {
    "16-bit grey PNG": (Image.fromarray(np.full((8, 8), 40000, np.uint16)), ".png",
                        (155.6,) * 3, 155.6),
    "32-bit int TIFF": (Image.fromarray(np.full((8, 8), 32768, np.int32)), ".tif",
                        (127.5,) * 3, 127.5),
    "float TIFF in [0, 1]": (Image.fromarray(np.full((8, 8), 0.5, np.float32)), ".tif",
                             (127.5,) * 3, 127.5),
    "float TIFF in [0, 255]": (Image.fromarray(np.full((8, 8), 200.0, np.float32)), ".tif",
                               (200,) * 3, 200),
    "grey with alpha": (flat((200, 128), "LA"), ".png", (100.4,) * 3, 100.4),
    "RGBA": (flat((255, 0, 0, 255), "RGBA"), ".png", (255, 0, 0), 76.2),
    "RGBA half transparent": (flat((0, 0, 255, 51), "RGBA"), ".png", (0, 0, 51), 5.8),
    "palette with a transparent entry": (TRANSPARENT, ".png", (0, 0, 0), 0),
    "palette": (flat(1, "P").convert("RGB").convert("P"), ".gif", None, None),
    "CMYK JPEG": (flat((0, 0, 0, 0), "CMYK"), ".jpg", (255, 255, 255), 255),
    "bilevel": (flat(1, "1"), ".png", (255,) * 3, 255),
    "8-bit grey": (flat(77, "L"), ".png", (77,) * 3, 77),
}


@pytest.mark.parametrize("image, suffix, rgb, grey", MODES.values(), ids=MODES.keys())
@pytest.mark.parametrize("channels", [1, 3])
def test_every_mode_and_bit_depth_reaches_the_8_bit_range(tmp_path, image, suffix, rgb, grey,
                                                          channels):
    from ablation.data.images import read_image_tree

    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        image.save(tmp_path / cls / f"x{suffix}")
    x, y = read_image_tree(tmp_path, ["a", "b"], 4, channels)
    assert x.shape == (2, 4, 4, channels) and x.dtype == np.float32 and list(y) == [0, 1]
    assert 0 <= x.min() and x.max() <= 255
    if rgb is not None:
        expected = [grey] if channels == 1 else list(rgb)
        np.testing.assert_allclose(x[0].reshape(-1, channels).mean(axis=0), expected, atol=1.0)


def test_16_bit_pngs_keep_their_gradient(tmp_path):
    """A 16-bit image is scaled to 8 bits, not clipped at 255."""
    ramp = np.linspace(0, 65535, 64 * 64).reshape(64, 64).astype(np.uint16)
    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        for i in range(2):
            Image.fromarray(ramp).save(tmp_path / cls / f"{i}.png")
    data = load_dataset(compose("dataset=image_folder", f"dataset.path={tmp_path}",
                                "dataset.image_size=64", "dataset.channels=1",
                                "dataset.test_fraction=0.25").dataset, seed=0)
    x = np.concatenate([data.x_train, data.x_test])
    assert abs(float(x.mean()) - 127.5) < 1.0 and float((x >= 254.5).mean()) < 0.01
    np.testing.assert_allclose(x[0, :, :, 0], ramp / 65535 * 255, atol=0.6)


def png(width: int, height: int, body: bytes = b"\x00") -> bytes:
    """A PNG whose header claims width x height grey pixels."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(body))
            + chunk(b"IEND", b""))


def test_unusable_images_are_skipped_and_counted_by_reason_in_one_line(tmp_path, caplog):
    from ablation.data.images import read_image_tree

    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        for i in range(2):
            Image.fromarray(np.full((8, 8, 3), 9, np.uint8)).save(tmp_path / cls / f"{i}.png")
    (tmp_path / "a" / "bomb.png").write_bytes(png(40_000, 40_000))     # over twice PIL's limit
    (tmp_path / "a" / "huge.png").write_bytes(png(10_000, 10_000))     # over PIL's limit
    (tmp_path / "b" / "broken.jpg").write_bytes(b"not an image")
    good = (tmp_path / "a" / "0.png").read_bytes()
    (tmp_path / "b" / "truncated.png").write_bytes(good[:len(good) // 2])
    (tmp_path / "b" / "notes.txt").write_text("x")
    with caplog.at_level(logging.WARNING):
        x, y = read_image_tree(tmp_path, ["a", "b"], 8, 3)
    assert len(x) == 4 and list(y) == [0, 0, 1, 1]
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1, lines
    assert "skipped 5 file(s)" in lines[0] and "2 too large (over 89,478,485 pixels)" in lines[0]
    assert "2 unreadable (e.g. b/broken.jpg, b/truncated.png)" in lines[0]
    assert "1 not images (1 .txt" in lines[0]


@pytest.mark.parametrize("layout", ["one folder, split by test_fraction", "train and test"])
def test_a_class_with_a_single_image_is_refused_naming_it(tmp_path, layout):
    train = tmp_path / "train" if layout == "train and test" else tmp_path
    for cls, count in (("cats", 3), ("lonely_dog", 1)):
        for folder in (train, tmp_path / "test") if layout == "train and test" else (train,):
            (folder / cls).mkdir(parents=True)
            for i in range(count):
                Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(folder / cls / f"{i}.png")
    with pytest.raises(DataError) as error:
        load_dataset(compose("dataset=image_folder", f"dataset.path={tmp_path}",
                             "dataset.image_size=8").dataset, seed=0)
    message = str(error.value)
    assert "class 'lonely_dog'" in message and "has 1 usable image(s)" in message
    assert "at least 2" in message and "\n" not in message


def test_a_folder_too_small_to_split_is_refused_in_one_line(tmp_path):
    (tmp_path / "only").mkdir()
    for i in range(2):
        Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "only" / f"{i}.png")
    with pytest.raises(DataError) as error:
        load_dataset(compose("dataset=image_folder", f"dataset.path={tmp_path}",
                             "dataset.image_size=8").dataset, seed=0)
    message = str(error.value)
    assert "has 2 usable images, too few to split into train, validation and test" in message
    assert "the smallest class, 'only', has 2" in message and "\n" not in message


def test_file_and_class_names_that_are_not_utf8_reach_the_log_and_the_record(tmp_path, capsys):
    root = Path(os.fsdecode(bytes(tmp_path) + b"/data"))
    odd_class = Path(os.fsdecode(bytes(root) + b"/caf\xe9"))
    plain = root / "plain"
    for folder in (odd_class, plain):
        folder.mkdir(parents=True)
        for i in range(3):
            Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(folder / f"{i}.png")
    (Path(os.fsdecode(bytes(odd_class) + b"/bad\xff.png"))).write_bytes(b"not an image")
    log_file = tmp_path / "job.log"
    handler = logging.FileHandler(log_file, encoding="utf-8")
    logger = logging.getLogger("ablation")
    logger.addHandler(handler)
    try:
        data = load_dataset(compose("dataset=image_folder", f"dataset.path={root}",
                                    "dataset.image_size=8").dataset, seed=0)
    finally:
        logger.removeHandler(handler)
        handler.close()
    assert "Logging error" not in capsys.readouterr().err
    assert "1 unreadable (e.g. caf\\xe9/bad\\xff.png)" in log_file.read_text(encoding="utf-8")
    assert data.class_names == ["caf\\xe9", "plain"]
    json.dumps(data.class_names, ensure_ascii=False).encode("utf-8")  # a record can hold them


@pytest.mark.parametrize("orientation, upright", [
    (3, "ROTATE_180"), (6, "ROTATE_270"), (8, "ROTATE_90"), (2, "FLIP_LEFT_RIGHT")])
def test_an_images_exif_orientation_is_applied_as_a_viewer_shows_it(tmp_path, orientation,
                                                                   upright):
    """A camera's picture stored sideways with an EXIF Orientation tag is read upright
    (PIL's ``ImageOps.exif_transpose``), the same as the upright picture saved plainly."""
    from PIL import Image

    from ablation.data.images import read_image

    pixels = np.zeros((6, 12), np.uint8)
    pixels[:2, :4] = 255       # one bright corner: any turn or flip moves it
    stored = Image.fromarray(pixels, "L")
    exif = Image.Exif()
    exif[0x0112] = orientation
    stored.save(tmp_path / "tagged.png", exif=exif)
    stored.transpose(getattr(Image.Transpose, upright)).save(tmp_path / "upright.png")
    tagged, plain = (read_image(tmp_path / f"{n}.png", 12, 1) for n in ("tagged", "upright"))
    np.testing.assert_array_equal(tagged, plain)
    assert not np.array_equal(plain, read_image(tmp_path / "tagged.png", 12, 1)[::-1])
