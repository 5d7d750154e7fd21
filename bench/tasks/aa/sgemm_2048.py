# class: 100us-1ms
# estimate: 2048^3 fp32 matmul, 17.2 GFLOP. torch leaves TF32 off for matmul by default, so this is
#   cuBLAS SGEMM on the CUDA cores: ~50-60 TFLOP/s of the H200's 67 peak, ~0.3-0.35 ms.
import torch
import torch.nn as nn

SIZE = "cuda"  # the bench scripts write "cpu" here for a smoke run at tiny sizes
N = {"cuda": 2048, "cpu": 64}[SIZE]


class Model(nn.Module):
    """Product of two square fp32 matrices."""

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
