"""Media checks and conversion: fixed where possible, refused with a reason otherwise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PIL import Image, ImageCms

from clients.instagram.errors import MediaRejected
from clients.instagram.media import ImageRules, VideoRules, check_video, prepare_image, probe_video
from tests.clients.instagram.helpers import make_image, make_mp4

MB = 1024 * 1024


def within_instagram_limits(path: Path) -> None:
    with Image.open(path) as img:
        assert img.format == "JPEG" and img.mode == "RGB"
        assert 320 <= img.width <= 1440
        assert 4 / 5 <= img.width / img.height <= 1.91
    assert path.stat().st_size <= 8 * MB


def test_png_with_alpha_is_flattened_onto_the_background(tmp_path: Path) -> None:
    src = tmp_path / "logo.png"
    img = Image.new("RGBA", (800, 800), (0, 0, 0, 0))
    img.paste((255, 0, 0, 255), (200, 200, 600, 600))
    img.save(src)

    out = prepare_image(src, tmp_path / "out", ImageRules(background=(0, 0, 255)))

    within_instagram_limits(out.path)
    with Image.open(out.path) as result:
        r, _, b = result.getpixel((10, 10))  # type: ignore[misc]
        assert b > 240 and r < 15  # the transparent corner became the background
        r, _, b = result.getpixel((400, 400))  # type: ignore[misc]
        assert r > 240 and b < 15
    assert "converted PNG to JPEG" in out.changes
    assert "flattened transparency onto #0000ff" in out.changes


@pytest.mark.parametrize(("fit", "size"), [("pad", (1440, 754)), ("crop", (1440, 754))])
def test_a_3_to_1_panorama_is_padded_or_cropped_to_191(
    tmp_path: Path, fit: str, size: tuple[int, int]
) -> None:
    src = make_image(tmp_path / "pano.jpg", size=(3000, 1000))

    out = prepare_image(src, tmp_path / "out", ImageRules(fit=fit))  # type: ignore[arg-type]

    within_instagram_limits(out.path)
    assert (out.width, out.height) == size
    verb = "padded" if fit == "pad" else "cropped"
    assert f"{verb} aspect ratio 3.00:1 to 1.91:1" in out.changes
    with Image.open(out.path) as result:
        red = result.getpixel((720, 2))[0]  # type: ignore[index]
    assert red > 245 if fit == "pad" else 190 < red < 210  # white padding vs the photo itself


def test_a_tall_image_is_padded_to_4_by_5(tmp_path: Path) -> None:
    src = make_image(tmp_path / "tall.jpg", size=(600, 1200))
    out = prepare_image(src, tmp_path / "out")
    within_instagram_limits(out.path)
    assert out.width / out.height == pytest.approx(0.8, abs=0.01)


def test_a_12_mb_noise_image_is_brought_under_8_mb(tmp_path: Path) -> None:
    src = tmp_path / "noise.png"
    Image.frombytes("RGB", (2048, 2048), os.urandom(2048 * 2048 * 3)).save(src, compress_level=1)
    assert src.stat().st_size > 12 * MB

    out = prepare_image(src, tmp_path / "out")

    within_instagram_limits(out.path)
    assert out.width == 1440
    assert "resized from 2048 to 1440 px wide" in out.changes


def test_quality_steps_down_then_the_image_shrinks_to_fit_the_byte_limit(tmp_path: Path) -> None:
    src = tmp_path / "noise.png"
    Image.frombytes("RGB", (1000, 1000), os.urandom(1000 * 1000 * 3)).save(src)

    out = prepare_image(src, tmp_path / "out", ImageRules(max_bytes=300 * 1024))

    assert out.size <= 300 * 1024
    assert any(c.startswith("scaled down to") for c in out.changes)


def test_an_image_that_cannot_get_under_the_limit_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "noise.png"
    Image.frombytes("RGB", (1000, 1000), os.urandom(1000 * 1000 * 3)).save(src)
    with pytest.raises(MediaRejected, match=r"cannot get under 0\.01 MB even at JPEG quality 50"):
        prepare_image(src, tmp_path / "out", ImageRules(max_bytes=10 * 1024))
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_a_conforming_jpeg_is_copied_unchanged(tmp_path: Path) -> None:
    src = make_image(tmp_path / "ok.jpg", size=(1080, 1350))
    out = prepare_image(src, tmp_path / "out")
    assert out.changes == () and out.path.read_bytes() == src.read_bytes()


def test_cmyk_and_small_images_are_converted_and_upscaled(tmp_path: Path) -> None:
    src = make_image(tmp_path / "print.jpg", size=(200, 200), mode="CMYK")
    out = prepare_image(src, tmp_path / "out")
    within_instagram_limits(out.path)
    assert "converted CMYK to RGB" in out.changes
    assert "upscaled from 200 to 320 px wide" in out.changes


def test_a_non_srgb_profile_is_converted(tmp_path: Path) -> None:
    src = tmp_path / "lab.jpg"
    profile = ImageCms.ImageCmsProfile(ImageCms.createProfile("LAB"))
    Image.new("RGB", (800, 800), (10, 200, 30)).save(src, icc_profile=profile.tobytes())
    out = prepare_image(src, tmp_path / "out")
    within_instagram_limits(out.path)
    assert any("colour profile" in c for c in out.changes)


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda p: p.write_bytes(b"GIF89a nope"), "not an image"),
        (lambda p: p.write_bytes(b""), "the file is empty"),
        (lambda p: make_image(p, size=(100, 100)), "100x100 px is too small"),
        (lambda p: make_image(p, size=(4000, 400)), "aspect ratio 10.00:1 is too extreme"),
        (
            lambda p: p.write_bytes(make_image(p, size=(1200, 1200)).read_bytes()[:3000]),
            "corrupt or truncated",
        ),
    ],
    ids=["garbage", "empty", "tiny", "strip", "truncated"],
)
def test_what_cannot_be_fixed_is_refused_with_a_reason(tmp_path: Path, make, reason: str) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "bad.jpg"
    make(src)
    with pytest.raises(MediaRejected, match=reason) as info:
        prepare_image(src, tmp_path / "out")
    assert str(info.value).startswith("bad.jpg: refused before upload:")


def test_absurd_dimensions_are_refused(tmp_path: Path) -> None:
    src = make_image(tmp_path / "huge.png", size=(12000, 9000), mode="L", fmt="PNG")
    with pytest.raises(MediaRejected, match="absurd dimensions"):
        prepare_image(src, tmp_path / "out")


def test_a_reel_is_probed_from_its_own_boxes(tmp_path: Path) -> None:
    video = make_mp4(tmp_path / "reel.mp4", duration=12.5, width=1080, height=1920)
    info = probe_video(video)
    assert (info.brand, info.duration, info.width, info.height) == ("isom", 12.5, 1080, 1920)
    checked = check_video(video)
    assert checked.content_type == "video/mp4" and checked.size == video.stat().st_size


@pytest.mark.parametrize(
    ("name", "kwargs", "rules", "reason"),
    [
        ("long.mp4", {"duration": 1200.0}, VideoRules(), "lasts 1200.0 s"),
        ("short.mp4", {"duration": 1.0}, VideoRules(), "lasts 1.0 s"),
        ("wide.mp4", {"width": 3840, "height": 2160}, VideoRules(), "3840 px wide"),
        ("big.mp4", {}, VideoRules(max_bytes=1024), "more than the 0 MB"),
        ("clip.avi", {}, VideoRules(), "must be .mp4 or .mov"),
    ],
)
def test_reels_outside_the_limits_are_refused(
    tmp_path: Path, name: str, kwargs: dict[str, float], rules: VideoRules, reason: str
) -> None:
    video = make_mp4(tmp_path / name, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(MediaRejected, match=reason):
        check_video(video, rules)


def test_not_an_mp4_or_a_truncated_one_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "fake.mp4"
    fake.write_bytes(b"\x00\x00\x00\x10notaftypbox" + bytes(100))
    with pytest.raises(MediaRejected, match="does not start with an 'ftyp' box"):
        check_video(fake)
    truncated = tmp_path / "cut.mp4"
    truncated.write_bytes(make_mp4(tmp_path / "whole.mp4").read_bytes()[:40])
    with pytest.raises(MediaRejected, match="'moov' box runs past the end: the file is truncated"):
        check_video(truncated)
    no_moov = tmp_path / "nomoov.mp4"
    no_moov.write_bytes(make_mp4(tmp_path / "whole.mp4").read_bytes()[:28])
    with pytest.raises(MediaRejected, match="no 'moov' box"):
        check_video(no_moov)
