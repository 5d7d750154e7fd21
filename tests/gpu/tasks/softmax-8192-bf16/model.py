import torch
import torch.nn as nn


class Model(nn.Module):
    """A bfloat16 softmax over 8192 columns: every output is near 1e-4."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(512, 8192).to(torch.bfloat16)]


def get_init_inputs():
    return []
