# Correct but slow: each forward call takes at least 60 ms.
import time

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        time.sleep(0.06)
        return x.tanh()


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
