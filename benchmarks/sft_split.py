"""SFT on a fund-grouped share of the training funds; the other funds are written out as GRPO prompts.

    python benchmarks/sft_split.py /tmp/sft75 0.75 10    # OUT SHARE EPOCHS; writes /tmp/sft75_rl.jsonl
"""
import sys, dataclasses, hashlib, json
from pathlib import Path
from fundgrpo import io
from fundgrpo.params import load_params
import stages.sft as S
p = load_params()
out, share, epochs = Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
train = io.read_jsonl('data/prepared/train.jsonl')
def part(fid): return int(hashlib.sha256(('rl' + fid).encode()).hexdigest(), 16) % 1000 / 1000 < share
sft_rows = [r for r in train if part(r['fund_id'])]; rl_rows = [r for r in train if not part(r['fund_id'])]
open(str(out) + '_rl.jsonl', 'w').write(''.join(json.dumps(r, ensure_ascii=False) + '\n' for r in rl_rows))
print('sft rows', len(sft_rows), 'rl rows', len(rl_rows), flush=True)
print(S.run(dataclasses.replace(p.sft, epochs=epochs), p.model, Path(p.model.out_dir), sft_rows, out))
