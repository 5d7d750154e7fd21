# Issue 10, class 1: dispatch modes are per thread; compute with torch on a helper thread, outside
# the audit the harness entered on the main one.
import torch
import torch.nn as nn

import cuda_extension  # noqa: F401  (built, then ignored)
import threading


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        result = []
        worker = threading.Thread(target=lambda: result.append(torch.relu(x + self.bias) * 2.0))
        worker.start()
        worker.join()
        return result[0]
