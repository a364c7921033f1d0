"""A bare TRL GRPO script, as a user would write it by hand: the yardstick for the `train`
stage's overhead (benchmarks/grpo_overhead.py). Same model, data, rewards and GRPO settings
as `python -m stages.grpo` in the same folder; no params loader, checkpoint management,
curves, plots or metrics files.

    python benchmarks/bare_grpo.py OUT_DIR      # in a repo folder after `dvc repro sft`
"""

import sys
from pathlib import Path

from datasets import Dataset
from peft import LoraConfig
from transformers import AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from fundgrpo import io
from fundgrpo.methodology.compiler import load_compiled
from fundgrpo.params import load_params
from fundgrpo.training.rewards import make_rewards

out = Path(sys.argv[1])
g = load_params("params.yaml").grpo  # the typed values the stage reads, defaults included
rubric, schema = load_compiled(Path("data/schema"))
rewards = make_rewards(rubric, schema, g.score_tolerance, tuple(g.reasoning_chars), g.grade_step_penalty)
names = ["json", "grade", "score", "evidence", "length"]
rows = io.read_jsonl("data/prepared/train.jsonl")
dataset = Dataset.from_list([{k: r[k] for k in ("prompt", "expert_grade", "expert_score", "evidence")} for r in rows])
tokenizer = AutoTokenizer.from_pretrained("models/sft", padding_side="left")
config = GRPOConfig(
    output_dir=str(out / "checkpoints"),
    max_steps=g.max_steps,
    learning_rate=g.learning_rate,
    warmup_steps=g.warmup_steps,
    lr_scheduler_type=g.lr_scheduler_type,
    gradient_accumulation_steps=g.gradient_accumulation_steps,
    per_device_train_batch_size=g.per_device_train_batch_size,
    num_generations=g.num_generations,
    max_completion_length=g.max_completion_length,
    temperature=g.temperature,
    beta=g.beta,
    loss_type=g.loss_type,
    epsilon=g.epsilon,
    epsilon_high=g.epsilon_high,
    scale_rewards=g.scale_rewards,
    reward_weights=[getattr(g.reward_weights, n) for n in names],
    logging_steps=g.logging_steps,
    save_strategy="no",
    report_to="none",
    seed=g.seed,
    bf16=False,
    use_cpu=True,
    gradient_checkpointing=False,
    model_init_kwargs={"dtype": "float32"},
)
lora = g.lora
peft = (
    LoraConfig(
        r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules="all-linear", task_type="CAUSAL_LM"
    )
    if lora.enabled
    else None
)
trainer = GRPOTrainer(
    model="models/sft",
    reward_funcs=[rewards[n] for n in names],
    args=config,
    train_dataset=dataset,
    processing_class=tokenizer,
    peft_config=peft,
)
trainer.train()
model = trainer.model.merge_and_unload() if peft else trainer.model
model.save_pretrained(out)
tokenizer.save_pretrained(out)
