"""Builds the train area's parity fixtures with Hugging Face's own libraries (transformers,
tokenizers, safetensors), which exist on the GPU machine but not on the development machines.

Everything is random or trained here from local text, so nothing is downloaded:
  tokenizer/            a byte-level BPE trained with Qwen2's pre-tokenizer split, ChatML specials,
                        and a ChatML chat template of our own (tokenizer.json, tokenizer_config.json)
  tokenizer_cases.json  texts (code, Unicode, whitespace runs, special tokens) and HF's ids for each
  chat_cases.json       conversations (tools, tool calls, tool results) and HF's rendering of each
  qwen2-tiny/           a randomly initialised Qwen2 (GQA, q/k/v bias, untied), fp32 safetensors
  qwen2-tiny-tied/      the same shape with tied embeddings, sharded into several files + index
  llama-tiny/           a randomly initialised Llama (no bias), fp32
  logprobs.json         per-token log-probs and entropies of each model on fixed sequences (fp32, CPU)
  generate.json         greedy continuations (HF generate, no sampling) of fixed prompts

Usage: python3 make_fixtures.py OUT_DIR   (CPU only; about a minute)
"""

import glob
import json
import os
import random
import sys

import torch

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
torch.manual_seed(1234)
random.seed(1234)

# ---------- tokenizer ----------
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

# Qwen2's pre-tokenizer split (a fact about that tokenizer: letters, digits one at a time,
# punctuation runs, newlines, whitespace), then byte-level mapping without its own regex.
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED_NOT_SPECIAL = ["<tool_call>", "</tool_call>"]

tokenizer = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
tokenizer.normalizer = normalizers.NFC()
tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
])
tokenizer.decoder = decoders.ByteLevel()


def corpus_files():
    roots = [os.path.dirname(os.__file__)]
    files = sorted(glob.glob(os.path.join(roots[0], "*.py")))
    return files[:400]


def corpus_lines():
    for path in corpus_files():
        try:
            with open(path, encoding="utf-8") as f:
                yield f.read()
        except (UnicodeDecodeError, OSError):
            continue
    multilingual = ["Grüße aus München, straße", "naïve café résumé", "日本語のテキストです。",
                    "中文文本处理", "한국어 문장입니다", "Привет, мир", "مرحبا بالعالم", "😀🚀✨ emoji",
                    "שלום עולם", "ελληνικά γράμματα"]
    for _ in range(50):
        yield " ".join(multilingual)


trainer = trainers.BpeTrainer(vocab_size=2048, min_frequency=2, show_progress=False,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                              special_tokens=SPECIALS)
tokenizer.train_from_iterator(corpus_lines(), trainer=trainer)
tokenizer.add_tokens(ADDED_NOT_SPECIAL)
tok_dir = os.path.join(OUT, "tokenizer")
os.makedirs(tok_dir, exist_ok=True)
tokenizer.save(os.path.join(tok_dir, "tokenizer.json"))

# A ChatML template of our own with tool definitions and tool calls, in the shape Qwen's family uses.
# Every literal (newlines included) is emitted by an expression, never as text between tags:
# Hugging Face renders with trim_blocks and lstrip_blocks, which would eat newlines after tags.
NL = "{{ '\\n' }}"
CHAT_TEMPLATE = (
    "{% if tools %}"
    "{{ '<|im_start|>system\\n' }}"
    "{% if messages[0].role == 'system' %}{{ messages[0].content }}{% else %}{{ 'You are a helpful assistant.' }}{% endif %}"
    "{{ '\\n\\n# Tools\\n\\nYou may call one or more functions. Function signatures are inside <tools></tools>:\\n<tools>' }}"
    "{% for tool in tools %}" + NL + "{{ tool | tojson }}{% endfor %}"
    "{{ '\\n</tools>\\n\\nFor each call, return a JSON object with the function name and arguments inside "
    "<tool_call></tool_call> tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{% elif messages[0].role == 'system' %}"
    "{{ '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message.role == 'user' or (message.role == 'system' and not loop.first) or (message.role == 'assistant' and not message.tool_calls) %}"
    "{{ '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{% elif message.role == 'assistant' %}"
    "{{ '<|im_start|>assistant' }}"
    "{% if message.content %}" + NL + "{{ message.content }}{% endif %}"
    "{% for tool_call in message.tool_calls %}"
    "{% if tool_call.function is defined %}{% set call = tool_call.function %}{% else %}{% set call = tool_call %}{% endif %}"
    "{{ '\\n<tool_call>\\n{\\\"name\\\": \\\"' + call.name + '\\\", \\\"arguments\\\": ' }}"
    "{% if call.arguments is string %}{{ call.arguments }}{% else %}{{ call.arguments | tojson }}{% endif %}"
    "{{ '}\\n</tool_call>' }}"
    "{% endfor %}"
    "{{ '<|im_end|>\\n' }}"
    "{% elif message.role == 'tool' %}"
    "{% if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{ '<|im_start|>user' }}{% endif %}"
    "{{ '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{% if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{ '<|im_end|>\\n' }}{% endif %}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
with open(os.path.join(tok_dir, "tokenizer_config.json"), "w") as f:
    json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>",
               "pad_token": "<|endoftext|>", "bos_token": None, "unk_token": None,
               "add_bos_token": False, "model_max_length": 32768, "chat_template": CHAT_TEMPLATE,
               "clean_up_tokenization_spaces": False}, f, indent=1)

from transformers import AutoTokenizer  # noqa: E402

hf_tok = AutoTokenizer.from_pretrained(tok_dir)
texts = [
    "", " ", "  ", "\n", "\n\n\n", "\t\t", "a", "hello world", "Hello World!", "   leading spaces",
    "trailing spaces   ", "mixed \t tabs \n and newlines\r\n", "don't you'll we've I'M they'RE",
    "x = torch.randn(4096, 4096, device='cuda')", "for (int i = 0; i < n; ++i) { c[i] = a[i] + b[i]; }",
    "__global__ void k(float* __restrict__ out) {}", "1234567890", "3.14159e-10", "0x1F2e",
    "Grüße aus München", "naïve café", "日本語のテキスト", "中文", "한국어", "Привет", "مرحبا",
    "😀🚀✨👍🏽", "e\u0301 combining", "\u200b zero width", "ﬁ ligature", "Ａｂｃ fullwidth",
    "<|im_start|>user\nhi<|im_end|>\n", "text<|endoftext|>more", "<tool_call>\n{\"a\": 1}\n</tool_call>",
    "<|im_start|> spaced <|im_end|>", "<|im_start", "|im_end|>", "    def f(self):\n        return 1\n",
    "!!!???...", "a" * 300, " " * 40 + "x", "\n" * 7 + "y", "tab\there", "emoji🙂word",
]
for path in corpus_files()[::37][:12]:  # held-out-ish snippets of real code
    with open(path, encoding="utf-8", errors="replace") as f:
        body = f.read()
    start = random.randrange(max(1, len(body) - 2000))
    texts.append(body[start:start + 2000])
rng = random.Random(7)
for _ in range(40):  # random strings over awkward characters
    alphabet = " \t\n\r abcXYZ019_-+=()[]{}'\"\\/.,:;éßøπ中文日本😀\u0301\u200b"
    texts.append("".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 80))))
cases = [{"text": t, "ids": hf_tok.encode(t, add_special_tokens=False)} for t in texts]
for case in cases:
    case["decoded"] = hf_tok.decode(case["ids"], skip_special_tokens=False)
with open(os.path.join(OUT, "tokenizer_cases.json"), "w") as f:
    json.dump({"vocab_size": len(hf_tok), "cases": cases}, f, ensure_ascii=False, indent=0)

tools = [{"type": "function", "function": {
    "name": "Bash", "description": "Run a shell command in the workspace.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                   "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "Read", "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"file_path": {"type": "string"},
                                                         "offset": {"type": "integer"}},
                       "required": ["file_path"]}}}]
conversations = [
    {"messages": [{"role": "user", "content": "Hi"}], "tools": None, "add_generation_prompt": True},
    {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"},
                  {"role": "assistant", "content": "4"}], "tools": None, "add_generation_prompt": False},
    {"messages": [{"role": "user", "content": "List files"}], "tools": tools, "add_generation_prompt": True},
    {"messages": [{"role": "system", "content": "You write CUDA kernels."},
                  {"role": "user", "content": "Optimise model.py"},
                  {"role": "assistant", "content": "Let me look.", "tool_calls": [
                      {"type": "function", "function": {"name": "Read", "arguments": {"file_path": "model.py"}}}]},
                  {"role": "tool", "content": "import torch\nclass Model: ..."},
                  {"role": "assistant", "content": "", "tool_calls": [
                      {"type": "function", "function": {"name": "Bash", "arguments": {"command": "ls -la"}}},
                      {"type": "function", "function": {"name": "Read", "arguments": {"file_path": "a \"q\".cu", "offset": 3}}}]},
                  {"role": "tool", "content": "total 0"}, {"role": "tool", "content": "ünïcode ✓"},
                  {"role": "assistant", "content": "Done."}],
     "tools": tools, "add_generation_prompt": True},
]
chat_cases = []
for conv in conversations:
    kwargs = {"tokenize": False, "add_generation_prompt": conv["add_generation_prompt"]}
    if conv["tools"]:
        kwargs["tools"] = conv["tools"]
    text = hf_tok.apply_chat_template(conv["messages"], **kwargs)
    chat_cases.append(dict(conv, rendered=text, ids=hf_tok.encode(text, add_special_tokens=False)))
with open(os.path.join(OUT, "chat_cases.json"), "w") as f:
    json.dump(chat_cases, f, ensure_ascii=False, indent=1)

# ---------- models ----------
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM  # noqa: E402

vocab = len(hf_tok)
common = dict(vocab_size=vocab, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
              rms_norm_eps=1e-6, initializer_range=0.05, torch_dtype="float32")
models_made = {}
torch.manual_seed(11)
qwen = Qwen2ForCausalLM(Qwen2Config(rope_theta=1000000.0, tie_word_embeddings=False, **common)).eval()
qwen.save_pretrained(os.path.join(OUT, "qwen2-tiny"), safe_serialization=True)
models_made["qwen2-tiny"] = qwen
torch.manual_seed(12)
qwen_tied = Qwen2ForCausalLM(Qwen2Config(rope_theta=10000.0, tie_word_embeddings=True, **common)).eval()
qwen_tied.save_pretrained(os.path.join(OUT, "qwen2-tiny-tied"), safe_serialization=True,
                          max_shard_size="200KB")
models_made["qwen2-tiny-tied"] = qwen_tied
torch.manual_seed(13)
llama = LlamaForCausalLM(LlamaConfig(rope_theta=10000.0, tie_word_embeddings=False, **common)).eval()
llama.save_pretrained(os.path.join(OUT, "llama-tiny"), safe_serialization=True)
models_made["llama-tiny"] = llama
for name in models_made:
    tok_copy = os.path.join(OUT, name)
    hf_tok.save_pretrained(tok_copy)

gen = torch.Generator().manual_seed(99)
sequences = [torch.randint(0, vocab, (n,), generator=gen).tolist() for n in (1, 7, 64, 513)]
sequences.append(chat_cases[3]["ids"])
logprob_cases = []
with torch.no_grad():
    for name, model in models_made.items():
        for ids in sequences:
            x = torch.tensor([ids])
            logits = model(x).logits.float()[0]
            logp = torch.log_softmax(logits, dim=-1)
            target = ids[1:]
            token_logp = logp[:-1].gather(-1, torch.tensor(target)[:, None])[:, 0] if target else torch.zeros(0)
            entropy = -(logp.exp() * logp).sum(-1)
            logprob_cases.append({"model": name, "ids": ids, "token_logprobs": token_logp.tolist(),
                                  "entropy": entropy.tolist(),
                                  "last_logits_head": logits[-1, :16].tolist()})
with open(os.path.join(OUT, "logprobs.json"), "w") as f:
    json.dump(logprob_cases, f)

gen_cases = []
prompts = [hf_tok.encode("def add(a, b):", add_special_tokens=False), chat_cases[0]["ids"],
           sequences[2][:20]]
with torch.no_grad():
    for name, model in models_made.items():
        for prompt in prompts:
            out = model.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False,
                                 attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                                 pad_token_id=hf_tok.pad_token_id, eos_token_id=None)
            gen_cases.append({"model": name, "prompt": prompt, "output": out[0, len(prompt):].tolist()})
with open(os.path.join(OUT, "generate.json"), "w") as f:
    json.dump(gen_cases, f)

import transformers  # noqa: E402
import tokenizers  # noqa: E402
import safetensors  # noqa: E402

with open(os.path.join(OUT, "versions.json"), "w") as f:
    json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
               "tokenizers": tokenizers.__version__, "safetensors": safetensors.__version__}, f)
print("fixtures written to", OUT)
for root, _, files in os.walk(OUT):
    for name in sorted(files):
        path = os.path.join(root, name)
        print(f"{os.path.getsize(path):>10}  {os.path.relpath(path, OUT)}")
