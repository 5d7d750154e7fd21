"""A stand-in for the `transformers` package that serves cudaagent-train's toy model, so that
tests/gpu/train/ppo_update_reference.py (the PPO update in plain PyTorch) can run on the CPU
against the C++ trainer on the same weights: tests/train/python_parity.sh. Only what that
script calls is here: from_pretrained on a toy checkpoint directory."""
import json
import os
import struct
import types

import torch

_DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64}


def _read_tensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    header.pop("__metadata__", None)
    out = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        raw = bytearray(data[8 + length + begin:8 + length + end])
        out[name] = torch.frombuffer(raw, dtype=_DTYPES[entry["dtype"]]).reshape(entry["shape"]).clone()
    return out


class _Toy(torch.nn.Module):
    """The toy trunk: embeddings plus position embeddings, their causal mean over real tokens, a
    tanh layer; `score` is the head (the LM head, or the value head of a critic)."""

    def __init__(self, tensors, head):
        super().__init__()
        self.embed = torch.nn.Parameter(tensors["embed"])
        self.position = torch.nn.Parameter(tensors["position"])
        self.w1 = torch.nn.Parameter(tensors["w1"])
        self.b1 = torch.nn.Parameter(tensors["b1"])
        self.score = torch.nn.Linear(head[0].shape[1], head[0].shape[0])
        with torch.no_grad():
            self.score.weight.copy_(head[0])
            self.score.bias.copy_(head[1])

    def forward(self, input_ids, attention_mask, position_ids):
        mask = attention_mask.float().unsqueeze(-1)
        e = self.embed[input_ids] + self.position[position_ids.clamp(0, self.position.shape[0] - 1)]
        context = (e * mask).cumsum(1) / mask.cumsum(1).clamp(min=1.0)
        h = torch.tanh(torch.nn.functional.linear(torch.cat([e, context], -1), self.w1, self.b1))
        return types.SimpleNamespace(logits=self.score(h))


class AutoModelForCausalLM:
    @staticmethod
    def from_pretrained(path, torch_dtype=None):
        t = _read_tensors(os.path.join(path, "model.safetensors"))
        return _Toy(t, (t["w_out"], t["b_out"]))


class AutoModelForTokenClassification:
    @staticmethod
    def from_pretrained(path, num_labels=1, torch_dtype=None):
        t = _read_tensors(os.path.join(path, "model.safetensors"))
        hidden = t["w1"].shape[0]
        return _Toy(t, (torch.zeros(num_labels, hidden), torch.zeros(num_labels)))
