"""wharf.torch: the wharf loader yielding torch tensors.

    import wharf, wharf.torch
    loader = wharf.torch.Loader(index, batch_size=64, num_workers=4,
                                decode=wharf.decode.tokens("uint16", 1024))
    for x, y in loader:          # torch.int64 tensors (64, 1024)
        ...

Tensors share memory with the shared-memory ring (torch.frombuffer: no
copy), so the rule for views holds: a batch's tensors are valid until the
loop takes the next batch (or release()); .clone() what you keep.  The
tensors are writable in form only: do not write into them.

device="cuda" (optionally with stream=) moves each batch with a
non-blocking copy issued on that stream and yields device tensors; the host
batch is released once the copy is done.  libwharf's pinned CUDA prefetch
(wharf/cuda.h) is not used yet, so the copy comes from pageable memory.
"""

import numpy as np
import torch as _torch

from . import Batch, Index, WharfError, decode  # noqa: F401
from . import Loader as _NumpyLoader

_TORCH_DTYPES = {
    "uint8": _torch.uint8, "int8": _torch.int8, "int16": _torch.int16,
    "int32": _torch.int32, "int64": _torch.int64,
    "float16": _torch.float16, "bfloat16": _torch.bfloat16,
    "float32": _torch.float32, "float64": _torch.float64,
    # torch's unsigned 16/32/64-bit types are recent and partial: the bits
    # come out as the signed type of the same width.
    "uint16": _torch.int16, "uint32": _torch.int32, "uint64": _torch.int64,
}


def _tensor(buf, nbytes, np_dtype, shape, dtype_name):
    name = dtype_name or np.dtype(np_dtype).name
    dt = _TORCH_DTYPES[name]
    if not nbytes:
        return _torch.empty(shape if shape is not None else (0,), dtype=dt)
    # frombuffer keeps buf (and through it the loader) alive.
    t = _torch.frombuffer(buf, dtype=dt)
    return t.view(shape) if shape is not None else t


class Loader(_NumpyLoader):
    """wharf.Loader yielding torch tensors; see wharf.Loader for arguments.

    device: None (CPU tensors over the ring) or a CUDA device; stream: the
    torch.cuda.Stream the copies go on (default: the current stream).
    """

    _tensors = staticmethod(_tensor)

    def __init__(self, index, *args, device=None, stream=None, **kwargs):
        super().__init__(index, *args, **kwargs)
        self.device = _torch.device(device) if device is not None else None
        if self.device is not None and self.device.type == "cpu":
            self.device = None
        self.stream = stream

    def __iter__(self):
        if self.device is None:
            yield from super().__iter__()
            return
        for b in super().__iter__():
            yield self._to_device(b)

    def _to_device(self, b):
        stream = self.stream or _torch.cuda.current_stream(self.device)
        with _torch.cuda.stream(stream):
            fields = tuple(t.to(self.device, non_blocking=True)
                           for t in b._fields())
        # The copy reads the ring: it must finish before the slot is reused.
        stream.synchronize()
        b.release()
        return fields
