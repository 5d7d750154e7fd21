# get_inputs fails: a shape mistake of the kind an LLM makes.
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.relu()


def get_inputs():
    return [torch.randn(4, 16).view(5, 5)]


def get_init_inputs():
    return []
