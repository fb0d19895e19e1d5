"""Train one ViT variant per Hydra job; sweep the switches with multirun.

    python run_sweep.py -m spt=true,false lsa=true,false experiment=smoke
    python run_sweep.py -m spt=true,false lsa=true,false     # keras.io experiment, CIFAR-100

The same command is installed as ``vit-ablation``; see :mod:`ablation.sweep.cli`.
"""
from ablation.sweep.cli import main

if __name__ == "__main__":
    main()
