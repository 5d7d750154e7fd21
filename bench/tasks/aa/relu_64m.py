# class: 100us-1ms
# estimate: ReLU of 8192x8192 fp32 (256 MiB in, 256 MiB out): 537 MB of HBM traffic, ~120-160 us
#   at the 3.5-4.5 TB/s an elementwise kernel reaches on an H200 (about 1.3x that on an H100): a
#   memory-bound kernel in the class where the per-call CV goal (2% from 100 us) begins.
import torch
import torch.nn as nn

SIZE = "cuda"  # the bench scripts write "cpu" here for a smoke run at tiny sizes
ROWS, COLS = {"cuda": (8192, 8192), "cpu": (64, 256)}[SIZE]


class Model(nn.Module):
    """ReLU of a large matrix: one memory-bound kernel of a few hundred microseconds."""

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
