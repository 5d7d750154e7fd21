"""Memory that a trusted harness process shares with a sandboxed one, passed as file descriptors.

The trusted side owns every shared buffer: it allocates it, writes the inputs into it, and reads
the results out of it, so what it checks is memory it can see itself, not a report. The other
process gets each buffer as a file descriptor over a Unix socket (SCM_RIGHTS) and maps it, read-only
where it must not write. File descriptors cross PID, mount and network namespaces, which CUDA's
legacy IPC handles do not, so the same code serves a candidate inside the OS sandbox.

  GPU: the CUDA driver's virtual memory API (cuMemCreate with a POSIX file descriptor handle,
       cuMemMap, cuMemSetAccess), through ctypes on libcuda.so.1.
  CPU: memfd_create + mmap.

Tensors over a buffer are views (no copy): torch.frombuffer on the CPU, __cuda_array_interface__ on
the GPU, always built from bytes and then viewed as the dtype and shape, so every dtype torch has
(bfloat16 included) works.
"""

import array
import ctypes
import mmap
import os
import socket
import warnings

CU_MEM_ALLOCATION_TYPE_PINNED = 1
CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1
CU_MEM_LOCATION_TYPE_DEVICE = 1
CU_MEM_ACCESS_FLAGS_PROT_READ = 1
CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AllocationProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", _Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class DriverError(RuntimeError):
    pass


class _Driver:
    """The few CUDA driver calls the GPU buffers need. The caller's thread must have a current
    context (torch makes the primary context current once CUDA is initialised)."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        u64 = ctypes.c_uint64
        sigs = {
            "cuMemGetAllocationGranularity": [ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(_AllocationProp), ctypes.c_int],
            "cuMemCreate": [ctypes.POINTER(u64), ctypes.c_size_t, ctypes.POINTER(_AllocationProp), u64],
            "cuMemExportToShareableHandle": [ctypes.c_void_p, u64, ctypes.c_int, u64],
            "cuMemImportFromShareableHandle": [ctypes.POINTER(u64), ctypes.c_void_p, ctypes.c_int],
            "cuMemAddressReserve": [ctypes.POINTER(u64), ctypes.c_size_t, ctypes.c_size_t, u64, u64],
            "cuMemMap": [u64, ctypes.c_size_t, ctypes.c_size_t, u64, u64],
            "cuMemSetAccess": [u64, ctypes.c_size_t, ctypes.POINTER(_AccessDesc), ctypes.c_size_t],
            "cuMemUnmap": [u64, ctypes.c_size_t],
            "cuMemAddressFree": [u64, ctypes.c_size_t],
            "cuMemRelease": [u64],
        }
        for name, args in sigs.items():
            fn = getattr(self.lib, name)
            fn.argtypes = args
            fn.restype = ctypes.c_int

    def check(self, result, what):
        if result != 0:
            raise DriverError(f"{what} failed: CUDA driver error {result}")

    def prop(self, device):
        prop = _AllocationProp()
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        prop.location = _Location(CU_MEM_LOCATION_TYPE_DEVICE, device)
        return prop

    def granularity(self, device):
        size = ctypes.c_size_t(0)
        prop = self.prop(device)
        self.check(self.lib.cuMemGetAllocationGranularity(ctypes.byref(size), ctypes.byref(prop),
                                                          CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                   "cuMemGetAllocationGranularity")
        return int(size.value)


_driver = None


def _get_driver():
    global _driver
    if _driver is None:
        _driver = _Driver()
    return _driver


def _round_up(size, granule):
    return max(granule, (size + granule - 1) // granule * granule)


class Buffer:
    """One shared allocation of `size` bytes on `device` ("cpu" or "cuda[:N]"). Made with create()
    by the owner, or with open() from a received file descriptor. close() unmaps it; the
    descriptor is the owner's to keep or close."""

    def __init__(self, device, size, fd, readonly):
        self.device = device
        self.size = size
        self.fd = fd
        self.readonly = readonly
        self._mmap = None
        self._cuda = None  # (handle, ptr, mapped_size)

    @property
    def is_cuda(self):
        return self.device.startswith("cuda")

    @staticmethod
    def _device_index(device):
        return int(device.split(":")[1]) if ":" in device else 0

    @classmethod
    def create(cls, device, size):
        if not device.startswith("cuda"):
            fd = os.memfd_create("cudaagent-shared", os.MFD_CLOEXEC)
            os.ftruncate(fd, max(size, 1))
            buffer = cls(device, size, fd, readonly=False)
            buffer._mmap = mmap.mmap(fd, max(size, 1), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            return buffer
        drv = _get_driver()
        index = cls._device_index(device)
        prop = drv.prop(index)
        mapped = _round_up(size, drv.granularity(index))
        handle = ctypes.c_uint64(0)
        drv.check(drv.lib.cuMemCreate(ctypes.byref(handle), mapped, ctypes.byref(prop), 0), "cuMemCreate")
        fd = ctypes.c_int(-1)
        drv.check(drv.lib.cuMemExportToShareableHandle(ctypes.byref(fd), handle.value,
                                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                  "cuMemExportToShareableHandle")
        os.set_inheritable(fd.value, False)
        buffer = cls(device, size, fd.value, readonly=False)
        buffer._map_cuda(handle.value, mapped, index)
        return buffer

    @classmethod
    def open(cls, device, size, fd, readonly):
        """Maps a buffer received as `fd`; read-only mappings fault on any write (on the GPU the
        writing process's context dies with an illegal address)."""
        buffer = cls(device, size, fd, readonly)
        if not device.startswith("cuda"):
            prot = mmap.PROT_READ if readonly else mmap.PROT_READ | mmap.PROT_WRITE
            buffer._mmap = mmap.mmap(fd, max(size, 1), mmap.MAP_SHARED, prot)
            return buffer
        drv = _get_driver()
        index = cls._device_index(device)
        mapped = _round_up(size, drv.granularity(index))
        handle = ctypes.c_uint64(0)
        drv.check(drv.lib.cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd),
                                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                  "cuMemImportFromShareableHandle")
        buffer._map_cuda(handle.value, mapped, index)
        return buffer

    def _map_cuda(self, handle, mapped, index):
        drv = _get_driver()
        ptr = ctypes.c_uint64(0)
        drv.check(drv.lib.cuMemAddressReserve(ctypes.byref(ptr), mapped, 0, 0, 0), "cuMemAddressReserve")
        drv.check(drv.lib.cuMemMap(ptr.value, mapped, 0, handle, 0), "cuMemMap")
        flags = CU_MEM_ACCESS_FLAGS_PROT_READ if self.readonly else CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        desc = _AccessDesc(_Location(CU_MEM_LOCATION_TYPE_DEVICE, index), flags)
        drv.check(drv.lib.cuMemSetAccess(ptr.value, mapped, ctypes.byref(desc), 1), "cuMemSetAccess")
        self._cuda = (handle, ptr.value, mapped)

    def pointer(self):
        """The address of the first byte (device address on the GPU)."""
        if self._cuda is not None:
            return self._cuda[1]
        return ctypes.addressof(ctypes.c_char.from_buffer(self._mmap)) if not self.readonly else None

    def tensor(self, torch, dtype, shape, offset=0):
        """A view of bytes [offset, offset + numel * itemsize) as `dtype` of `shape`."""
        numel = 1
        for dim in shape:
            numel *= int(dim)
        itemsize = torch.empty((), dtype=dtype).element_size()
        nbytes = numel * itemsize
        if offset < 0 or offset + nbytes > self.size:
            raise ValueError(f"view of {nbytes} bytes at {offset} exceeds the buffer's {self.size}")
        if nbytes == 0:
            return torch.empty(tuple(shape), dtype=dtype, device=self.device)
        if self._cuda is None:
            with warnings.catch_warnings():  # a read-only mapping is the protection, not torch
                warnings.simplefilter("ignore", UserWarning)
                raw = torch.frombuffer(self._mmap, dtype=torch.uint8, count=nbytes, offset=offset)
        else:
            interface = _CudaBytes(self._cuda[1] + offset, nbytes)
            raw = torch.as_tensor(interface, device=self.device)
        return raw.view(dtype).view(tuple(int(d) for d in shape))

    def close(self):
        if self._mmap is not None:
            try:
                self._mmap.close()
            except BufferError:  # a tensor still views it: unmapped when the process ends
                pass
            self._mmap = None
        if self._cuda is not None:
            drv = _get_driver()
            handle, ptr, mapped = self._cuda
            drv.lib.cuMemUnmap(ptr, mapped)
            drv.lib.cuMemAddressFree(ptr, mapped)
            drv.lib.cuMemRelease(handle)
            self._cuda = None


class _CudaBytes:
    def __init__(self, ptr, nbytes):
        # torch refuses the read-only flag: a read-only buffer is protected by its mapping instead.
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 2, "strides": None}


def send_fds(sock, fds, message):
    """Sends `message` (bytes, at least one) with the descriptors attached."""
    sock.sendmsg([message], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])


def recv_fds(sock, max_fds, max_bytes=65536):
    """One message and the descriptors that came with it (made close-on-exec)."""
    fds = array.array("i")
    message, ancillary, _, _ = sock.recvmsg(max_bytes, socket.CMSG_SPACE(max_fds * fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - (len(data) % fds.itemsize)])
    received = list(fds)
    for fd in received:
        os.set_inheritable(fd, False)
    return message, received
