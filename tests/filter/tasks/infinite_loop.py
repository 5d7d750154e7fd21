# forward never returns.
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        while True:
            x = x + 1


def get_inputs():
    return [torch.randn(2)]


def get_init_inputs():
    return []
