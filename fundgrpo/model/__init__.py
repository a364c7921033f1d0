"""The model at run time, below training: loading a base, trained or pretrained model
(`modelling`, `pretrained`), generating and reading its answers and grade probabilities
(`inference`, `belief`). Serving and the registry use it without importing training."""
