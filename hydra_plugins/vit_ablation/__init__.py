"""vit-ablation's Hydra plugins: Hydra instantiates launchers only from here."""
