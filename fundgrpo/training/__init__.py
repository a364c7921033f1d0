"""Models and their training: the base model, SFT, GRPO with its rewards, and inference (a model's
answers, parsed and checked, with its grade probabilities)."""
