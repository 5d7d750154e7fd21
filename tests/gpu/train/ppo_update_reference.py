#!/usr/bin/env python3
"""The PPO update of `cudaagent-train ppo`, written in plain PyTorch + transformers, for
tests/gpu/train/ppo_bench.sh: the same trajectories, the same layout (prompts left-padded,
responses right-padded, position ids from the attention mask), the same arithmetic (old
log-probs recomputed, critic values, outcome reward on the last trainable token, GAE with
gamma = lambda = 1 skipping observation tokens, whitening, dual-clip PPO, clipped value loss,
token-mean over each minibatch, AdamW, gradient clipping at 1), timed the same way.

  ppo_update_reference.py make-model --shape qwen2-0.5b --out DIR   random weights, saved
  ppo_update_reference.py train --model DIR --data FILE ...          one JSON line per iteration

The actor is AutoModelForCausalLM and the critic AutoModelForTokenClassification with one label
(veRL's critic), both from DIR. --precision bf16 keeps fp32 weights and runs forward and backward
under bfloat16 autocast; fp32 runs everything in float32.
"""
import argparse
import contextlib
import json
import sys
import time

import torch

SHAPES = {
    # Qwen2-0.5B's shape (its config.json), random weights.
    "qwen2-0.5b": dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                       num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                       rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True),
    # For CPU smoke runs.
    "tiny": dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                 tie_word_embeddings=False),
}


def make_model(args):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(args.seed)
    config = Qwen2Config(**SHAPES[args.shape])
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(args.out, safe_serialization=True)
    print(json.dumps({"model": args.out, "parameters": sum(p.numel() for p in model.parameters())}))


def make_data(args):
    """Random trajectories in cudaagent-test-trajectories' `random` layout (turns of equal length,
    the last fifth of every turn but the last an observation), for machines without the tests."""
    generator = torch.Generator().manual_seed(args.seed)
    turn_length = args.response // max(args.turns, 1)
    for r in range(args.rows):
        prompt = torch.randint(0, args.vocab, (args.prompt,), generator=generator).tolist()
        response = torch.randint(0, args.vocab, (args.response,), generator=generator).tolist()
        logprobs = (torch.rand(args.response, generator=generator) * -3.0 - 1e-3).tolist()
        mask = [1] * args.response
        for turn in range(args.turns - 1):
            for j in range(turn_length * turn + turn_length * 4 // 5, turn_length * (turn + 1)):
                mask[j], logprobs[j] = 0, 0.0
        reward = [-1.0, 1.0, 2.0, 3.0][int(torch.randint(0, 4, (1,), generator=generator))]
        print(json.dumps({"id": f"r{r}", "trajectory": {
            "prompt_ids": prompt, "response_ids": response, "loss_mask": mask, "logprobs": logprobs,
            "finish_reason": "stop"}, "reward": {"value": reward}}))


def read_trajectories(path):
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            t = record.get("trajectory")
            if t is None:
                continue
            yield {"prompt": t["prompt_ids"], "response": t["response_ids"], "mask": t["loss_mask"],
                   "reward": float(record["reward"]["value"])}


def collate(items, device):
    p = max(len(i["prompt"]) for i in items)
    r = max(len(i["response"]) for i in items)
    b = len(items)
    ids = torch.zeros(b, p + r, dtype=torch.long)
    attention = torch.zeros(b, p + r, dtype=torch.long)
    mask = torch.zeros(b, r)
    for row, item in enumerate(items):
        n = len(item["prompt"])
        ids[row, p - n:p] = torch.tensor(item["prompt"])
        attention[row, p - n:p] = 1
        m = len(item["response"])
        ids[row, p:p + m] = torch.tensor(item["response"])
        attention[row, p:p + m] = 1
        mask[row, :m] = torch.tensor(item["mask"], dtype=torch.float)
    positions = (attention.cumsum(1) - 1).clamp(min=0)
    scores = torch.tensor([i["reward"] for i in items])
    return {"ids": ids.to(device), "attention": attention.to(device), "positions": positions.to(device),
            "mask": mask.to(device), "scores": scores.to(device), "start": p}


def select(batch, rows):
    index = torch.tensor(rows, device=batch["ids"].device)
    out = {k: (v.index_select(0, index) if torch.is_tensor(v) else v) for k, v in batch.items()}
    return out


def forward_logits(model, part, autocast):
    context = torch.autocast("cuda", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
    with context:
        out = model(input_ids=part["ids"], attention_mask=part["attention"], position_ids=part["positions"])
    p = part["start"]
    r = part["ids"].shape[1] - p
    return out.logits[:, p - 1:p - 1 + r].float()


def score(actor, part, autocast, with_entropy):
    logits = forward_logits(actor, part, autocast)
    p = part["start"]
    targets = part["ids"][:, p:]
    log_probs = torch.log_softmax(logits, -1)
    chosen = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    entropy = None
    if with_entropy:
        entropy = torch.logsumexp(logits, -1) - (torch.softmax(logits, -1) * logits).sum(-1)
    return chosen, entropy


def values(critic, part, autocast):
    return forward_logits(critic, part, autocast)[..., 0]


def masked_mean(x, m):
    return (x * m).sum() / m.sum()


def gae(rewards, vals, mask, gamma=1.0, lam=1.0):
    rewards, vals, mask = rewards.float().cpu(), vals.float().cpu(), mask.float().cpu()
    advantages = torch.zeros_like(rewards)
    for b in range(rewards.shape[0]):
        next_value, last = 0.0, 0.0
        for t in range(rewards.shape[1] - 1, -1, -1):
            delta = rewards[b, t] + gamma * next_value - vals[b, t]
            adv = delta + gamma * lam * last
            if mask[b, t] != 0:
                next_value, last = vals[b, t], adv
            advantages[b, t] = last
    returns = advantages + vals
    mean = masked_mean(advantages, mask)
    var = masked_mean((advantages - mean) ** 2, mask) * mask.sum() / (mask.sum() - 1)
    return (advantages - mean) * torch.rsqrt(var + 1e-8), returns


def per_token(batch, micro, fn):
    out = torch.zeros_like(batch["mask"])
    rows = list(range(batch["ids"].shape[0]))
    with torch.no_grad():
        for i in range(0, len(rows), micro):
            part = select(batch, rows[i:i + micro])
            out[i:i + micro] = fn(part) * part["mask"]
    return out


def train(args):
    from transformers import AutoModelForCausalLM, AutoModelForTokenClassification
    device = torch.device(args.device)
    autocast = args.precision == "bf16" and device.type == "cuda"
    torch.manual_seed(args.seed)
    actor = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32).to(device)
    critic = AutoModelForTokenClassification.from_pretrained(args.model, num_labels=1,
                                                             torch_dtype=torch.float32).to(device)
    torch.nn.init.zeros_(critic.score.weight)
    if getattr(critic.score, "bias", None) is not None:
        torch.nn.init.zeros_(critic.score.bias)
    if args.gradient_checkpointing:
        actor.gradient_checkpointing_enable()
        critic.gradient_checkpointing_enable()
    actor_opt = torch.optim.AdamW(actor.parameters(), lr=args.actor_lr, weight_decay=0.01)
    critic_opt = torch.optim.AdamW(critic.parameters(), lr=args.critic_lr, weight_decay=0.01)
    data = list(read_trajectories(args.data))
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for iteration in range(len(data) // args.batch_size):
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        batch = collate(data[iteration * args.batch_size:(iteration + 1) * args.batch_size], device)
        tokens = float(batch["attention"].sum())
        sync()
        started = time.perf_counter()
        old = per_token(batch, args.micro_batch_size, lambda part: score(actor, part, autocast, False)[0])
        sync()
        old_seconds = time.perf_counter() - started
        vals = per_token(batch, args.micro_batch_size, lambda part: values(critic, part, autocast))
        rewards = torch.zeros_like(batch["mask"])
        last = (batch["mask"].cumsum(1) == batch["mask"].sum(1, keepdim=True)) & (batch["mask"] > 0)
        rewards[last] = batch["scores"].repeat_interleave(last.sum(1))
        advantages, returns = gae(rewards, vals, batch["mask"])
        batch.update(old=old, values=vals, advantages=advantages.to(device), returns=returns.to(device))
        sync()
        update_started = time.perf_counter()
        pg_losses, vf_losses = [], []
        for _ in range(args.ppo_epochs):
            rows = list(range(batch["ids"].shape[0]))
            for m in range(0, len(rows), args.mini_batch_size or len(rows)):
                minibatch = rows[m:m + (args.mini_batch_size or len(rows))]
                total = float(batch["mask"][minibatch].sum())
                pg_sum, vf_sum = 0.0, 0.0
                for i in range(0, len(minibatch), args.micro_batch_size):
                    part = select(batch, minibatch[i:i + args.micro_batch_size])
                    lp, entropy = score(actor, part, autocast, True)
                    ratio = torch.exp((lp - part["old"]).clamp(-20, 20))
                    a = part["advantages"]
                    l1, l2 = -a * ratio, -a * ratio.clamp(0.8, 1.2)
                    clipped = torch.maximum(l1, l2)
                    losses = torch.where(a < 0, torch.minimum(-a * 3.0, clipped), clipped)
                    pg = (losses * part["mask"]).sum() / total
                    pg.backward()
                    vp = values(critic, part, autocast)
                    vclip = torch.maximum(torch.minimum(vp, part["values"] + 0.5), part["values"] - 0.5)
                    vf = 0.5 * (torch.maximum((vp - part["returns"]) ** 2, (vclip - part["returns"]) ** 2)
                                * part["mask"]).sum() / total
                    vf.backward()
                    pg_sum += float(pg)
                    vf_sum += float(vf)
                for model, opt in ((actor, actor_opt), (critic, critic_opt)):
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                pg_losses.append(pg_sum)
                vf_losses.append(vf_sum)
        sync()
        update_seconds = time.perf_counter() - update_started
        record = {"iteration": iteration + 1, "tokens": tokens, "update_s": update_seconds,
                  "update_tokens_per_s": tokens * args.ppo_epochs / update_seconds,
                  "old_log_prob_s": old_seconds, "old_log_prob_tokens_per_s": tokens / old_seconds,
                  "pg_loss": sum(pg_losses) / len(pg_losses), "vf_loss": sum(vf_losses) / len(vf_losses)}
        if device.type == "cuda":
            record["max_memory_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
        print(json.dumps(record), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("make-model")
    make.add_argument("--shape", choices=sorted(SHAPES), default="qwen2-0.5b")
    make.add_argument("--out", required=True)
    make.add_argument("--seed", type=int, default=1)
    data = sub.add_parser("make-data")
    for name, default in [("rows", 64), ("prompt", 512), ("response", 1536), ("turns", 4),
                          ("vocab", 151936), ("seed", 1)]:
        data.add_argument(f"--{name}", type=int, default=default)
    run = sub.add_parser("train")
    run.add_argument("--model", required=True)
    run.add_argument("--data", required=True)
    run.add_argument("--device", default="cuda")
    run.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    run.add_argument("--batch-size", type=int, default=64)
    run.add_argument("--mini-batch-size", type=int, default=16)
    run.add_argument("--micro-batch-size", type=int, default=2)
    run.add_argument("--ppo-epochs", type=int, default=1)
    run.add_argument("--actor-lr", type=float, default=1e-6)
    run.add_argument("--critic-lr", type=float, default=1e-5)
    run.add_argument("--gradient-checkpointing", action="store_true")
    run.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    {"make-model": make_model, "make-data": make_data, "train": train}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
