# class: <10us
# estimate: ReLU of 32x1024 fp32 (128 KiB in, 128 KiB out): a ~2 us kernel on an H200; the timed
#   call (module call, launch, device-wide sync) is launch-bound and will land in a higher class.
import torch
import torch.nn as nn

SIZE = "cuda"  # the bench scripts write "cpu" here for a smoke run at tiny sizes
ROWS, COLS = {"cuda": (32, 1024), "cpu": (8, 64)}[SIZE]


class Model(nn.Module):
    """ReLU of a small matrix."""

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
