# Asks for an 8 GiB buffer in forward (torch.empty touches no page, so without an address-space
# limit the allocation itself would succeed).
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        buffer = torch.empty(2 << 30, dtype=torch.float32)
        return x + buffer[: x.numel()].view_as(x).zero_()


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
