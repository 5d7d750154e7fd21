# Asks for a 1 TiB buffer on the input's device in forward: more than any GPU holds (the CUDA
# caching allocator refuses it at once) and far above --memory-limit on the CPU device.
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        buffer = torch.empty(1 << 38, dtype=torch.float32, device=x.device)
        return x + buffer[: x.numel()].view_as(x).zero_()


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
