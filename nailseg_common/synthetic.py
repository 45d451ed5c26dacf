"""Synthetic nail photos in the real dataset's layout, the course's embedded default.

Every image shows fingers (skin tones from light to dark, shaded like cylinders, with
knuckle creases) whose nails are polished in many colours or left nude, with glossy
highlights, on textured and cluttered backgrounds that contain the same colours:
polish-coloured blobs and glossy beads, skin-coloured fingers seen from the palm side
(no nail). Lighting gradients, colour casts, blur, noise and JPEG artefacts follow.
A model therefore has to learn the shape and context of a nail, not one colour threshold.

The four sub-folders differ the way the real dataset's types might:

1. one finger (sometimes two), close up;
2. a whole hand, several fingers and a thumb;
3. small hands far away;
4. fingers on a busy background full of distractors.

Images are ``Images/<type>/<index>.png``, masks ``Masks/<type>/<index>.png`` (0/255).
Sample ``i`` depends only on ``(seed, i)``, so a set is byte-for-byte reproducible.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
from PIL import Image, ImageDraw, ImageFilter
from tqdm import tqdm

from .atomic import folder_lock, staged_folder

GENERATOR_VERSION = 2
MANIFEST_NAME = "manifest.json"
TYPES = (1, 2, 3, 4)
TYPE_DESCRIPTIONS = {
    1: "one finger, close up",
    2: "a whole hand: several fingers and a thumb",
    3: "small hands far away",
    4: "fingers on a busy background with distractors",
}
MIN_SIDE, MAX_SIDE = 240, 640
MIN_NAIL_PIXELS = 12

SKIN_TONES = np.array([
    (255, 224, 196), (241, 194, 167), (233, 185, 150), (224, 172, 140), (198, 134, 103),
    (176, 116, 84), (150, 96, 66), (120, 75, 52), (92, 58, 40), (68, 44, 32),
], dtype=np.float32)
POLISH_COLOURS = np.array([
    (196, 18, 38), (140, 10, 30), (235, 110, 160), (250, 180, 195), (255, 105, 85),
    (105, 35, 120), (30, 35, 95), (22, 22, 26), (240, 238, 232), (25, 135, 140),
    (55, 130, 60), (200, 160, 60), (215, 170, 150), (120, 150, 210), (250, 210, 60),
    (90, 40, 30),
], dtype=np.float32)
NEUTRAL_COLOURS = np.array([
    (245, 245, 245), (200, 200, 205), (120, 120, 125), (40, 40, 45), (160, 120, 80),
    (110, 75, 45), (210, 190, 160), (70, 90, 110), (150, 170, 150), (230, 220, 200),
], dtype=np.float32)


def _pick(rng: np.random.Generator, palette: np.ndarray, jitter: float = 12.0) -> np.ndarray:
    colour = palette[rng.integers(len(palette))] + rng.normal(0.0, jitter, 3)
    return np.clip(colour, 0, 255).astype(np.float32)


def _scene_colour(rng: np.random.Generator) -> np.ndarray:
    """A background colour: mostly neutral, often a polish colour or a skin tone."""
    palette = (NEUTRAL_COLOURS, POLISH_COLOURS, SKIN_TONES)[rng.choice(3, p=(0.5, 0.3, 0.2))]
    return _pick(rng, palette, 18.0)


def _smooth_noise(rng: np.random.Generator, h: int, w: int, cells: int) -> np.ndarray:
    """Smooth random field in about [0, 1]: a coarse random grid upsampled bicubically."""
    gw = max(2, cells)
    gh = max(2, round(cells * h / w))
    coarse = Image.fromarray(rng.random((gh, gw), dtype=np.float32))  # mode F
    return np.asarray(coarse.resize((w, h), Image.Resampling.BICUBIC))


def _rotated_polygon(cx: float, cy: float, rx: float, ry: float, angle: float,
                     points: int) -> list[tuple[float, float]]:
    """Vertices of an ellipse (``points`` large) or a rectangle (``points == 4``), rotated."""
    if points == 4:
        corners = [(-rx, -ry), (rx, -ry), (rx, ry), (-rx, ry)]
    else:
        corners = [(rx * math.cos(t), ry * math.sin(t))
                   for t in np.linspace(0, 2 * math.pi, points, endpoint=False)]
    c, s = math.cos(angle), math.sin(angle)
    return [(cx + x * c - y * s, cy + x * s + y * c) for x, y in corners]


def _background(rng: np.random.Generator, h: int, w: int, clutter: int) -> np.ndarray:
    """A textured background (gradient, blotches or stripes) with ``clutter`` shapes on it."""
    c1, c2 = _scene_colour(rng), _scene_colour(rng)
    side = max(h, w)
    ys = (np.arange(h, dtype=np.float32) / side)[:, None]
    xs = (np.arange(w, dtype=np.float32) / side)[None, :]
    kind = rng.integers(3)
    angle = rng.uniform(0, 2 * math.pi)
    if kind == 0:
        t = xs * math.cos(angle) + ys * math.sin(angle)
        t = (t - t.min()) / max(float(t.max() - t.min()), 1e-6)
    elif kind == 1:
        t = _smooth_noise(rng, h, w, int(rng.integers(3, 10)))
    else:
        period = rng.uniform(0.015, 0.12)
        t = 0.5 + 0.5 * np.sin((xs * math.cos(angle) + ys * math.sin(angle)) * (2 * math.pi / period)
                               + 0.8 * _smooth_noise(rng, h, w, 4))
    grain = _smooth_noise(rng, h, w, int(rng.integers(24, 80))) - np.float32(0.5)
    grain *= np.float32(rng.uniform(0.05, 0.35))
    grain += np.float32(1.0)
    t = np.clip(t, 0, 1)[:, :, None]
    base = (c2 - c1) * t
    base += c1
    base *= grain[:, :, None]
    np.clip(base, 0, 255, out=base)
    image = Image.fromarray(base.astype(np.uint8))
    draw = ImageDraw.Draw(image)
    for _ in range(clutter):
        fill = tuple(int(v) for v in _scene_colour(rng))
        cx, cy = rng.uniform(0, w), rng.uniform(0, h)
        rx, ry = side * rng.uniform(0.02, 0.18), side * rng.uniform(0.02, 0.18)
        shape = rng.integers(4)
        if shape == 0:
            draw.polygon(_rotated_polygon(cx, cy, rx, ry, rng.uniform(0, math.pi), 24), fill=fill)
        elif shape == 1:
            draw.polygon(_rotated_polygon(cx, cy, rx, ry, rng.uniform(0, math.pi), 4), fill=fill)
        elif shape == 2:
            end = (cx + rng.uniform(-1, 1) * side * 0.4, cy + rng.uniform(-1, 1) * side * 0.4)
            draw.line([(cx, cy), end], fill=fill, width=int(rng.integers(2, max(3, side // 30))))
        else:
            angles = np.sort(rng.uniform(0, 2 * math.pi, int(rng.integers(3, 8))))
            radii = rng.uniform(0.3, 1.0, len(angles)) * rx
            draw.polygon([(cx + r * math.cos(a), cy + r * math.sin(a))
                          for r, a in zip(radii, angles, strict=True)], fill=fill)
    return np.asarray(image, dtype=np.float32)


def _box(cx: float, cy: float, ex: float, ey: float, h: int, w: int) -> tuple[int, int, int, int]:
    """Integer pixel box around a centre with half-extents, clipped to the image."""
    return (max(0, int(cy - ey) - 1), min(h, int(cy + ey) + 2),
            max(0, int(cx - ex) - 1), min(w, int(cx + ex) + 2))


def _local(box, cx: float, cy: float, angle: float):
    """Coordinates along (``u``) and across (``v``) the direction ``angle`` in ``box``."""
    y0, y1, x0, x1 = box
    ys = np.arange(y0, y1, dtype=np.float32)[:, None] - np.float32(cy)
    xs = np.arange(x0, x1, dtype=np.float32)[None, :] - np.float32(cx)
    c, s = np.float32(math.cos(angle)), np.float32(math.sin(angle))
    return xs * c + ys * s, ys * c - xs * s


def _composite(canvas: np.ndarray, box, colour: np.ndarray, alpha: np.ndarray) -> None:
    y0, y1, x0, x1 = box
    region = canvas[y0:y1, x0:x1]
    a = alpha[:, :, None]
    colour -= region  # colour is a temporary the caller hands over
    colour *= a
    region += colour


def _nail_style(rng: np.random.Generator, skin: np.ndarray) -> dict:
    """Shape, colour and finish shared by the nails of one hand."""
    nude = rng.random() < 0.3
    if nude:
        colour = np.clip(skin * rng.uniform((1.0, 0.9, 0.9), (1.12, 1.0, 1.02)) + (12, 4, 8), 0, 255)
    else:
        colour = _pick(rng, POLISH_COLOURS, 14.0)
    shape = rng.choice(["oval", "square", "almond", "stiletto"], p=(0.4, 0.3, 0.2, 0.1))
    long_nail = shape in ("almond", "stiletto") or rng.random() < 0.3
    return {
        "nude": nude,
        "colour": colour.astype(np.float32),
        "power": {"oval": 2.0, "square": 4.5, "almond": 2.2, "stiletto": 2.0}[shape],
        "taper": {"oval": 0.0, "square": 0.0, "almond": 0.55, "stiletto": 0.8}[shape],
        "length": rng.uniform(1.9, 2.7) if long_nail else rng.uniform(1.3, 1.8),
        "width": rng.uniform(0.68, 0.85),
        "gloss": 0.0 if nude and rng.random() < 0.5 else rng.uniform(0.25, 0.85),
    }


def _draw_nail(canvas, mask, rng, tip, angle, radius, style) -> None:
    """One nail on the fingertip at ``tip`` (centre of the tip's cap), pointing at ``angle``."""
    h, w = canvas.shape[:2]
    half_len = style["length"] * radius * rng.uniform(0.45, 0.55)
    half_wid = style["width"] * radius * rng.uniform(0.95, 1.05)
    far_end = radius * (rng.uniform(0.95, 1.4) if style["length"] > 1.85 else rng.uniform(0.35, 0.8))
    centre_u = far_end - half_len
    cx = tip[0] + centre_u * math.cos(angle)
    cy = tip[1] + centre_u * math.sin(angle)
    extent = max(half_len, half_wid) + 2
    box = _box(cx, cy, extent, extent, h, w)
    if box[0] >= box[1] or box[2] >= box[3]:
        return
    du, dv = _local(box, cx, cy, angle)
    t = du / np.float32(half_len)
    across = half_wid * (1.0 - style["taper"] * np.clip(t, 0, 1) ** 2) + 1e-3
    q = np.abs(dv) / across
    p = np.where(t > 0, np.float32(style["power"]), np.float32(2.0))
    f = (np.abs(t) ** p + q ** p) ** (1.0 / p)
    alpha = np.clip(0.5 - (f - 1.0) * np.float32(half_wid), 0, 1)
    if not alpha.any():
        return
    curve = np.sqrt(np.clip(1.0 - q * q, 0, 1))
    shade = 0.6 + 0.4 * curve
    shade *= 1.0 - 0.3 * np.clip((f - 0.85) / 0.15, 0, 1) * (t < 0)  # cuticle
    colour = style["colour"] * shade[:, :, None]
    if style["nude"]:
        lunula = np.clip((-t - 0.55) / 0.3, 0, 1) * (f < 0.9)
        free_edge = np.clip((du + centre_u - 0.85 * radius) / (0.2 * radius), 0, 1)
        colour += (np.float32(250) - colour) * (0.35 * lunula + 0.75 * free_edge)[:, :, None]
    gloss = style["gloss"] * rng.uniform(0.7, 1.2)
    offset = rng.uniform(-0.5, 0.5)
    streak = gloss * np.exp(-((dv / across - offset) / 0.18) ** 2 - (t / 0.6) ** 4)
    colour += (np.float32(255) - colour) * np.clip(streak, 0, 1)[:, :, None]
    _composite(canvas, box, colour, alpha)
    y0, y1, x0, x1 = box
    mask[y0:y1, x0:x1][f <= 1.0] = 1


class _Light(NamedTuple):
    """The scene's light: where it comes from (radians) and how dark shadows are."""

    direction: float
    darkness: float


def _shadow(canvas, box, alpha, radius, light: _Light) -> None:
    """Darken the canvas under ``alpha`` moved away from the light by a third of ``radius``."""
    h, w = canvas.shape[:2]
    dy = round(-math.sin(light.direction) * radius / 3)
    dx = round(-math.cos(light.direction) * radius / 3)
    y0, y1, x0, x1 = box
    ty0, ty1, tx0, tx1 = max(0, y0 + dy), min(h, y1 + dy), max(0, x0 + dx), min(w, x1 + dx)
    if ty0 >= ty1 or tx0 >= tx1:
        return
    cast = alpha[ty0 - dy - y0:ty1 - dy - y0, tx0 - dx - x0:tx1 - dx - x0]
    canvas[ty0:ty1, tx0:tx1] *= (1.0 - np.float32(light.darkness) * cast)[:, :, None]


def _visible_span(tip, angle, length, margin, h, w) -> tuple[float, float]:
    """Distances behind ``tip`` between which the finger's axis is within ``margin`` of the image."""
    lo, hi = 0.0, float(length)
    for start, step, size in ((tip[0], -math.cos(angle), w), (tip[1], -math.sin(angle), h)):
        if abs(step) < 1e-9:
            if not -margin <= start <= size + margin:
                return 1.0, 0.0
            continue
        a, b = (-margin - start) / step, (size + margin - start) / step
        lo, hi = max(lo, min(a, b)), min(hi, max(a, b))
    return lo, hi


def _draw_finger(canvas, mask, rng, tip, angle, radius, length, skin, light: _Light,
                 nail: dict | None) -> None:
    """A finger from ``length`` behind up to ``tip``; ``nail`` (a style) draws its nail too.

    The finger casts a shadow and hides whatever it covers, including nails drawn
    before it, so the mask is cleared under it (``mask`` may be None for distractors).
    Long fingers are drawn in pieces along their axis (each pixel belongs to exactly
    one piece), so a diagonal finger does not cost its whole bounding box.
    """
    h, w = canvas.shape[:2]
    c, s = math.cos(angle), math.sin(angle)
    near, far = _visible_span(tip, angle, length, radius + 2, h, w)
    if near > far:
        return
    count = max(1, math.ceil((far - near) / max(3.0 * radius, 32.0)))
    edges = [near + (far - near) * i / count for i in range(count + 1)]
    r = np.float32(radius)
    pieces = []
    for i in range(count):
        a, b = edges[i], edges[i + 1]  # this piece: u in [-b, -a)
        box = _box(tip[0] - (a + b) / 2 * c, tip[1] - (a + b) / 2 * s,
                   abs(b - a) / 2 * abs(c) + radius, abs(b - a) / 2 * abs(s) + radius, h, w)
        if box[0] >= box[1] or box[2] >= box[3]:
            continue
        u, v = _local(box, tip[0], tip[1], angle)
        along = u - np.clip(u, -length, 0)
        alpha = np.clip(0.5 - (np.sqrt(along * along + v * v) - r), 0, 1)
        if i > 0:
            alpha *= u < np.float32(-a)
        if i < count - 1:
            alpha *= u >= np.float32(-b)
        if alpha.any():
            pieces.append((box, u, v, alpha, a, b))
    for box, _, _, alpha, _, _ in pieces:
        _shadow(canvas, box, alpha, radius, light)
    facing = np.float32(0.15 * math.cos(angle + math.pi / 2 - light.direction))
    for box, u, v, alpha, a, b in pieces:
        shade = 0.6 + 0.4 * np.sqrt(np.clip(1.0 - (v / r) ** 2, 0, 1)) + facing * v / r
        for crease in (1.6, 3.6):
            if length > crease * radius and a - radius < crease * radius < b + radius:
                shade *= 1.0 - 0.12 * np.exp(-((u + crease * r) / (0.07 * r)) ** 2)
        _composite(canvas, box, skin * shade[:, :, None], alpha)
        if mask is not None:
            y0, y1, x0, x1 = box
            mask[y0:y1, x0:x1][alpha >= 0.5] = 0
    if mask is not None and nail is not None:
        _draw_nail(canvas, mask, rng, tip, angle, radius, nail)


def _draw_hand(canvas, mask, rng, middle_tip, angle, radius, skin, light, style) -> None:
    """Arm, palm, thumb and four fingers whose middle fingertip lies at ``middle_tip``."""
    h, w = canvas.shape[:2]
    c, s = math.cos(angle), math.sin(angle)
    nx, ny = -s, c
    side = 1.0 if rng.random() < 0.5 else -1.0  # left or right hand
    finger_len = radius * rng.uniform(5.5, 7.5)
    palm_half = radius * rng.uniform(4.0, 4.6)
    palm_len = radius * rng.uniform(5.0, 6.0)
    knuckle = (middle_tip[0] - finger_len * c, middle_tip[1] - finger_len * s)
    palm_tip = (knuckle[0] - (palm_half - radius) * c, knuckle[1] - (palm_half - radius) * s)
    big = float(math.hypot(h, w))
    _draw_finger(canvas, mask, rng, palm_tip, angle, palm_half * 0.85, big, skin, light, None)
    _draw_finger(canvas, mask, rng, palm_tip, angle, palm_half, palm_len, skin, light, None)
    thumb_base = (palm_tip[0] - palm_len * 0.55 * c + side * palm_half * 0.8 * nx,
                  palm_tip[1] - palm_len * 0.55 * s + side * palm_half * 0.8 * ny)
    thumb_angle = angle + side * rng.uniform(0.5, 1.0)
    thumb_len = finger_len * rng.uniform(0.75, 0.9)
    thumb_tip = (thumb_base[0] + thumb_len * math.cos(thumb_angle),
                 thumb_base[1] + thumb_len * math.sin(thumb_angle))
    _draw_finger(canvas, mask, rng, thumb_tip, thumb_angle, radius * 1.15, thumb_len, skin, light,
                 style)
    spread = rng.uniform(0.0, 0.14)
    for k, (scale, width) in enumerate(((0.88, 1.0), (1.0, 1.05), (0.94, 1.0), (0.72, 0.85))):
        offset = side * (1 - k) * radius * 2.15 + side * 0.5 * radius
        base = (knuckle[0] + offset * nx, knuckle[1] + offset * ny)
        a = angle + side * (1 - k) * spread - side * 0.5 * spread
        length = finger_len * scale * rng.uniform(0.95, 1.05)
        tip = (base[0] + length * math.cos(a), base[1] + length * math.sin(a))
        _draw_finger(canvas, mask, rng, tip, a, radius * width, length + palm_half * 0.5, skin,
                     light, style)


def _draw_bead(canvas, rng, radius) -> None:
    """A glossy polish-coloured oval on the background: nail-like colour, no finger."""
    h, w = canvas.shape[:2]
    style = _nail_style(rng, _pick(rng, SKIN_TONES))
    style["nude"] = False
    style["colour"] = _pick(rng, POLISH_COLOURS, 14.0)
    scratch = np.zeros((h, w), np.uint8)
    tip = (rng.uniform(0, w), rng.uniform(0, h))
    _draw_nail(canvas, scratch, rng, tip, rng.uniform(0, 2 * math.pi), radius, style)


def _image_size(rng: np.random.Generator, kind: int) -> tuple[int, int]:
    longest = int(rng.integers(400 if kind == 3 else 320, MAX_SIDE + 1))
    aspect = math.exp(rng.uniform(0.0, math.log(16 / 9)))
    shortest = int(min(longest, max(MIN_SIDE, round(longest / aspect))))
    return (longest, shortest) if rng.random() < 0.35 else (shortest, longest)


def _finish(rng: np.random.Generator, canvas: np.ndarray, kind: int) -> np.ndarray:
    """Lighting gradient, colour cast, sensor noise, blur and sometimes JPEG artefacts."""
    h, w = canvas.shape[:2]
    side = max(h, w)
    angle = rng.uniform(0, 2 * math.pi)
    ys = (np.arange(h, dtype=np.float32)[:, None] - h / 2) / side
    xs = (np.arange(w, dtype=np.float32)[None, :] - w / 2) / side
    light = 1.0 + np.float32(rng.uniform(0.0, 0.8)) * (xs * np.float32(math.cos(angle))
                                                         + ys * np.float32(math.sin(angle)))
    cast = rng.uniform(0.88, 1.12, 3).astype(np.float32) * np.float32(rng.uniform(0.75, 1.2))
    canvas *= light[:, :, None] * cast
    noise = rng.standard_normal((h, w, 1), np.float32)
    noise *= np.float32(rng.uniform(1.0, 9.0 if kind == 3 else 6.0))
    canvas += noise
    np.clip(canvas, 0, 255, out=canvas)
    pixels = canvas.astype(np.uint8)
    blur = rng.uniform(0.0, 1.6 if kind == 3 else 1.2)
    if blur > 0.5:
        pixels = np.array(Image.fromarray(pixels).filter(ImageFilter.BoxBlur(blur)))
    if rng.random() < 0.3:
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="JPEG", quality=int(rng.integers(60, 95)))
        pixels = np.array(Image.open(buffer).convert("RGB"))
    return pixels


def _attempt(rng: np.random.Generator, kind: int) -> tuple[np.ndarray, np.ndarray]:
    h, w = _image_size(rng, kind)
    shortest, big = min(h, w), float(math.hypot(h, w))
    clutter = int(rng.integers(*{1: (0, 4), 2: (1, 8), 3: (3, 12), 4: (8, 20)}[kind]))
    canvas = _background(rng, h, w, clutter)
    mask = np.zeros((h, w), np.uint8)
    light = _Light(rng.uniform(0, 2 * math.pi), rng.uniform(0.1, 0.45))
    distractors = int(rng.integers(2, 5)) if kind == 4 else int(rng.random() < 0.25)
    for _ in range(distractors):  # fingers seen from the palm side: skin, no nail
        r = shortest * rng.uniform(0.04, 0.12)
        tip = (rng.uniform(0, w), rng.uniform(0, h))
        _draw_finger(canvas, None, rng, tip, rng.uniform(0, 2 * math.pi), r, big,
                     _pick(rng, SKIN_TONES), light, None)
    beads = int(rng.integers(1, 4)) if kind == 4 else int(rng.random() < 0.2)
    for _ in range(beads):
        _draw_bead(canvas, rng, shortest * rng.uniform(0.02, 0.08))
    skin = _pick(rng, SKIN_TONES, 10.0)
    style = _nail_style(rng, skin)
    if kind == 1:
        for _ in range(1 if rng.random() < 0.7 else 2):
            tip = (w * rng.uniform(0.25, 0.75), h * rng.uniform(0.25, 0.75))
            _draw_finger(canvas, mask, rng, tip, rng.uniform(0, 2 * math.pi),
                         shortest * rng.uniform(0.12, 0.22), big, skin, light, style)
    elif kind == 2:
        tip = (w * rng.uniform(0.3, 0.7), h * rng.uniform(0.25, 0.75))
        _draw_hand(canvas, mask, rng, tip, rng.uniform(0, 2 * math.pi),
                   shortest * rng.uniform(0.05, 0.07), skin, light, style)
    elif kind == 3:
        for _ in range(int(rng.integers(1, 3))):
            tip = (w * rng.uniform(0.2, 0.8), h * rng.uniform(0.2, 0.8))
            _draw_hand(canvas, mask, rng, tip, rng.uniform(0, 2 * math.pi),
                       shortest * rng.uniform(0.028, 0.04), skin, light, style)
    else:
        for _ in range(int(rng.integers(1, 4))):
            tip = (w * rng.uniform(0.15, 0.85), h * rng.uniform(0.15, 0.85))
            _draw_finger(canvas, mask, rng, tip, rng.uniform(0, 2 * math.pi),
                         shortest * rng.uniform(0.07, 0.11), big, skin, light, style)
    return _finish(rng, canvas, kind), mask


def synthetic_sample(seed: int, index: int) -> tuple[int, np.ndarray, np.ndarray]:
    """Sample ``index`` of the set made with ``seed``: ``(type, image HxWx3, mask HxW in {0,1})``."""
    kind = TYPES[index % len(TYPES)]
    rng = np.random.default_rng([seed, index])
    while True:  # redraw the rare scene whose nails all fell outside the picture
        image, mask = _attempt(rng, kind)
        if int(mask.sum()) >= MIN_NAIL_PIXELS:
            return kind, image, mask


def _manifest(num_images: int, seed: int) -> dict:
    return {"generator": "nailseg_common.synthetic", "version": GENERATOR_VERSION,
            "seed": seed, "num_images": num_images}


def is_complete(root: str | Path, num_images: int, seed: int = 0) -> bool:
    """True when ``root`` holds a finished set of ``num_images`` images made with ``seed``."""
    try:
        found = json.loads((Path(root) / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return False
    return found == _manifest(num_images, seed)


def _generate(root: Path, num_images: int, seed: int, progress: bool) -> None:
    with staged_folder(root) as staging:
        for kind in TYPES:
            (staging / "Images" / str(kind)).mkdir(parents=True)
            (staging / "Masks" / str(kind)).mkdir(parents=True)
        for index in tqdm(range(num_images), desc="Generating synthetic nails", unit="img",
                          disable=not progress):
            kind, image, mask = synthetic_sample(seed, index)
            name = f"{kind}/{index:05d}.png"
            Image.fromarray(image).save(staging / "Images" / name, compress_level=1)
            Image.fromarray(mask * np.uint8(255)).save(staging / "Masks" / name, compress_level=1)
        (staging / MANIFEST_NAME).write_text(json.dumps(_manifest(num_images, seed), indent=2) + "\n")


def generate_synthetic_dataset(root: str | Path, num_images: int, seed: int = 0,
                               progress: bool = True) -> Path:
    """Write ``num_images`` synthetic photos and masks under ``root``, replacing what is there.

    The set is built in a temporary sibling folder and renamed into place, with a
    ``manifest.json`` (generator, version, seed, count) that marks it complete.
    """
    if num_images < 1:
        raise ValueError(f"num_images must be at least 1, got {num_images}")
    root = Path(root)
    with folder_lock(root):
        _generate(root, num_images, seed, progress)
    return root


def ensure_synthetic_dataset(root: str | Path, num_images: int, seed: int = 0,
                             progress: bool = True) -> Path:
    """Generate the set under ``root`` unless a complete one with this seed and count is there."""
    root = Path(root)
    if is_complete(root, num_images, seed):
        return root
    if num_images < 1:
        raise ValueError(f"num_images must be at least 1, got {num_images}")
    with folder_lock(root):
        if not is_complete(root, num_images, seed):  # another process may have just made it
            _generate(root, num_images, seed, progress)
    return root
