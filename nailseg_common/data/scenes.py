"""Drawing one synthetic nail photo and its mask, the course's embedded default data.

Every image shows fingers (skin tones from the fairest to the deepest, lit by a
directional light, a phone's flash or a ring light, with pores, blotchy colour, redder
shadows and fingertips, knuckle creases and fine lines, at times a metal ring) whose nails
are bare, nude or polished. A nail is oval, square, almond, stiletto, coffin or bitten
short; it has a proximal cuticle and side grooves, a lunula and a whitish free edge when
nude, sometimes a French tip or a bare gap at the cuticle, and a highlight placed by the
light and shaped by the nail's curvature. Polish is glossy, matte or metallic, plain or
with nail art (glitter, dots, stripes, ombre). Backgrounds are textured (gradients,
blotches, stripes, wood, tiles, print) and cluttered with the same colours (polish-coloured
blobs and glossy beads, skin-coloured fingers seen from the palm side, without nail), often
out of focus. Fingers cast soft shadows. A phone camera follows: white balance and colour
casts, exposure, vignetting, brightness-dependent noise, defocus or motion blur, soft
chroma, sharpening and JPEG. A model therefore has to learn the shape and context of a
nail, not one colour threshold.

The mask is the visible nail plate: the cuticle and the skin folds around the nail are
not part of it, as in real annotations; whatever a finger or a ring drawn later covers is
removed.

Four styles (``style=``) share the drawing code and differ in what they draw from:

``"course"`` (the default, for training), in four sub-folders that differ the way the
real dataset's types might:

1. one finger (sometimes two), close up;
2. a whole hand, several fingers and a thumb;
3. small hands far away;
4. fingers on a busy background full of distractors.

``"wide"``, the pretraining set of the model the course ships: the course's four types,
widened toward the photos people take. Half of type 1 is one fingertip filling the frame
and half of type 2 four fingers side by side coming in from an edge, the palm out of the
picture; about a third of the backgrounds are plain (one colour of any hue, white to black,
without clutter), three in ten photos of types 1, 2 and 4 are small (longest side 144..320,
enlarged by the loader as a phone thumbnail would be), and half the nails are bare, more
often short.

``"photo"``, a stand-in for "your own photos": close-up phone snapshots of one hand
coming in from an edge of a mostly portrait 3:4 frame, under warm indoor light, on
plain surfaces (wood, bedding, stone, fabric) far out of focus, with other polish
(pastels, nudes, French tips), plain and glossy. All of it is type 1 (``Images/1/``,
``Masks/1/``), as a user's own photos would be. Fine-tuning a course model on it is a
domain-shift exercise.

``"salon"``, held out from training to measure transfer: nail-salon close-ups of one
hand on a terry towel in focus, under a cool ring light whose reflection is a bright
ring on each nail, in square and 4:5 frames, with neon polish and marble nail art.
The terry towel, the ring light, the neon palette and marble are drawn by no other
style, so no course model has seen them. It is type 1 as well.

Sample ``i`` depends only on ``(seed, i, style)``, so a set is byte-for-byte reproducible;
:mod:`nailseg_common.data.synthetic` writes sets of them to disk.
"""

from __future__ import annotations

import io
import math
from typing import NamedTuple

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

GENERATOR_VERSION = 5
"""Bumped when a seed draws other samples (5: drawn at a photo's long side, ``long_side``)."""
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
    (255, 232, 222), (255, 224, 196), (241, 194, 167), (233, 185, 150), (214, 176, 128),
    (224, 172, 140), (198, 134, 103), (176, 116, 84), (150, 96, 66), (120, 75, 52),
    (92, 58, 40), (68, 44, 32), (48, 32, 25),
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
PHOTO_POLISH = np.array([
    (232, 178, 168), (248, 204, 210), (196, 150, 200), (160, 198, 232), (170, 212, 182),
    (122, 22, 42), (244, 238, 232), (182, 110, 88), (62, 50, 62), (226, 150, 128),
], dtype=np.float32)
PHOTO_SURFACES = np.array([
    (150, 104, 68), (192, 150, 108), (236, 230, 220), (130, 130, 136), (224, 224, 228),
    (72, 92, 130), (180, 170, 150), (96, 70, 52),
], dtype=np.float32)
NEON_POLISH = np.array([
    (57, 255, 20), (255, 95, 31), (255, 20, 147), (0, 200, 255), (204, 255, 0),
    (160, 80, 255), (255, 240, 0), (255, 60, 90),
], dtype=np.float32)
TOWEL_COLOURS = np.array([
    (246, 244, 238), (236, 226, 208), (246, 206, 214), (196, 230, 214), (200, 204, 212),
    (180, 206, 236),
], dtype=np.float32)
METALS = np.array([(212, 175, 55), (200, 200, 205), (183, 110, 121)], dtype=np.float32)

PLAIN_SHAPES = (("oval", 0.4), ("square", 0.3), ("almond", 0.2), ("stiletto", 0.1))


class Look(NamedTuple):
    """What a style draws from: types, frame shapes, palettes, surfaces, light, camera, nails."""

    types: tuple[int, ...]
    aspects: tuple[float, ...]  # width / height
    polish: np.ndarray
    surfaces: np.ndarray  # background colours, with polish and skin mixed in by ``mixing``
    mixing: tuple[float, float, float]  # odds of a surface, polish or skin colour
    patterns: tuple[str, ...]  # background patterns, see ``_pattern``
    warmth: tuple[float, float]  # white balance: -1 cool daylight .. 1 warm tungsten
    cast: float  # spread of a colour cast per channel (fluorescent green, LED magenta)
    lights: tuple[tuple[str, float], ...]  # odds of "directional", "flash", "ring"
    shadows: tuple[float, float]  # how dark a cast shadow is
    french: float  # odds of a French tip on polished nails
    designs: tuple[tuple[str, float], ...]  # odds of each nail art, see ``_nail_art``
    finishes: tuple[tuple[str, float], ...]  # odds of "glossy", "matte", "metallic"
    shapes: tuple[tuple[str, float], ...]  # odds of each nail shape
    rings: float  # odds that a finger with a nail wears a ring
    defocus: float  # odds that the background is out of focus
    close_up: bool  # one hand or a finger or two, close up (else the scene of each type)
    nude: float = 0.3  # odds of bare nails (else polish)
    plain: float = 0.0  # odds of a plain background: one colour of any hue, no clutter
    low_res: float = 0.0  # odds of a small photo (longest side 144..320), seen enlarged
    framed: float = 0.0  # odds that type 1 (2) is one fingertip filling the frame (four fingers)


LOOKS = {
    "course": Look(
        TYPES, (3 / 4, 4 / 3, 3 / 4, 4 / 3, 9 / 16, 16 / 9, 1.0, 2 / 3, 3 / 2, 2.2),
        POLISH_COLOURS, NEUTRAL_COLOURS, (0.5, 0.3, 0.2),
        ("gradient", "blotches", "stripes", "wood", "tiles", "print"), (-0.7, 0.7), 0.1,
        (("directional", 0.8), ("flash", 0.2)), (0.15, 0.7), 0.08,
        (("plain", 0.55), ("glitter", 0.12), ("dots", 0.08), ("stripes", 0.1), ("ombre", 0.15)),
        (("glossy", 0.65), ("matte", 0.2), ("metallic", 0.15)),
        (*PLAIN_SHAPES[:2], ("almond", 0.15), ("stiletto", 0.05), ("coffin", 0.15),
         ("short", 0.15)),
        0.15, 0.5, False),
    "photo": Look(
        (1,), (3 / 4, 3 / 4, 3 / 4, 9 / 16, 4 / 3), PHOTO_POLISH, PHOTO_SURFACES, (0.9, 0.05, 0.05),
        ("gradient", "blotches", "stripes", "wood"), (0.5, 1.2), 0.04, (("directional", 1.0),),
        (0.15, 0.5), 0.3, (("plain", 1.0),), (("glossy", 1.0),), PLAIN_SHAPES, 0.0, 0.9, True),
    "salon": Look(
        (1,), (1.0, 4 / 5, 1.0, 9 / 16), NEON_POLISH, TOWEL_COLOURS, (1.0, 0.0, 0.0), ("terry",),
        (-0.9, -0.3), 0.04, (("ring", 1.0),), (0.1, 0.25), 0.0,
        (("plain", 0.35), ("marble", 0.65)), (("glossy", 1.0),),
        (("oval", 0.3), ("square", 0.2), ("almond", 0.25), ("coffin", 0.25)), 0.1, 0.15, True),
    "wide": Look(
        TYPES, (3 / 4, 4 / 3, 3 / 4, 4 / 3, 9 / 16, 16 / 9, 1.0, 2 / 3, 3 / 2),
        POLISH_COLOURS, NEUTRAL_COLOURS, (0.5, 0.3, 0.2),
        ("gradient", "blotches", "stripes", "wood", "tiles", "print"), (-0.8, 0.9), 0.12,
        (("directional", 0.8), ("flash", 0.2)), (0.15, 0.7), 0.08,
        (("plain", 0.6), ("glitter", 0.1), ("dots", 0.08), ("stripes", 0.1), ("ombre", 0.12)),
        (("glossy", 0.65), ("matte", 0.2), ("metallic", 0.15)),
        (("oval", 0.3), ("square", 0.2), ("short", 0.3), ("almond", 0.1), ("coffin", 0.05),
         ("stiletto", 0.05)),
        0.1, 0.5, False, nude=0.5, plain=0.35, low_res=0.3, framed=0.5),
}
STYLES = tuple(LOOKS)


class _Light(NamedTuple):
    """The scene's light and skin: kind, direction (radians), height, shadows, skin texture."""

    kind: str  # "directional", "flash" (from the camera, hard) or "ring" (a ring light)
    direction: float
    elevation: float  # 0 grazing .. pi/2 from the camera's side
    darkness: float
    texture: np.ndarray  # HxW, about zero-mean: pores and blotches shared by all skin


def _choose(rng: np.random.Generator, odds: tuple[tuple[str, float], ...]) -> str:
    """One name of ``odds`` (``(name, weight)`` pairs), drawn in proportion to its weight."""
    weights = np.array([weight for _, weight in odds])
    return odds[rng.choice(len(odds), p=weights / weights.sum())][0]


def _pick(rng: np.random.Generator, palette: np.ndarray, jitter: float = 12.0) -> np.ndarray:
    colour = palette[rng.integers(len(palette))] + rng.normal(0.0, jitter, 3)
    return np.clip(colour, 0, 255).astype(np.float32)


def _pick_skin(rng: np.random.Generator) -> np.ndarray:
    """A skin tone, varied in proportion to its brightness so dark skin keeps its hue."""
    tone = SKIN_TONES[rng.integers(len(SKIN_TONES))] * rng.normal(1.0, 0.03, 3) * rng.uniform(0.9, 1.1)
    return np.clip(tone, 0, 255).astype(np.float32)


def _scene_colour(rng: np.random.Generator, look: Look) -> np.ndarray:
    """A background colour: mostly a surface colour, at times a polish colour or a skin tone."""
    palette = (look.surfaces, look.polish, SKIN_TONES)[rng.choice(3, p=look.mixing)]
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


def _pattern(rng: np.random.Generator, h: int, w: int, kind: str) -> np.ndarray:
    """A background pattern in [0, 1]: ``"gradient"``, ``"blotches"``, ``"stripes"``,
    ``"wood"`` grain, ``"tiles"`` with grout, ``"print"`` (lines of text on paper) or
    ``"terry"`` (a towel's loops with soft folds)."""
    side = max(h, w)
    ys = (np.arange(h, dtype=np.float32) / side)[:, None]
    xs = (np.arange(w, dtype=np.float32) / side)[None, :]
    angle = rng.uniform(0, 2 * math.pi)
    along = xs * math.cos(angle) + ys * math.sin(angle)
    across = ys * math.cos(angle) - xs * math.sin(angle)
    if kind == "gradient":
        t = (along - along.min()) / max(float(along.max() - along.min()), 1e-6)
    elif kind == "blotches":
        t = _smooth_noise(rng, h, w, int(rng.integers(3, 10)))
    elif kind == "stripes":
        period = rng.uniform(0.015, 0.12)
        t = 0.5 + 0.5 * np.sin(along * (2 * math.pi / period) + 0.8 * _smooth_noise(rng, h, w, 4))
    elif kind == "wood":  # fine stripes bent by a smooth field, across the grain
        warp = 6.0 * _smooth_noise(rng, h, w, int(rng.integers(2, 5)))
        t = 0.5 + 0.5 * np.sin(across * rng.uniform(60, 160) + warp) ** 3
    elif kind == "tiles":  # a grid of tiles (or checks) in two shades, with grout lines
        cell = rng.uniform(0.06, 0.25)
        u, v = along / cell, across / cell
        checks = ((np.floor(u) + np.floor(v)) % 2) * rng.uniform(0.0, 1.0)
        grout = np.minimum(np.abs(u - np.round(u)), np.abs(v - np.round(v))) < 0.04
        t = np.where(grout, 1.0, checks)
    elif kind == "print":  # dark dashes of words in lines across light paper
        line = rng.uniform(0.02, 0.05)
        ink = np.abs((across / line) % 1.0 - 0.5) < 0.18
        words = _smooth_noise(rng, h, w, int(rng.uniform(1.0, 2.5) / line)) > 0.45
        t = 1.0 - 0.9 * (ink & words)
    elif kind == "terry":
        loops = _smooth_noise(rng, h, w, side // int(rng.integers(3, 6)))
        folds = _smooth_noise(rng, h, w, int(rng.integers(2, 5)))
        t = 0.35 * np.tanh((loops - 0.5) * 8.0) + 0.65 * folds + 0.2
    else:
        raise ValueError(f"unknown background pattern {kind!r}")
    return np.clip(t, 0, 1).astype(np.float32)


def _background(rng: np.random.Generator, h: int, w: int, clutter: int, look: Look) -> np.ndarray:
    """A textured background with ``clutter`` shapes on it, often out of focus, or at times
    (``look.plain``) a plain one."""
    if look.plain > 0 and rng.random() < look.plain:
        return _plain_background(rng, h, w)
    c1, c2 = _scene_colour(rng, look), _scene_colour(rng, look)
    if rng.random() < 0.5:  # one material in two shades
        c2 = c1 * np.float32(rng.uniform(0.6, 0.9))
    side = max(h, w)
    t = _pattern(rng, h, w, look.patterns[rng.integers(len(look.patterns))])[:, :, None]
    grain = _smooth_noise(rng, h, w, int(rng.integers(24, 80))) - np.float32(0.5)
    grain *= np.float32(rng.uniform(0.05, 0.35))
    grain += np.float32(1.0)
    base = (c2 - c1) * t
    base += c1
    base *= grain[:, :, None]
    np.clip(base, 0, 255, out=base)
    image = Image.fromarray(base.astype(np.uint8))
    draw = ImageDraw.Draw(image)
    for _ in range(clutter):
        fill = tuple(int(v) for v in _scene_colour(rng, look))
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
    if rng.random() < look.defocus:  # depth of field: the hand is in focus, the table is not
        image = image.filter(ImageFilter.GaussianBlur(side * rng.uniform(0.002, 0.012)))
    return np.asarray(image, dtype=np.float32)


def _plain_background(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """One colour of any hue, from white to black, lit unevenly, with a fine grain: a
    backdrop, a sheet of paper or a plain table."""
    hue, saturation = rng.uniform(0, 1), rng.uniform(0, 1) ** 1.5
    value = 1.0 if rng.random() < 0.2 else rng.uniform(0.15, 1.0)
    colour = np.asarray(Image.new("HSV", (1, 1), (int(hue * 255), int(saturation * 255),
                                                   int(value * 255))).convert("RGB"),
                        dtype=np.float32).reshape(3)
    shade = 1.0 + np.float32(rng.uniform(0.05, 0.3)) * (_smooth_noise(rng, h, w, 2) - 0.5)
    shade += np.float32(rng.uniform(0.0, 0.08)) * (_smooth_noise(rng, h, w, int(rng.integers(20, 60))) - 0.5)
    return np.clip(colour * shade[:, :, None], 0, 255).astype(np.float32)


def _skin_texture(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """Zero-mean relative brightness field: pores (pixel noise) and blotches (smooth)."""
    texture = rng.standard_normal((h, w), np.float32)
    texture *= np.float32(rng.uniform(0.015, 0.045))
    blotch = _smooth_noise(rng, h, w, int(rng.integers(12, 40))) - np.float32(0.5)
    blotch *= np.float32(rng.uniform(0.05, 0.14))
    texture += blotch
    return texture


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


def _light_across(light: _Light, angle: float) -> tuple[float, float]:
    """The light's component across a finger pointing at ``angle``, and towards the camera."""
    across = math.cos(light.direction - angle - math.pi / 2) * math.cos(light.elevation)
    return across, math.sin(light.elevation)


NAIL_SHAPES = {  # superellipse power at the tip, taper towards the tip, length (x radius)
    "oval": (2.0, 0.0, None), "square": (4.5, 0.0, None), "almond": (2.2, 0.55, "long"),
    "stiletto": (2.0, 0.8, "long"), "coffin": (4.5, 0.45, "long"), "short": (2.6, 0.0, "short"),
}


def _nail_style(rng: np.random.Generator, skin: np.ndarray, look: Look) -> dict:
    """Shape, colour, finish and nail art shared by the nails of one hand."""
    nude = rng.random() < look.nude
    if nude:
        colour = np.clip(skin * rng.uniform((1.0, 0.86, 0.86), (1.12, 0.98, 1.0)) + (14, 4, 8),
                         0, 255)
    else:
        colour = _pick(rng, look.polish, 14.0)
    shape = _choose(rng, look.shapes)
    power, taper, length = NAIL_SHAPES[shape]
    if length is None:
        length = "long" if rng.random() < 0.3 else "medium"
    finish = "glossy" if nude else _choose(rng, look.finishes)
    return {
        "nude": nude,
        "colour": colour.astype(np.float32),
        "second": _pick(rng, look.polish if rng.random() < 0.6 else NEUTRAL_COLOURS[:4], 14.0),
        "skin": skin,
        "power": power,
        "taper": taper,
        "length": {"long": rng.uniform(1.9, 2.7), "medium": rng.uniform(1.3, 1.8),
                   "short": rng.uniform(0.95, 1.25)}[length],
        "overhang": {"long": (0.95, 1.4), "medium": (0.35, 0.8), "short": (0.05, 0.3)}[length],
        "width": rng.uniform(0.68, 0.85),
        "cuticle": rng.uniform(0.05, 0.14),  # share of the plate's length under the fold
        "dryness": rng.uniform(0.05, 0.3),  # how white the cuticle is
        "gap": rng.uniform(0.04, 0.1) if not nude and rng.random() < 0.25 else 0.0,
        "french": not nude and rng.random() < look.french,
        "design": "plain" if nude else _choose(rng, look.designs),
        "finish": finish,
        "gloss": {"glossy": rng.uniform(0.1, 0.4) if nude else rng.uniform(0.35, 0.95),
                  "matte": rng.uniform(0.02, 0.08), "metallic": rng.uniform(0.8, 1.0)}[finish],
        "window": finish == "glossy" and rng.random() < 0.3,  # a sharp reflection of a window
        "rings": look.rings,
    }


def _nail_art(rng, style: dict, colour, t, x, y) -> None:
    """Paint ``style["design"]`` over ``colour`` in place; ``t`` runs from the cuticle (-1)
    to the tip (1), ``x`` and ``y`` along and across the nail in finger radii."""
    design, second = style["design"], style["second"]
    if design == "plain":
        return
    if design == "glitter":  # flakes of the second colour and white sparkles
        flakes = rng.random(t.shape, dtype=np.float32)
        share = np.float32(rng.uniform(0.1, 0.45))
        colour += (second - colour) * (flakes < share)[:, :, None]
        colour += (np.float32(255) - colour) * (0.8 * (flakes > 1 - share / 4))[:, :, None]
        return
    angle = rng.uniform(0, math.pi)
    a = x * np.float32(math.cos(angle)) + y * np.float32(math.sin(angle))
    if design == "dots":
        spacing = np.float32(rng.uniform(0.3, 0.55))
        gx, gy = x / spacing, y / spacing
        distance = np.hypot(gx - np.round(gx), gy - np.round(gy))
        paint = np.clip((rng.uniform(0.18, 0.32) - distance) / 0.06, 0, 1)
    elif design == "stripes":
        period = np.float32(rng.uniform(0.25, 0.6))
        paint = np.clip((np.sin(a * (2 * math.pi) / period) - rng.uniform(0.2, 0.7)) * 4, 0, 1)
    elif design == "ombre":
        paint = np.clip((t + 0.7) / 1.5, 0, 1)
    elif design == "marble":  # veins of the second colour in a milky base, bent by a smooth field
        colour += (np.float32(245) - colour) * np.float32(rng.uniform(0.3, 0.7))
        warp = _smooth_noise(rng, *t.shape, int(rng.integers(2, 5)))
        phase = a * np.float32(rng.uniform(2.0, 4.0)) + warp * np.float32(rng.uniform(4.0, 8.0))
        paint = np.exp(-(np.sin(phase) / np.float32(rng.uniform(0.12, 0.3))) ** 2)
    else:
        raise ValueError(f"unknown nail art {design!r}")
    colour += (second - colour) * paint[:, :, None]


def _plate_colour(rng, style: dict, t, nv, du, dv, centre_u: float, radius: float) -> np.ndarray:
    """Nail colour before gloss: curvature shading, lunula, free edge, nail art, details."""
    q = np.abs(nv)
    curve = np.sqrt(np.clip(1.0 - q * q, 0, 1))
    shade = {"glossy": 0.72 + 0.28 * curve, "matte": 0.8 + 0.2 * curve,
             "metallic": 0.4 + 0.8 * curve ** 3}[style["finish"]]
    colour = style["colour"] * np.ones_like(shade)[:, :, None]
    _nail_art(rng, style, colour, t, du / np.float32(radius), dv / np.float32(radius))
    colour *= shade[:, :, None]
    free_edge = np.clip((du + centre_u - 0.85 * radius) / (0.15 * radius), 0, 1)
    if style["nude"]:
        lunula = np.clip((-t - 0.45) / 0.25, 0, 1) * np.clip((0.8 - q) / 0.2, 0, 1)
        ridges = np.sin(q * 40.0) * 0.02  # fine lines along the plate
        colour *= (1.0 + ridges)[:, :, None]
        colour += (np.float32(250) - colour) * (0.3 * lunula + 0.7 * free_edge)[:, :, None]
    elif style["french"]:
        colour += (np.float32(248) - colour) * (0.92 * np.clip(free_edge * 3, 0, 1))[:, :, None]
    if style["gap"]:
        bare = np.clip((-t - (1.0 - 2 * style["gap"])) / 0.03, 0, 1)[:, :, None]
        colour += (style["skin"] * np.float32(1.05) + 20 - colour) * bare
    return colour


def _draw_nail(canvas, mask, rng, tip, angle, radius, style, light: _Light) -> None:
    """One nail on the fingertip at ``tip`` (centre of the tip's cap), pointing at ``angle``.

    The plate is a superellipse; its proximal end lies under a crescent of cuticle
    (skin, excluded from the mask) and the skin beside it is shaded like a groove.
    """
    h, w = canvas.shape[:2]
    half_len = style["length"] * radius * rng.uniform(0.45, 0.55)
    half_wid = style["width"] * radius * rng.uniform(0.95, 1.05)
    far_end = radius * rng.uniform(*style["overhang"])
    centre_u = far_end - half_len
    cx = tip[0] + centre_u * math.cos(angle)
    cy = tip[1] + centre_u * math.sin(angle)
    extent = max(half_len, half_wid) * 1.12 + 3
    box = _box(cx, cy, extent, extent, h, w)
    if box[0] >= box[1] or box[2] >= box[3]:
        return
    du, dv = _local(box, cx, cy, angle)
    t = du / np.float32(half_len)
    across = half_wid * (1.0 - style["taper"] * np.clip(t, 0, 1) ** 2) + 1e-3
    q = np.abs(dv) / across
    p = np.where(t > 0, np.float32(style["power"]), np.float32(2.0))
    f = (np.abs(t) ** p + q ** p) ** (1.0 / p)
    outline = np.clip(0.5 - (f - 1.0) * np.float32(half_wid), 0, 1)
    if not outline.any():
        return
    # the visible plate: the proximal part shortened by the cuticle
    tv = np.where(t < 0, t / np.float32(1.0 - style["cuticle"]), t)
    fv = (np.abs(tv) ** p + q ** p) ** (1.0 / p)
    plate = np.clip(0.5 - (fv - 1.0) * np.float32(half_wid), 0, 1)
    y0, y1, x0, x1 = box
    groove = np.exp(-((f - 1.0) * np.float32(half_wid / 1.5)) ** 2) * (t < 0.4)
    canvas[y0:y1, x0:x1] *= (1.0 - 0.22 * groove)[:, :, None]
    dry = np.clip(1.0 - (fv - 1.0) * np.float32(half_wid) / 3.0, 0, 1)  # whitish next to the plate
    dry *= outline * (1.0 - plate) * (t < 0) * np.float32(style["dryness"])
    region = canvas[y0:y1, x0:x1]
    region += (np.float32(255) - region) * dry[:, :, None]
    colour = _plate_colour(rng, style, t, dv / across, du, dv, centre_u, radius)
    colour += _gloss(rng, style, light, angle, dv / across, t)[:, :, None] * (np.float32(255) - colour)
    _composite(canvas, box, colour, plate)
    mask[y0:y1, x0:x1][fv <= 1.0] = 1


def _gloss(rng, style: dict, light: _Light, angle: float, nv, t) -> np.ndarray:
    """Specular highlight where the curved plate's normal meets the light's half-vector: a
    streak (or a window's sharp reflection), a hard spot under a flash, a ring under a ring
    light; matte polish keeps only a faint sheen."""
    across, _ = _light_across(light, angle)
    along = math.cos(light.direction - angle) * math.cos(light.elevation)
    hv = 0.55 * across + rng.uniform(-0.15, 0.15)
    hu = 0.5 * along
    bend = hv * (1.0 - 0.35 * t * t)  # the streak follows the plate's curvature
    strength = style["gloss"] * rng.uniform(0.7, 1.2)
    if light.kind == "ring":
        size = rng.uniform(0.3, 0.55)
        ring = np.sqrt((nv - bend) ** 2 + ((t - hu) / 1.6) ** 2)
        core = np.clip((rng.uniform(0.06, 0.1) - np.abs(ring - size)) / 0.03, 0, 1)
    elif light.kind == "flash":
        core = np.exp(-((nv - bend) / rng.uniform(0.08, 0.15)) ** 2 - ((t - hu) / 0.3) ** 2)
        strength *= 1.3
    elif style["window"]:
        width = rng.uniform(0.12, 0.22)
        core = np.clip((width - np.abs(nv - bend)) / 0.04, 0, 1)
        core *= np.clip((0.55 - np.abs(t - hu)) / 0.08, 0, 1)
    else:
        spread = 0.45 if style["finish"] == "matte" else rng.uniform(0.1, 0.22)
        core = np.exp(-((nv - bend) / spread) ** 2 - ((t - hu) / 0.55) ** 4)
    glow = 0.25 * np.exp(-((nv - bend) / 0.45) ** 2 - ((t - hu) / 0.8) ** 2)
    return np.clip(strength * (core + glow), 0, 1)


def _shadow(canvas, box, alpha, radius, light: _Light) -> None:
    """Darken the canvas under ``alpha`` moved away from the light, longer for a low light."""
    h, w = canvas.shape[:2]
    reach = radius * (0.15 + 0.5 * math.cos(light.elevation))
    dy = round(-math.sin(light.direction) * reach)
    dx = round(-math.cos(light.direction) * reach)
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


def _skin_colour(skin, u, v, r, a: float, b: float, length: float, light: _Light,
                 angle: float, texture: np.ndarray) -> np.ndarray:
    """Lit skin: Lambert shading with redder shadows, a redder tip, creases, fine lines, pores."""
    nv = np.clip(v / r, -1, 1)
    lx, lz = _light_across(light, angle)
    lit = np.clip(nv * np.float32(lx) + np.sqrt(1.0 - nv * nv) * np.float32(lz), 0, 1)
    shade = 0.42 + 0.58 * lit
    for crease in (1.6, 3.6):
        if length > crease * r and a - r < crease * r < b + r:
            d = u + np.float32(crease) * r
            near = np.exp(-(d / (0.35 * r)) ** 2)
            shade *= 1.0 - 0.14 * np.exp(-(d / (0.06 * r)) ** 2) - 0.05 * near * np.sin(d / (0.03 * r)) ** 2
    tint = np.float32([0.25, 0.0, -0.1]) * (1.0 - shade)[:, :, None]  # light scattered red
    tint += np.float32([0.03, -0.06, -0.05]) * np.exp(-((u + 0.4 * r) / (1.3 * r)) ** 2)[:, :, None]
    tint += np.float32(1.0)  # (the second term: blood under the fingertip)
    shade *= 1.0 + texture
    colour = skin * shade[:, :, None]
    colour *= tint
    sheen = np.exp(-((nv - 0.6 * lx) / 0.3) ** 2) * np.float32(0.08)
    colour += (np.float32(255) - colour) * sheen[:, :, None]
    return colour


def _draw_finger(canvas, mask, rng, tip, angle, radius, length, skin, light: _Light,
                 nail: dict | None) -> None:
    """A finger from ``length`` behind up to ``tip``; ``nail`` (a style) draws its nail too.

    The finger casts a soft shadow and hides whatever it covers, including nails drawn
    before it, so the mask is cleared under it (``mask`` may be None for distractors).
    Long fingers are drawn in pieces along their axis (each pixel belongs to exactly
    one piece), so a diagonal finger does not cost its whole bounding box.
    """
    h, w = canvas.shape[:2]
    c, s = math.cos(angle), math.sin(angle)
    soft = radius * 0.3 + 1.0
    near, far = _visible_span(tip, angle, length, radius + soft + 2, h, w)
    if near > far:
        return
    count = max(1, math.ceil((far - near) / max(3.0 * radius, 32.0)))
    edges = [near + (far - near) * i / count for i in range(count + 1)]
    r = np.float32(radius)
    pieces = []
    for i in range(count):
        a, b = edges[i], edges[i + 1]  # this piece: u in [-b, -a)
        reach = radius + soft
        box = _box(tip[0] - (a + b) / 2 * c, tip[1] - (a + b) / 2 * s,
                   abs(b - a) / 2 * abs(c) + reach, abs(b - a) / 2 * abs(s) + reach, h, w)
        if box[0] >= box[1] or box[2] >= box[3]:
            continue
        u, v = _local(box, tip[0], tip[1], angle)
        along = u - np.clip(u, -length, 0)
        edge = np.sqrt(along * along + v * v) - r
        alpha = np.clip(0.5 - edge, 0, 1)
        shadow = np.clip(0.5 - edge / np.float32(2 * soft), 0, 1)
        inside = np.ones_like(u, dtype=bool)
        if i > 0:
            inside &= u < np.float32(-a)
        if i < count - 1:
            inside &= u >= np.float32(-b)
        alpha *= inside
        shadow *= inside
        if shadow.any():
            pieces.append((box, u, v, alpha, shadow, a, b))
    for box, _, _, _, shadow, _, _ in pieces:
        _shadow(canvas, box, shadow, radius, light)
    for box, u, v, alpha, _, a, b in pieces:
        rows, cols = np.flatnonzero(alpha.any(axis=1)), np.flatnonzero(alpha.any(axis=0))
        if not len(rows):
            continue
        inner = np.s_[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1]  # skip the shadow's margin
        box = (box[0] + rows[0], box[0] + rows[-1] + 1, box[2] + cols[0], box[2] + cols[-1] + 1)
        u, v, alpha = u[inner], v[inner], alpha[inner]
        y0, y1, x0, x1 = box
        colour = _skin_colour(skin, u, v, r, a, b, length, light, angle,
                              light.texture[y0:y1, x0:x1])
        _composite(canvas, box, colour, alpha)
        if mask is not None:
            mask[y0:y1, x0:x1][alpha >= 0.5] = 0
    if mask is not None and nail is not None:
        if length > 3.4 * radius and rng.random() < nail["rings"]:
            _draw_ring(canvas, mask, rng, tip, angle, radius, light)
        _draw_nail(canvas, mask, rng, tip, angle, radius, nail, light)


def _draw_ring(canvas, mask, rng, tip, angle, radius, light: _Light) -> None:
    """A metal band around the finger between its knuckle creases; it hides what it covers."""
    h, w = canvas.shape[:2]
    back, half, reach = radius * rng.uniform(2.3, 3.1), radius * rng.uniform(0.1, 0.25), radius * 1.12
    cx, cy = tip[0] - back * math.cos(angle), tip[1] - back * math.sin(angle)
    box = _box(cx, cy, reach * 1.2 + 2, reach * 1.2 + 2, h, w)
    if box[0] >= box[1] or box[2] >= box[3]:
        return
    u, v = _local(box, cx, cy, angle)
    alpha = np.clip(0.5 - (np.abs(u) - np.float32(half)), 0, 1)
    alpha *= np.clip(0.5 - (np.abs(v) - np.float32(reach)), 0, 1)
    nv = np.clip(v / np.float32(reach), -1, 1)
    across, _ = _light_across(light, angle)
    shine = 0.35 + 0.65 * np.sqrt(1.0 - nv * nv) + 0.8 * np.exp(-((nv - 0.6 * across) / 0.15) ** 2)
    colour = np.clip(_pick(rng, METALS, 10.0) * shine[:, :, None], 0, 255)
    _composite(canvas, box, colour, alpha)
    y0, y1, x0, x1 = box
    mask[y0:y1, x0:x1][alpha >= 0.5] = 0


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


def _draw_bead(canvas, rng, radius, look: Look, light: _Light) -> None:
    """A glossy polish-coloured oval on the background: nail-like colour, no finger."""
    h, w = canvas.shape[:2]
    style = _nail_style(rng, _pick(rng, SKIN_TONES), look)
    style.update(nude=False, french=False, gap=0.0, cuticle=0.0, dryness=0.0, colour=_pick(rng, look.polish, 14.0))
    scratch = np.zeros((h, w), np.uint8)
    tip = (rng.uniform(0, w), rng.uniform(0, h))
    _draw_nail(canvas, scratch, rng, tip, rng.uniform(0, 2 * math.pi), radius, style, light)


def _image_size(rng: np.random.Generator, kind: int, look: Look,
                long_side: int) -> tuple[int, int]:
    """``(height, width)``: a phone-like aspect ratio (jittered) at ``long_side``, as a phone
    takes every photo at one resolution; a small photo (``look.low_res``) at 144..320 of
    every :data:`MAX_SIDE` pixels of it."""
    small = look.low_res > 0 and kind != 3 and rng.random() < look.low_res
    longest = int(rng.integers(144, 321) if small else
                  rng.integers(400 if kind == 3 else 320, MAX_SIDE + 1))
    aspect = look.aspects[rng.integers(len(look.aspects))] * math.exp(rng.normal(0.0, 0.04))
    short = int(max(MIN_SIDE // 2 if small else MIN_SIDE, round(longest / max(aspect, 1 / aspect))))
    short = min(short, longest)
    scale = long_side / (MAX_SIDE if small else longest)
    longest, short = max(1, round(longest * scale)), max(1, round(short * scale))
    return (short, longest) if aspect >= 1 else (longest, short)


def _camera(rng: np.random.Generator, canvas: np.ndarray, kind: int, look: Look,
            flash: bool) -> np.ndarray:
    """Light falloff (steep under a ``flash``), white balance and colour cast, exposure, tone
    curve and brightness-dependent noise."""
    h, w = canvas.shape[:2]
    side = max(h, w)
    angle = rng.uniform(0, 2 * math.pi)
    ys = (np.arange(h, dtype=np.float32)[:, None] - h / 2) / side
    xs = (np.arange(w, dtype=np.float32)[None, :] - w / 2) / side
    light = 1.0 + np.float32(rng.uniform(0.0, 0.6)) * (xs * np.float32(math.cos(angle))
                                                         + ys * np.float32(math.sin(angle)))
    light -= np.float32(rng.uniform(0.9, 1.8) if flash else rng.uniform(0.0, 0.9)) * (xs * xs + ys * ys)
    warmth = rng.uniform(*look.warmth)
    balance = np.float32([1 + 0.14 * warmth, 1.0, 1 - 0.2 * warmth])
    balance *= rng.uniform(1 - look.cast, 1 + look.cast, 3).astype(np.float32)
    balance *= np.float32(rng.uniform(0.7, 1.2))  # exposure
    canvas *= light[:, :, None]
    canvas *= balance
    np.clip(canvas, 0, 255, out=canvas)
    level = rng.uniform(0.06, 0.5 if kind == 3 else 0.32)  # shot noise ~ sqrt(brightness)
    noise = np.sqrt(canvas[:, :, 1:2] + 2.5)
    noise *= rng.standard_normal((h, w, 1), np.float32)
    noise *= np.float32(level)
    canvas += noise
    np.clip(canvas, 0, 255, out=canvas)
    curve = 255 * (np.arange(256) / 255) ** rng.uniform(0.8, 1.15)  # tone curve
    return curve.astype(np.uint8)[canvas.astype(np.uint8)]


def _motion_blur(rng: np.random.Generator, pixels: np.ndarray) -> np.ndarray:
    """Average of copies shifted along a random direction: a shaky hand."""
    angle = rng.uniform(0, math.pi)
    length = rng.uniform(2.0, 6.0)
    steps = 5
    total = np.zeros(pixels.shape, np.float32)
    for k in range(steps):
        d = (k / (steps - 1) - 0.5) * length
        total += np.roll(pixels, (round(d * math.sin(angle)), round(d * math.cos(angle))), (0, 1))
    return (total / steps).astype(np.uint8)


def _lens_and_jpeg(rng: np.random.Generator, pixels: np.ndarray, kind: int) -> np.ndarray:
    """Defocus or motion blur, soft chroma, phone sharpening and (usually) JPEG."""
    image = Image.fromarray(pixels)
    roll = rng.random()
    if roll < 0.08:
        image = Image.fromarray(_motion_blur(rng, pixels))
    elif roll < 0.6:
        image = image.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 1.4 if kind == 3 else 1.1)))
    if rng.random() < 0.6:  # chroma carries less detail than brightness
        y, cb, cr = image.convert("YCbCr").split()
        soft = ImageFilter.BoxBlur(rng.uniform(0.7, 2.0))
        image = Image.merge("YCbCr", (y, cb.filter(soft), cr.filter(soft))).convert("RGB")
    if rng.random() < 0.4:
        image = image.filter(ImageFilter.UnsharpMask(rng.uniform(1.0, 2.5), int(rng.integers(40, 120)), 2))
    if rng.random() < 0.85:
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=int(rng.integers(40, 96)))
        image = Image.open(buffer).convert("RGB")
    return np.asarray(image)


def _course_scene(rng, canvas, mask, kind: int, skin, light, style) -> None:
    """The hands of a course image of type ``kind``, placed anywhere, often off-centre."""
    h, w = canvas.shape[:2]
    shortest, big = min(h, w), float(math.hypot(h, w))
    if kind == 1:
        for _ in range(1 if rng.random() < 0.7 else 2):
            tip = (w * rng.uniform(0.15, 0.85), h * rng.uniform(0.15, 0.85))
            _draw_finger(canvas, mask, rng, tip, rng.uniform(0, 2 * math.pi),
                         shortest * rng.uniform(0.12, 0.24), big, skin, light, style)
    elif kind == 2:
        tip = (w * rng.uniform(0.15, 0.85), h * rng.uniform(0.1, 0.9))
        _draw_hand(canvas, mask, rng, tip, rng.uniform(0, 2 * math.pi),
                   shortest * rng.uniform(0.05, 0.08), skin, light, style)
    elif kind == 3:
        for _ in range(int(rng.integers(1, 3))):
            tip = (w * rng.uniform(0.15, 0.85), h * rng.uniform(0.15, 0.85))
            _draw_hand(canvas, mask, rng, tip, rng.uniform(0, 2 * math.pi),
                       shortest * rng.uniform(0.028, 0.04), skin, light, style)
    else:
        for _ in range(int(rng.integers(1, 4))):
            tip = (w * rng.uniform(0.1, 0.9), h * rng.uniform(0.1, 0.9))
            _draw_finger(canvas, mask, rng, tip, rng.uniform(0, 2 * math.pi),
                         shortest * rng.uniform(0.07, 0.11), big, skin, light, style)


def _close_up_scene(rng, canvas, mask, skin, light, style) -> None:
    """One big hand coming in from an edge (mostly the bottom), or one or two fingers."""
    h, w = canvas.shape[:2]
    shortest, big = min(h, w), float(math.hypot(h, w))
    towards = -math.pi / 2 + rng.normal(0.0, 0.45) + (math.pi / 2 if rng.random() < 0.15 else 0.0)
    if rng.random() < 0.7:
        tip = (w * rng.uniform(0.3, 0.7), h * rng.uniform(0.12, 0.4))
        _draw_hand(canvas, mask, rng, tip, towards, shortest * rng.uniform(0.08, 0.13), skin,
                   light, style)
    else:
        for _ in range(1 if rng.random() < 0.6 else 2):
            tip = (w * rng.uniform(0.25, 0.75), h * rng.uniform(0.2, 0.5))
            _draw_finger(canvas, mask, rng, tip, towards + rng.normal(0.0, 0.25),
                         shortest * rng.uniform(0.14, 0.22), big, skin, light, style)


def _framed_scene(rng, canvas, mask, kind: int, skin, light, style) -> None:
    """Type 1: one fingertip filling the frame; type 2: four fingers side by side coming in
    from an edge (mostly the bottom), tips near the middle, the palm out of the picture."""
    h, w = canvas.shape[:2]
    shortest, big = min(h, w), float(math.hypot(h, w))
    towards = -math.pi / 2 + rng.normal(0.0, 0.3) if rng.random() < 0.7 else rng.uniform(0, 2 * math.pi)
    c, s = math.cos(towards), math.sin(towards)
    if kind == 1:
        radius = shortest * rng.uniform(0.25, 0.5)
        reach = radius * rng.uniform(0.0, 1.2)
        tip = (w / 2 + reach * c + shortest * rng.normal(0.0, 0.08),
               h / 2 + reach * s + shortest * rng.normal(0.0, 0.08))
        _draw_finger(canvas, mask, rng, tip, towards, radius, big, skin, light, style)
        return
    radius = shortest * rng.uniform(0.06, 0.13)
    gap = radius * rng.uniform(2.05, 2.5)
    side = 1.0 if rng.random() < 0.5 else -1.0  # which end the little finger is at
    centre = (w * rng.uniform(0.35, 0.65), h * rng.uniform(0.35, 0.65))
    for k, (back, width) in enumerate(((0.6, 1.0), (0.0, 1.05), (0.4, 1.0), (2.2, 0.85))):
        offset = side * (k - 1.5) * gap
        setback = radius * back * rng.uniform(0.7, 1.3)
        tip = (centre[0] - offset * s - setback * c, centre[1] + offset * c - setback * s)
        _draw_finger(canvas, mask, rng, tip, towards + rng.normal(0.0, 0.05), radius * width,
                     big, skin, light, style)


def _attempt(rng: np.random.Generator, kind: int, look: Look, long_side: int):
    h, w = _image_size(rng, kind, look, long_side)
    close_up = look.close_up
    shortest, big = min(h, w), float(math.hypot(h, w))
    clutter = (int(rng.integers(0, 3)) if close_up else
               int(rng.integers(*{1: (0, 4), 2: (1, 8), 3: (3, 12), 4: (8, 20)}[kind])))
    canvas = _background(rng, h, w, clutter, look)
    mask = np.zeros((h, w), np.uint8)
    source = _choose(rng, look.lights)
    light = _Light(source, rng.uniform(0, 2 * math.pi),
                   rng.uniform(0.5, 1.3) if source == "directional" else rng.uniform(1.3, 1.55),
                   rng.uniform(*look.shadows), _skin_texture(rng, h, w))
    busy = kind == 4 and not close_up
    distractors = int(rng.integers(2, 5)) if busy else int(rng.random() < 0.25)
    for _ in range(distractors):  # fingers seen from the palm side: skin, no nail
        r = shortest * rng.uniform(0.04, 0.12)
        tip = (rng.uniform(0, w), rng.uniform(0, h))
        _draw_finger(canvas, None, rng, tip, rng.uniform(0, 2 * math.pi), r, big,
                     _pick_skin(rng), light, None)
    beads = int(rng.integers(1, 4)) if busy else int(rng.random() < 0.2)
    for _ in range(beads):
        _draw_bead(canvas, rng, shortest * rng.uniform(0.02, 0.08), look, light)
    skin = _pick_skin(rng)
    style = _nail_style(rng, skin, look)
    if close_up:
        _close_up_scene(rng, canvas, mask, skin, light, style)
    elif look.framed > 0 and kind in (1, 2) and rng.random() < look.framed:
        _framed_scene(rng, canvas, mask, kind, skin, light, style)
    else:
        _course_scene(rng, canvas, mask, kind, skin, light, style)
    pixels = _camera(rng, canvas, kind, look, flash=source == "flash")
    return _lens_and_jpeg(rng, pixels, kind), mask


def synthetic_sample(seed: int, index: int, style: str = "course",
                     long_side: int = MAX_SIDE) -> tuple[int, np.ndarray, np.ndarray]:
    """Sample ``index`` of the set made with ``seed``: ``(type, image HxWx3, mask HxW in {0,1})``,
    its longest side ``long_side`` pixels (a small photo of ``style`` less)."""
    look = look_of(style)
    kind = look.types[index % len(look.types)]
    rng = np.random.default_rng([seed, index] if style == "course" else [seed, index, STYLES.index(style)])
    while True:  # redraw the rare scene whose nails all fell outside the picture
        image, mask = _attempt(rng, kind, look, long_side)
        if int(mask.sum()) >= MIN_NAIL_PIXELS:
            return kind, image, mask


def look_of(style: str) -> Look:
    """The look of ``style`` (one of :data:`STYLES`); ValueError for another."""
    if style not in LOOKS:
        raise ValueError(f"style must be one of {STYLES}, got {style!r}")
    return LOOKS[style]


