"""Training the model: SFT, GRPO with its rewards, and the checkpoints between them (the model at
run time is `fundgrpo.model`)."""
