"""The analysts' methodology: compile it, place funds among their peers, write prompts and answers."""
