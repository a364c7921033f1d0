"""GRPO from an SFT model, answering all validation and test prompts greedily at every checkpoint.

Run in a checkout with a profile applied and `prepare` done (benchmarks/real_experts.md, "GRPO
step by step"):

    python benchmarks/grpo_greedy_curve.py models/sft /tmp/g1 max_steps=60 save_steps=10 eval_steps=10
    python benchmarks/grpo_greedy_curve.py /tmp/sft75 /tmp/g2 train_file=/tmp/sft75_rl.jsonl learning_rate=0.0001

key=value pairs override `grpo:` params; one row per checkpoint goes to OUT.jsonl. CPU minutes: not a test.
"""
import json, sys, dataclasses, time
from pathlib import Path
from transformers import TrainerCallback
from fundgrpo import io, modelling
from fundgrpo.backtesting import predictions_from_texts, metrics
from fundgrpo.methodology import load_compiled
from fundgrpo.params import load_params
import stages.train as T
p = load_params()
start, out = Path(sys.argv[1]), Path(sys.argv[2])
over = dict(a.split('=', 1) for a in sys.argv[3:])
train_file = over.pop('train_file', 'data/prepared/train.jsonl')
g = dataclasses.replace(p.grpo, **{k: type(getattr(p.grpo, k))(v) for k, v in over.items()})
rubric, schema = load_compiled(Path(p.methodology.out_dir))
train = io.read_jsonl(train_file); val = io.read_jsonl('data/prepared/validation.jsonl'); test = io.read_jsonl('data/prepared/test.jsonl')
log = open(out.with_suffix('.jsonl'), 'a')
class Greedy(TrainerCallback):
    def on_save(self, args, state, control, model=None, processing_class=None, **kw):
        model.eval(); row = {'step': state.global_step}
        for name, rows in (('val', val), ('test', test)):
            texts = modelling.generate(model, processing_class, [r['prompt'] for r in rows], 96, 64, desc=name)
            m = metrics(rows, predictions_from_texts(texts, rubric, schema), rubric['grades'])
            row.update({f'{name}_{k}': round(v, 3) for k, v in m.items() if k in ('valid_json', 'exact', 'within_one', 'qwk', 'spearman')})
        model.train(); print(row, flush=True); log.write(json.dumps(row) + '\n'); log.flush()
print(g)
s = T.run(g, p.model, start, train, rubric, schema, out, val, out / 'ckpt', callbacks=[Greedy()])
s.pop('curves'); print(json.dumps(s)[:3000])
