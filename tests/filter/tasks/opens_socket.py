# Tries to reach the network from forward; the sandbox has no IP sockets at all.
import socket

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        socket.create_connection(("127.0.0.1", 9), timeout=1).close()
        return x.relu()


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
