"""fund-grpo: domain logic shared by the pipeline stages.

Methodology (schema, rubric, rule scorer), prompts, rewards, metrics and the
model helpers live here once; `stages/` only wire params and files to them.
"""

__version__ = "0.1.0"
