"""The course's augmentation policy, written down once.

Notebook 02 builds it with Albumentations on the CPU, 03 with Kornia on the GPU and
04 with DALI; each builder reads its numbers from :data:`POLICY`, so the three stay
the same policy. Geometric ops move image and mask together; photometric ops touch
the image only. Pixel values are in [0, 1] where a range says so.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PolicyOp:
    """One row of the policy table."""

    op: str
    probability: float
    params: dict
    geometric: bool


POLICY: dict[str, PolicyOp] = {
    op.op: op
    for op in (
        PolicyOp("horizontal_flip", 0.5, {}, geometric=True),
        PolicyOp("vertical_flip", 0.5, {}, geometric=True),
        PolicyOp("affine", 0.5, {"scale": (0.85, 1.15), "translate": 0.0625, "rotate_deg": 20.0},
                 geometric=True),
        PolicyOp("brightness_contrast", 0.5, {"brightness": 0.2, "contrast": 0.2}, geometric=False),
        PolicyOp("gaussian_noise", 0.3, {"std": (0.01, 0.05)}, geometric=False),
        PolicyOp("gaussian_blur", 0.2, {"kernel": 5, "sigma": (0.1, 1.5)}, geometric=False),
    )
}


def policy_table():
    """The policy as a pandas DataFrame (op, probability, parameters, what it moves)."""
    import pandas as pd

    return pd.DataFrame(
        [{"op": p.op, "probability": p.probability,
          "parameters": ", ".join(f"{k}={v}" for k, v in p.params.items()) or "-",
          "applies to": "image + mask" if p.geometric else "image only"}
         for p in POLICY.values()]
    )
