"""Data: the synthetic set and your photos, reading images and masks, preparation and the split."""
