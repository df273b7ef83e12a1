"""Run by test_torch_device.py with fake-cudart preloaded under libwharf:
one epoch of wharf.torch's device path against a stand-in for torch.cuda
whose streams are the stand-in runtime's, so that a read enqueued on the
wrong stream sees a buffer before its (slow) copy landed.

    fake_torch_cuda.py INDEX SHM N BATCH given|current

Each step clones the batch on the stream the loader was given (or the
current one), as a training step would read it there.  Prints one JSON
line: cuda_path, the data and labels read back, the stand-in's misuses.
"""

import contextlib
import ctypes
import json
import os
import sys

import numpy as np
import torch

import wharf
import wharf.torch

rt = ctypes.CDLL(os.environ["WHARF_FAKE_CUDART"])
rt.cudaStreamCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
rt.cudaMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_size_t, ctypes.c_int,
                               ctypes.c_void_p]
rt.fake_cuda_set_copy_delay_us.argtypes = [ctypes.c_uint]
rt.fake_cuda_first_misuse.restype = ctypes.c_char_p
DEVICE_TO_HOST = 2


class Stream:
    def __init__(self, handle=None):
        if handle is None:
            h = ctypes.c_void_p()
            rt.cudaStreamCreate(ctypes.byref(h))
            handle = h.value
        self.cuda_stream = handle or 0


class Cuda:
    """torch.cuda as wharf.torch's device path uses it."""

    Stream = Stream

    def __init__(self):
        self.cur = Stream(0)  # NULL: the default stream

    def current_stream(self, device=None):
        return self.cur

    @contextlib.contextmanager
    def stream(self, s):
        old, self.cur = self.cur, s
        try:
            yield
        finally:
            self.cur = old

    @contextlib.contextmanager
    def device(self, d):
        yield

    def init(self):
        pass

    def synchronize(self):
        rt.cudaDeviceSynchronize()


class Read:
    """A device tensor's bytes copied back on the stream current when it
    was asked for: valid once the stream got there (synchronize)."""

    def __init__(self, dev, dtype):
        self.host = np.empty(dev.shape, dev.dtype)
        self.dtype = dtype
        rt.cudaMemcpyAsync(self.host.ctypes.data, dev.ptr, self.host.nbytes,
                           DEVICE_TO_HOST, cuda.cur.cuda_stream)

    def numpy(self):
        return self.host.astype(self.dtype)


class DeviceTensor:
    def __init__(self, obj):
        a = obj.__cuda_array_interface__
        self.keep = obj  # the lease, as torch keeps the object
        self.ptr = a["data"][0]
        self.shape = a["shape"]
        self.dtype = np.dtype(a["typestr"])
        self.device = torch.device("cuda")

    def long(self):
        return Read(self, np.int64)

    def clone(self):
        return Read(self, self.dtype)


class FakeTorch:
    """torch, but for torch.cuda and device tensors."""

    def __init__(self, cuda):
        self.cuda = cuda

    def as_tensor(self, obj, device=None):
        return DeviceTensor(obj)

    def __getattr__(self, name):
        return getattr(torch, name)


cuda = Cuda()
wharf.torch._torch = FakeTorch(cuda)


def main():
    index, shm, n, batch, which = sys.argv[1:6]
    ix = wharf.Index(index)
    stream = Stream() if which == "given" else None
    rt.fake_cuda_set_copy_delay_us(20000)
    l = wharf.torch.Loader(ix, batch_size=int(batch), num_workers=2,
                           shm_dir=shm, device="cuda", stream=stream,
                           decode=wharf.decode.array("float32", (3, 5)))
    s = stream or cuda.current_stream()
    xs, ys = [], []
    for x, y in l:
        with cuda.stream(s):
            xs.append(x.clone())
            ys.append(y.clone() if isinstance(y, DeviceTensor) else y)
        del x, y
    cuda.synchronize()
    out = {"cuda_path": l.cuda_path,
           "data": np.concatenate([r.numpy() for r in xs]).ravel().tolist(),
           "labels": np.concatenate([r.numpy() for r in ys]).tolist(),
           "misuses": rt.fake_cuda_misuses(),
           "first_misuse": rt.fake_cuda_first_misuse().decode()}
    l.close()
    ix.close()
    print(json.dumps(out))


main()
