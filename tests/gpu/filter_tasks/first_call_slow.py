# Inside the GPU window (about 5 ms a call), except that the first forward call of each process
# takes 0.5 s, as a GPU task's first call pays CUDA's lazy loading and the cuBLAS and cuDNN
# handles: the timing job must still take every timed run asked for.
import time

import torch
import torch.nn as nn

_calls = [0]


class Model(nn.Module):
    def forward(self, x):
        _calls[0] += 1
        time.sleep(0.5 if _calls[0] == 1 else 0.005)
        return x.tanh()


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
