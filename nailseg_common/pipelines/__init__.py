"""Input pipelines: the augmentation policy and its Albumentations, Kornia and DALI pipelines."""
