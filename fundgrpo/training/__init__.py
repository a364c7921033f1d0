"""Models and their training: the base model, SFT, GRPO with its rewards, sweeps."""
