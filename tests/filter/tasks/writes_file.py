# Writes a marker into /tmp (the sandbox's private tmpfs: allowed, and invisible outside), then
# tries to write one into /etc (read-only inside: the task fails with a reason).
import torch
import torch.nn as nn

MARKER = "cudaagent-filter-test-marker"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        with open("/tmp/" + MARKER, "w") as out:
            out.write("inside\n")
        with open("/etc/" + MARKER, "w") as out:
            out.write("escaped\n")

    def forward(self, x):
        return x.relu()


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
