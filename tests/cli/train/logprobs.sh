#!/usr/bin/env bash
# cudaagent-train logprobs on the fixture models equals Hugging Face's numbers (logprobs.json)
# within 1e-4, and a bad record becomes an error record without ending the run.
source "$(dirname "$0")/../lib.sh"
bin=$1
fixtures=tests/fixtures/train
python3 - "$fixtures/logprobs.json" >"$scratch/in.jsonl" <<'PY'
import json, sys
for i, case in enumerate(json.load(open(sys.argv[1]))):
    if case["model"] == "qwen2-tiny-tied" and len(case["ids"]) in (7, 64, 542):
        print(json.dumps({"id": f"case{i}", "ids": case["ids"]}))
print(json.dumps({"id": "bad", "ids": [1, 99999]}))
PY
"$bin/cudaagent-train" logprobs --quiet --model "$fixtures/qwen2-tiny-tied" "$scratch/in.jsonl" >"$scratch/out.jsonl" ||
  fail "logprobs exited $?"
python3 - "$fixtures/logprobs.json" "$scratch/out.jsonl" <<'PY' || fail "log-probabilities differ from Hugging Face's"
import json, sys
expected = json.load(open(sys.argv[1]))
records = [json.loads(line) for line in open(sys.argv[2])]
assert len(records) == 4, len(records)
for record in records[:3]:
    case = expected[int(record["id"][4:])]
    got = record["logprobs"]
    worst = max(abs(a - b) for a, b in zip(got["token_logprobs"], case["token_logprobs"]))
    worst_entropy = max(abs(a - b) for a, b in zip(got["entropy"], case["entropy"][:-1]))
    assert len(got["token_logprobs"]) == len(case["ids"]) - 1
    assert worst < 1e-4 and worst_entropy < 1e-4, (worst, worst_entropy)
assert "vocabulary" in records[3]["error"]["reason"], records[3]
PY
echo ok
