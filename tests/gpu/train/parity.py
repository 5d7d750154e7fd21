"""Parity and benchmarks of cudaagent-train against Hugging Face transformers (issue 13).

live (the GPU machine; parity.sh runs it after building):
  1. makes a randomly initialised Qwen2 of Qwen2.5-0.5B's shape with transformers (saved in shards);
  2. per-token log-probabilities and entropies of random sequences up to 4,096 tokens from
     `cudaagent-train logprobs` against HF's forward pass: fp32 max |diff| < 1e-4, bf16 mean |diff|
     < 1e-2 (gates);
  3. greedy completions from `cudaagent-train serve` (fp32) against HF generate (gate: identical),
     and the same in bf16 (reported, not gated: bf16 kernels differ);
  4. forward + backward tokens/s and peak memory of the training computation (chunked log-probs
     and entropies of every position, backward into every parameter) against plain PyTorch +
     transformers computing the same loss from full logits, in the same run, bf16, with and
     without activation recomputation; model FLOP utilisation;
  5. serve decode tokens/s at batch 1 and 32 (and HF generate's at the same sizes, for reference).
smoke (CPU, CI): steps 2, 3 and the cudaagent side of 4 and 5 against the committed fixtures
  (tests/fixtures/train: HF's own numbers), so this script is exercised without a GPU or
  transformers.

Usage: parity.py --bin BIN_DIR --out OUT [--smoke]
       parity.py hf-bench --model DIR --seq-len N --batch B --steps S --warmup W [--recompute]
Writes OUT/results.json and OUT/results.md; exits 1 when a gate fails.
"""

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "train")
H200_BF16_PEAK = 989e12  # dense bf16 FLOP/s of an H200 (SXM)


# ---------------------------------------------------------------- helpers shared by both modes

def run_logprobs(binary, model, sequences, device, dtype):
    """cudaagent-train logprobs over `sequences`; returns [(logprobs, entropies)]."""
    lines = "".join(json.dumps({"id": str(i), "ids": ids}) + "\n" for i, ids in enumerate(sequences))
    done = subprocess.run([binary, "logprobs", "--quiet", "--model", model, "--device", device, "--dtype", dtype],
                          input=lines, capture_output=True, text=True, check=True)
    records = [json.loads(line) for line in done.stdout.splitlines()]
    return [(r["logprobs"]["token_logprobs"], r["logprobs"]["entropy"]) for r in records]


def differences(ours, reference):
    flat = [abs(a - b) for (o, r) in zip(ours, reference) for a, b in zip(o, r)]
    return {"max": max(flat) if flat else 0.0, "mean": statistics.fmean(flat) if flat else 0.0, "n": len(flat)}


class MemoryPoller:
    """Peak GPU memory of one process as nvidia-smi reports it (MiB), polled every 50 ms: the same
    yardstick for both sides, whatever allocator statistics each exposes."""

    def __init__(self, pid):
        self.pid, self.peak, self._stop = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=5).stdout
                for line in out.splitlines():
                    pid, used = [x.strip() for x in line.split(",")]
                    if int(pid) == self.pid:
                        self.peak = max(self.peak, int(used))
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
            time.sleep(0.05)

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.peak


def run_measured(command, poll):
    """Runs `command`, returns (stdout, peak MiB or None)."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    poller = MemoryPoller(proc.pid) if poll else None
    out, err = proc.communicate()
    peak = poller.stop() if poller else None
    if proc.returncode != 0:
        raise RuntimeError(f"{command[0]} exited {proc.returncode}: {err[-2000:]}")
    return out, peak


class Server:
    def __init__(self, binary, model, tokenizer, device, dtype, max_num_seqs, max_model_len):
        self.proc = subprocess.Popen([binary, "serve", model, "--tokenizer", tokenizer, "--device", device, "--dtype", dtype,
                                      "--port", "0", "--max-num-seqs", str(max_num_seqs), "--max-model-len",
                                      str(max_model_len), "--quiet"], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("serve exited before listening")
        self.url = json.loads(line)["serve"]["url"]

    def complete(self, body):
        request = urllib.request.Request(self.url + "/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=600) as response:
            return json.load(response)

    def greedy(self, prompt, tokens):
        body = {"prompt_token_ids": prompt, "temperature": 0, "max_tokens": tokens, "ignore_eos": True,
                "return_token_ids": True}
        return self.complete(body)["choices"][0]["token_ids"]

    def throughput(self, prompts, tokens):
        """Completion tokens per second with all `prompts` sent at once."""
        results = [None] * len(prompts)

        def one(i):
            results[i] = self.complete({"prompt_token_ids": prompts[i], "temperature": 1.0, "seed": i,
                                        "max_tokens": tokens, "ignore_eos": True, "return_token_ids": True})

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - start
        produced = sum(len(r["choices"][0]["token_ids"]) for r in results)
        return {"batch": len(prompts), "completion_tokens": produced, "seconds": seconds, "tokens_per_second": produced / seconds}

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=120)


def bench_ours(binary, model, device, dtype, seq_len, batch, steps, warmup, recompute, poll):
    command = [binary, "bench", "--quiet", "--model", model, "--device", device, "--dtype", dtype, "--seq-len",
               str(seq_len), "--batch", str(batch), "--steps", str(steps), "--warmup", str(warmup)]
    if recompute:
        command.append("--recompute")
    out, peak = run_measured(command, poll)
    result = json.loads(out)["bench"]
    result["peak_mib_nvidia_smi"] = peak
    return result


def mfu(tokens_per_second, parameters, layers, hidden, seq_len):
    """Model FLOP utilisation: 6 N + 12 L d T FLOPs per trained token (PaLM's count; N is every
    parameter that takes part in a matmul, the tied output embedding included)."""
    flops = 6 * parameters + 12 * layers * hidden * seq_len
    return tokens_per_second * flops / H200_BF16_PEAK


def write_results(out_dir, results, rows, failures):
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write("| check | value | gate | ok |\n|---|---|---|---|\n")
        for row in rows:
            f.write("| " + " | ".join(str(x) for x in row) + " |\n")
    print(open(os.path.join(out_dir, "results.md")).read())
    for failure in failures:
        print("FAILED:", failure, file=sys.stderr)
    return 1 if failures else 0


# ---------------------------------------------------------------- smoke: fixtures as the reference

def smoke(args):
    binary = os.path.join(args.bin, "cudaagent-train")
    rows, failures, results = [], [], {"mode": "smoke"}
    cases = [c for c in json.load(open(os.path.join(FIXTURES, "logprobs.json"))) if c["model"] == "qwen2-tiny"]
    model = os.path.join(FIXTURES, "qwen2-tiny")
    reference = [c["token_logprobs"] for c in cases]
    for dtype, gate_name, gate in (("float32", "max", 1e-4), ("bfloat16", "mean", 5e-2)):
        ours = run_logprobs(binary, model, [c["ids"] for c in cases], "cpu", dtype)
        diff = differences([o[0] for o in ours], reference)
        results[f"logprobs_{dtype}"] = diff
        ok = diff[gate_name] < gate
        rows.append((f"log-probs {dtype} vs HF fp32 (fixtures, {diff['n']} tokens)", f"max {diff['max']:.2e}, mean {diff['mean']:.2e}",
                     f"{gate_name} < {gate}", ok))
        if not ok:
            failures.append(f"log-probs {dtype}")
    generate = [c for c in json.load(open(os.path.join(FIXTURES, "generate.json"))) if c["model"] == "qwen2-tiny"]
    server = Server(binary, model, os.path.join(FIXTURES, "tokenizer"), "cpu", "float32", 32, 512)
    try:
        same = sum(server.greedy(c["prompt"], len(c["output"])) == c["output"] for c in generate)
        rows.append(("serve greedy vs HF generate fp32 (fixtures)", f"{same}/{len(generate)} identical", "all", same == len(generate)))
        if same != len(generate):
            failures.append("greedy")
        rng = random.Random(3)
        for batch in (1, 32):
            prompts = [[rng.randrange(3, 2000) for _ in range(16)] for _ in range(batch)]
            t = server.throughput(prompts, 16)
            results[f"serve_batch_{batch}"] = t
            rows.append((f"serve decode, batch {batch} (tiny, CPU)", f"{t['tokens_per_second']:.0f} tokens/s", "-", "-"))
    finally:
        server.stop()
    b = bench_ours(binary, model, "cpu", "float32", 128, 2, 2, 1, False, poll=False)
    results["bench"] = b
    rows.append(("fwd+bwd (tiny, CPU, 2x128)", f"{b['tokens_per_second']:.0f} tokens/s", "-", "-"))
    return write_results(args.out, results, rows, failures)


# ---------------------------------------------------------------- live: HF on the GPU

def hf_load(path, dtype):
    import torch
    from transformers import Qwen2ForCausalLM
    try:
        model = Qwen2ForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation="sdpa")
    except TypeError:
        model = Qwen2ForCausalLM.from_pretrained(path, torch_dtype=dtype, attn_implementation="sdpa")
    return model.to("cuda").eval()


def hf_scores(model, sequences):
    import torch
    out = []
    with torch.no_grad():
        for ids in sequences:
            x = torch.tensor([ids], device="cuda")
            logp = torch.log_softmax(model(x).logits.float()[0], dim=-1)
            target = torch.tensor(ids[1:], device="cuda")
            picked = logp[:-1].gather(-1, target[:, None])[:, 0] if len(ids) > 1 else logp[:0, 0]
            entropy = -(logp.exp() * logp).sum(-1)[:-1]
            out.append((picked.tolist(), entropy.tolist()))
    return out


def hf_bench(args):
    """The plain PyTorch + transformers side of the training benchmark, in its own process."""
    import torch
    model = hf_load(args.model, torch.bfloat16)
    model.train()
    if args.recompute:
        model.gradient_checkpointing_enable()
    torch.manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (args.batch, args.seq_len), device="cuda")
    seconds = []
    for step in range(args.warmup + args.steps):
        for p in model.parameters():
            p.grad = None
        torch.cuda.synchronize()
        start = time.perf_counter()
        logits = model(ids).logits.float()
        logp = torch.log_softmax(logits[:, :-1], dim=-1)
        picked = logp.gather(-1, ids[:, 1:, None])[..., 0]
        entropy = -(logp.exp() * logp).sum(-1)
        (picked.sum() + 0.01 * entropy.sum()).backward()
        torch.cuda.synchronize()
        if step >= args.warmup:
            seconds.append(time.perf_counter() - start)
        del logits, logp, picked, entropy
    median = statistics.median(seconds)
    print(json.dumps({"seconds": seconds, "median_seconds": median, "tokens_per_second": args.batch * args.seq_len / median,
                      "max_memory_allocated_mib": torch.cuda.max_memory_allocated() / 2**20,
                      "max_memory_reserved_mib": torch.cuda.max_memory_reserved() / 2**20,
                      "parameters": sum(p.numel() for p in model.parameters())}))


def hf_generate_throughput(model, prompts, tokens):
    import torch
    x = torch.tensor(prompts, device="cuda")
    with torch.no_grad():
        model.generate(x[:, :4], max_new_tokens=4, do_sample=False, pad_token_id=0)  # warm-up
        torch.cuda.synchronize()
        start = time.perf_counter()
        out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=tokens, do_sample=False,
                             eos_token_id=None, pad_token_id=0)
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    produced = (out.shape[1] - x.shape[1]) * x.shape[0]
    return {"batch": len(prompts), "seconds": seconds, "tokens_per_second": produced / seconds}


def live(args):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    binary = os.path.join(args.bin, "cudaagent-train")
    rows, failures = [], []
    results = {"mode": "live", "torch": torch.__version__, "gpu": torch.cuda.get_device_name()}
    work = tempfile.mkdtemp(prefix="train-parity-", dir=args.out)
    model_dir = os.path.join(work, "qwen2-0.5b-random")
    shape = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6,
                 tie_word_embeddings=True)
    torch.manual_seed(0)
    Qwen2ForCausalLM(Qwen2Config(**shape)).save_pretrained(model_dir, safe_serialization=True, max_shard_size="500MB")
    results["model"] = shape

    # 2. log-probabilities
    rng = random.Random(0)
    sequences = [[rng.randrange(shape["vocab_size"]) for _ in range(n)] for n in (17, 512, 2048, 4096)]
    reference = {}
    for dtype_name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        hf = hf_load(model_dir, dtype)
        reference[dtype_name] = hf_scores(hf, sequences)
        del hf
        torch.cuda.empty_cache()
    for dtype_name, gate_name, gate in (("float32", "max", 1e-4), ("bfloat16", "mean", 1e-2)):
        ours = run_logprobs(binary, model_dir, sequences, "cuda", dtype_name)
        diff = differences([o[0] for o in ours], [r[0] for r in reference[dtype_name]])
        entropy = differences([o[1] for o in ours], [r[1] for r in reference[dtype_name]])
        versus_fp32 = differences([o[0] for o in ours], [r[0] for r in reference["float32"]])
        results[f"logprobs_{dtype_name}"] = {"vs_hf_same_dtype": diff, "entropy": entropy, "vs_hf_fp32": versus_fp32}
        ok = diff[gate_name] < gate
        rows.append((f"log-probs {dtype_name} vs HF {dtype_name} (lengths 17-4096, {diff['n']} tokens)",
                     f"max {diff['max']:.2e}, mean {diff['mean']:.2e}; entropy max {entropy['max']:.2e}", f"{gate_name} < {gate}", ok))
        if not ok:
            failures.append(f"log-probs {dtype_name}")
    hf_bf16_vs_fp32 = differences([r[0] for r in reference["bfloat16"]], [r[0] for r in reference["float32"]])
    rows.append(("HF bf16 vs HF fp32 (for scale)", f"max {hf_bf16_vs_fp32['max']:.2e}, mean {hf_bf16_vs_fp32['mean']:.2e}", "-", "-"))

    # 3. greedy decoding
    tokenizer_dir = os.path.join(FIXTURES, "tokenizer")
    prompts = [[rng.randrange(shape["vocab_size"]) for _ in range(n)] for n in (5, 32, 100, 300)]
    for dtype_name, dtype, gated in (("float32", torch.float32, True), ("bfloat16", torch.bfloat16, False)):
        hf = hf_load(model_dir, dtype)
        expected = []
        with torch.no_grad():
            for p in prompts:
                x = torch.tensor([p], device="cuda")
                out = hf.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=32, do_sample=False,
                                  eos_token_id=None, pad_token_id=0)
                expected.append(out[0, len(p):].tolist())
        del hf
        torch.cuda.empty_cache()
        server = Server(binary, model_dir, tokenizer_dir, "cuda", dtype_name, 8, 1024)
        try:
            got = [server.greedy(p, 32) for p in prompts]
        finally:
            server.stop()
        same = sum(g == e for g, e in zip(got, expected))
        prefix = [next((i for i, (a, b) in enumerate(zip(g, e)) if a != b), len(e)) for g, e in zip(got, expected)]
        results[f"greedy_{dtype_name}"] = {"identical": same, "of": len(prompts), "agreeing_prefix": prefix}
        ok = same == len(prompts) if gated else "-"
        rows.append((f"serve greedy vs HF generate {dtype_name} (4 prompts x 32)", f"{same}/4 identical, prefixes {prefix}",
                     "all identical" if gated else "reported", ok))
        if gated and same != len(prompts):
            failures.append(f"greedy {dtype_name}")

    # 4. training throughput and memory
    for recompute in (False, True):
        label = "recompute" if recompute else "no recompute"
        ours = bench_ours(binary, model_dir, "cuda", "bfloat16", 4096, 1, 10, 3, recompute, poll=True)
        command = [sys.executable, __file__, "hf-bench", "--model", model_dir, "--seq-len", "4096", "--batch", "1",
                   "--steps", "10", "--warmup", "3"] + (["--recompute"] if recompute else [])
        out, peak = run_measured(command, poll=True)
        theirs = json.loads(out.strip().splitlines()[-1])
        theirs["peak_mib_nvidia_smi"] = peak
        ratio = ours["tokens_per_second"] / theirs["tokens_per_second"]
        m_ours = mfu(ours["tokens_per_second"], ours["parameters"], 24, 896, 4096)
        m_theirs = mfu(theirs["tokens_per_second"], theirs["parameters"], 24, 896, 4096)
        results[f"train_{label.replace(' ', '_')}"] = {"ours": ours, "transformers": theirs, "ratio": ratio,
                                                       "mfu_ours": m_ours, "mfu_transformers": m_theirs}
        rows.append((f"fwd+bwd bf16 1x4096, {label}: tokens/s ours / transformers",
                     f"{ours['tokens_per_second']:.0f} / {theirs['tokens_per_second']:.0f} = {ratio:.2f}x; MFU {m_ours:.1%} / {m_theirs:.1%}",
                     ">= 1.0x (goal)", ratio >= 1.0))
        rows.append((f"peak GPU memory (nvidia-smi), {label}: ours / transformers",
                     f"{ours['peak_mib_nvidia_smi']} / {peak} MiB (transformers' allocator peak {theirs['max_memory_allocated_mib']:.0f} MiB)",
                     "-", "-"))

    # 5. serve decode throughput
    server = Server(binary, model_dir, tokenizer_dir, "cuda", "bfloat16", 32, 1024)
    hf = hf_load(model_dir, torch.bfloat16)
    try:
        server.throughput([[1, 2, 3, 4]], 8)  # warm-up
        for batch in (1, 32):
            prompts_b = [[rng.randrange(shape["vocab_size"]) for _ in range(128)] for _ in range(batch)]
            ours = server.throughput(prompts_b, 256)
            theirs = hf_generate_throughput(hf, prompts_b, 256)
            results[f"serve_batch_{batch}"] = {"ours": ours, "hf_generate": theirs}
            rows.append((f"serve decode bf16, batch {batch}, 128 + 256 tokens: ours / HF generate",
                         f"{ours['tokens_per_second']:.0f} / {theirs['tokens_per_second']:.0f} tokens/s", "-", "-"))
    finally:
        server.stop()
    return write_results(args.out, results, rows, failures)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "hf-bench":
        parser = argparse.ArgumentParser()
        parser.add_argument("command")
        for name in ("--model",):
            parser.add_argument(name, required=True)
        for name in ("--seq-len", "--batch", "--steps", "--warmup"):
            parser.add_argument(name, type=int, required=True)
        parser.add_argument("--recompute", action="store_true")
        return hf_bench(parser.parse_args())
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    return smoke(args) if args.smoke else live(args)


if __name__ == "__main__":
    sys.exit(main())
