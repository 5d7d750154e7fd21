"""The GPU call timer's flags: three 32-bit counters in a buffer the owner shares with a runner
(shared_buffers.py), written and waited for by the GPU itself (cuStreamWriteValue32 and
cuStreamWaitValue32 of the driver API), so that the owner's stream and the runner's are ordered
without either host being in the way.

Per call n (session_owner.py queues its part before it sends the call, session_runner.py its part
when the call arrives):
    owner   [wait ready >= n] [T0] [copy the inputs in] [write go = n] [wait done >= n]
            [copy the output slots to private memory] [T1]
    runner  [wait go >= n] on its current stream, [write ready = n] from a side stream at once,
            the forwards and their copies into the output slots, [write done = n]
The sample is the time between the owner's CUDA events T0 and T1: the inputs exist in shared
memory only after T0, and what is judged is the owner's private copy, taken before T1. A runner
that writes a flag early or late only moves work into or out of its own window in a way the
judgement catches: outputs not yet written at "done" are poison, inputs read before "go" are
poison too (the owner poisons the input slots after every call).

"ready" is written from a side stream as soon as the wait for "go" is queued, so that a forward
that waits for the device on its host (a synchronize inside it) cannot deadlock: by then the
owner has seen "ready" and will write "go".
"""

import ctypes

WAIT_GEQ = 0x0        # CU_STREAM_WAIT_VALUE_GEQ: passes once (int32)(*addr - value) >= 0
WRITE_DEFAULT = 0x0   # CU_STREAM_WRITE_VALUE_DEFAULT: earlier writes of the stream are visible first
OFFSETS = {"ready": 0, "go": 64, "done": 128}  # a cache line each
BYTES = 192


class StreamFlags:
    """The three flags of one buffer (a shared_buffers.Buffer on the GPU)."""

    def __init__(self, buffer):
        lib = ctypes.CDLL("libcuda.so.1")
        # CUDA 12 and later name the functions _v2; the old names are kept for older drivers.
        self._wait = getattr(lib, "cuStreamWaitValue32_v2", None) or lib.cuStreamWaitValue32
        self._write = getattr(lib, "cuStreamWriteValue32_v2", None) or lib.cuStreamWriteValue32
        for fn in (self._wait, self._write):
            fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
            fn.restype = ctypes.c_int
        base = buffer.pointer()
        self.address = {name: base + offset for name, offset in OFFSETS.items()}

    @staticmethod
    def _check(result, what):
        if result != 0:
            raise RuntimeError(f"{what} failed: CUresult {result}")

    def wait(self, stream, name, value):
        """Queues on `stream` (a torch.cuda.Stream) a wait until flag `name` reaches `value`."""
        self._check(self._wait(ctypes.c_void_p(stream.cuda_stream), self.address[name],
                               value & 0xFFFFFFFF, WAIT_GEQ), "cuStreamWaitValue32")

    def write(self, stream, name, value):
        """Queues on `stream` a write of `value` into flag `name`."""
        self._check(self._write(ctypes.c_void_p(stream.cuda_stream), self.address[name],
                                value & 0xFFFFFFFF, WRITE_DEFAULT), "cuStreamWriteValue32")
