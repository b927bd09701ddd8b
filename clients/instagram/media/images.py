"""Make an image postable on Instagram, or refuse it with a reason, before anything is uploaded.

Instagram takes JPEG, sRGB, an aspect ratio between 4:5 and 1.91:1, a width of 320 to 1440 px and
at most 8 MB. :func:`prepare_image` converts what it can (format, colour profile, transparency,
orientation, aspect by cropping or padding, width, file size) and lists what it changed;
anything it cannot fix (not an image, a corrupt file, absurd dimensions) raises
:class:`~clients.instagram.errors.MediaRejected`.
"""

from __future__ import annotations

import io
import math
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from PIL import Image, ImageCms, ImageOps, UnidentifiedImageError

from clients.instagram.errors import MediaRejected

__all__ = ["ImageRules", "PreparedImage", "prepare_image"]

_MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ImageRules:
    """What Instagram accepts (the defaults) and how to get there."""

    min_width: int = 320
    max_width: int = 1440
    min_aspect: float = 4 / 5
    max_aspect: float = 1.91
    max_bytes: int = 8 * _MB
    fit: Literal["crop", "pad"] = "pad"
    """Outside the aspect range: ``crop`` the centre, or ``pad`` with ``background``."""
    background: tuple[int, int, int] = (255, 255, 255)
    """Colour of padding and of transparent pixels (JPEG has no alpha)."""
    max_source_bytes: int = 200 * _MB
    max_source_pixels: int = 80_000_000
    min_source_side: int = 150
    """Smaller sources are refused rather than blown up to 320 px."""
    max_source_aspect: float = 6.0
    """A source wider (or taller) than this is a strip, not a photo: refused."""
    qualities: tuple[int, ...] = (95, 90, 85, 80, 75, 70, 60, 50)


@dataclass(frozen=True, slots=True)
class PreparedImage:
    """A JPEG ready to upload, with the list of what was changed to get there."""

    source: Path
    path: Path
    width: int
    height: int
    size: int
    changes: tuple[str, ...] = field(default_factory=tuple)
    content_type: str = "image/jpeg"


def prepare_image(
    source: str | Path,
    out_dir: str | Path,
    rules: ImageRules | None = None,
    *,
    stem: str | None = None,
) -> PreparedImage:
    """Check ``source`` and write a conforming JPEG into ``out_dir`` (the source is untouched)."""
    rules = rules or ImageRules()
    source = Path(source)
    if not source.is_file():
        raise MediaRejected(source, "the file does not exist")
    size = source.stat().st_size
    if size == 0:
        raise MediaRejected(source, "the file is empty")
    if size > rules.max_source_bytes:
        raise MediaRejected(
            source,
            f"{size / _MB:.1f} MB is more than the {rules.max_source_bytes // _MB} MB accepted",
        )
    changes: list[str] = []
    img = _open(source, rules)
    fmt = img.format or "unknown"
    if fmt != "JPEG":
        changes.append(f"converted {fmt} to JPEG")
    if getattr(img, "n_frames", 1) > 1:
        img.seek(0)
        changes.append("kept the first frame of an animation")
    oriented = ImageOps.exif_transpose(img)
    if oriented is not None and oriented.size != img.size:
        changes.append("applied the EXIF orientation")
    img = _to_srgb(oriented or img, rules.background, changes)
    width, height = img.size
    if min(width, height) < rules.min_source_side:
        raise MediaRejected(
            source,
            f"{width}x{height} px is too small (at least {rules.min_source_side} px a side; "
            f"Instagram shows {rules.min_width} px or more)",
        )
    ratio = width / height
    if ratio > rules.max_source_aspect or ratio < 1 / rules.max_source_aspect:
        raise MediaRejected(
            source,
            f"aspect ratio {ratio:.2f}:1 is too extreme to {rules.fit} into "
            f"{rules.min_aspect:.2f}:1 .. {rules.max_aspect:.2f}:1",
        )
    img = _fit_aspect(img, rules, changes)
    img = _fit_width(img, rules, changes)
    out = Path(out_dir) / f"{stem or source.stem}.jpg"
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "JPEG" and not changes and size <= rules.max_bytes:
        shutil.copyfile(source, out)  # already conforming: no second lossy encode
    else:
        data, img = _encode(img, rules, changes, source)
        out.write_bytes(data)
    return PreparedImage(
        source=source,
        path=out,
        width=img.width,
        height=img.height,
        size=out.stat().st_size,
        changes=tuple(changes),
    )


def _open(source: Path, rules: ImageRules) -> Image.Image:
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            img = Image.open(source)
        except UnidentifiedImageError:
            raise MediaRejected(source, "not an image Pillow can read") from None
        except (Image.DecompressionBombWarning, Image.DecompressionBombError):
            raise MediaRejected(
                source,
                f"absurd dimensions: more than {Image.MAX_IMAGE_PIXELS or 0:,} pixels "
                "(Pillow's decompression-bomb limit)",
            ) from None
        except OSError as exc:
            raise MediaRejected(source, f"cannot be opened: {exc}") from None
        width, height = img.size
        if width * height > rules.max_source_pixels:
            raise MediaRejected(
                source,
                f"absurd dimensions: {width}x{height} px is more than "
                f"{rules.max_source_pixels // 1_000_000} megapixels",
            )
        try:
            img.load()
        except (OSError, SyntaxError, ValueError) as exc:
            raise MediaRejected(source, f"the image data is corrupt or truncated ({exc})") from None
    return img


def _to_srgb(img: Image.Image, background: tuple[int, int, int], changes: list[str]) -> Image.Image:
    icc = img.info.get("icc_profile")
    if icc and img.mode in ("RGB", "RGBA", "CMYK"):
        try:
            profile = ImageCms.ImageCmsProfile(io.BytesIO(icc))
            name = (ImageCms.getProfileDescription(profile) or "").strip()
            if "srgb" not in name.lower():
                out_mode = "RGBA" if img.mode == "RGBA" else "RGB"
                srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB"))
                converted = ImageCms.profileToProfile(img, profile, srgb, outputMode=out_mode)
                if converted is not None:
                    img = converted
                changes.append(f"converted colour profile {name or 'unnamed'!r} to sRGB")
        except (OSError, ImageCms.PyCMSError):
            changes.append("ignored an unreadable colour profile")
    if img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        alpha = rgba.getchannel("A")
        flat = Image.new("RGB", rgba.size, background)
        low = alpha.getextrema()[0]
        if isinstance(low, int | float) and low < 255:
            flat.paste(rgba, mask=alpha)
            changes.append("flattened transparency onto #{:02x}{:02x}{:02x}".format(*background))
            return flat
        return rgba.convert("RGB")
    if img.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        high = img.getextrema()[1]
        scale = 255.0 / float(high) if isinstance(high, int | float) and high > 255 else 1.0
        changes.append(f"converted {img.mode} (high bit depth) to 8-bit")
        return img.convert("F").point(lambda v: v * scale).convert("L").convert("RGB")
    if img.mode != "RGB":
        if img.mode not in ("L", "P", "1"):
            changes.append(f"converted {img.mode} to RGB")
        return img.convert("RGB")
    return img


def _height_bounds(width: int, rules: ImageRules) -> tuple[int, int]:
    """Heights that keep ``width / height`` inside the aspect range."""
    return math.ceil(width / rules.max_aspect), math.floor(width / rules.min_aspect)


def _fit_aspect(img: Image.Image, rules: ImageRules, changes: list[str]) -> Image.Image:
    width, height = img.size
    ratio = width / height
    if rules.min_aspect <= ratio <= rules.max_aspect:
        return img
    if ratio > rules.max_aspect:  # too wide
        if rules.fit == "crop":
            new_w, new_h = math.floor(height * rules.max_aspect), height
        else:
            new_w, new_h = width, math.ceil(width / rules.max_aspect)
    elif rules.fit == "crop":  # too tall
        new_w, new_h = width, math.floor(width / rules.min_aspect)
    else:
        new_w, new_h = math.ceil(height * rules.min_aspect), height
    if rules.fit == "crop":
        left, top = (width - new_w) // 2, (height - new_h) // 2
        out = img.crop((left, top, left + new_w, top + new_h))
    else:
        out = Image.new("RGB", (new_w, new_h), rules.background)
        out.paste(img, ((new_w - width) // 2, (new_h - height) // 2))
    verb = "cropped" if rules.fit == "crop" else "padded"
    changes.append(f"{verb} aspect ratio {ratio:.2f}:1 to {new_w / new_h:.2f}:1")
    return out


def _resize(img: Image.Image, width: int, rules: ImageRules) -> Image.Image:
    low, high = _height_bounds(width, rules)
    height = min(max(round(img.height * width / img.width), low), high)
    return img.resize((width, height), Image.Resampling.LANCZOS)


def _fit_width(img: Image.Image, rules: ImageRules, changes: list[str]) -> Image.Image:
    if img.width > rules.max_width:
        changes.append(f"resized from {img.width} to {rules.max_width} px wide")
        return _resize(img, rules.max_width, rules)
    if img.width < rules.min_width:
        changes.append(f"upscaled from {img.width} to {rules.min_width} px wide")
        return _resize(img, rules.min_width, rules)
    return img


def _encode(
    img: Image.Image, rules: ImageRules, changes: list[str], source: Path
) -> tuple[bytes, Image.Image]:
    limit_mb = round(rules.max_bytes / _MB, 3)
    while True:
        for quality in rules.qualities:
            buffer = io.BytesIO()
            img.save(buffer, "JPEG", quality=quality, optimize=True)
            if buffer.tell() <= rules.max_bytes:
                if quality != rules.qualities[0]:
                    changes.append(
                        f"encoded at JPEG quality {quality} to stay under {limit_mb:g} MB"
                    )
                return buffer.getvalue(), img
        smaller = int(img.width * 0.85)
        if smaller < rules.min_width:
            raise MediaRejected(
                source,
                f"cannot get under {limit_mb:g} MB even at JPEG quality {rules.qualities[-1]} "
                f"and {img.width} px wide",
            )
        changes.append(f"scaled down to {smaller} px wide to stay under {limit_mb:g} MB")
        img = _resize(img, smaller, rules)
