"""Training: the U-Net, its Lightning trainer and logs, the fast recipe, fine-tuning, two GPUs."""
