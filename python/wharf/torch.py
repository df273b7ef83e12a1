"""wharf.torch: the wharf loader yielding torch tensors.

    import wharf, wharf.torch
    loader = wharf.torch.Loader(index, batch_size=64, num_workers=4,
                                decode=wharf.decode.tokens("uint16", 1024))
    for x, y in loader:          # torch.int64 tensors (64, 1024)
        ...

With wharf.decode.jpeg(224) the tensors are images, uint8 or float32 as
the decoder's dtype says, (batch, 3, 224, 224) or (batch, 224, 224, 3) as
its layout says, decoded and augmented in the C workers.

Tensors share memory with the shared-memory ring (torch.frombuffer: no
copy), so the rule for views holds: a batch's tensors are valid until a
loop takes the next batch (or set_epoch(), release(), close()); .clone()
what you keep.  The tensors are writable in form only: do not write into
them.

device="cuda" gives device tensors on `stream` (default: the current
stream).  When libwharf was built with CUDA (wharf/cuda.h), the ring is
pinned and the copy of the next batch runs on a side stream while the
current step computes; the tensors are the library's device buffers (no
copy), valid until the loop takes the next batch, for work enqueued on
`stream`: run the step on that stream.  Without CUDA in libwharf
(cuda_path == "copy") each batch is copied with a non-blocking .to() from
the unpinned ring, which waits for the copy before the slot goes back.
"""

import ctypes

import numpy as np
import torch as _torch

from . import Batch, Index, WharfError, decode  # noqa: F401
from . import Loader as _NumpyLoader
from . import _c, _lib, _raise

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
    # frombuffer keeps buf (and through it the ring) alive.
    t = _torch.frombuffer(buf, dtype=dt)
    return t.view(shape) if shape is not None else t


class _DeviceArray:
    """Device memory described for torch.as_tensor (no copy)."""

    def __init__(self, ptr, shape, typestr, keep):
        self._keep = keep
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": typestr, "data": (ptr, True),
            "version": 2, "strides": None}


def _cuda_api_ready():
    """(True, "") when libwharf can prefetch to the device, else (False,
    why)."""
    if not getattr(_c, "wharf_has_cuda_api", False):
        return False, "libwharf predates wharf/cuda.h"
    if _c.wharf_cuda_available() != 1:
        return False, (_c.wharf_last_error() or b"").decode()
    return True, ""


class Loader(_NumpyLoader):
    """wharf.Loader yielding torch tensors; see wharf.Loader for arguments.

    device: None (CPU tensors over the ring) or a CUDA device; stream: the
    torch.cuda.Stream the batches are for (default: the current stream);
    cuda_buffers: device buffers of the CUDA prefetch (at least 2).
    cuda_path says which way batches reach the device: "prefetch" (pinned
    ring, libwharf's copy stream), "copy" (.to() per batch), or None.
    """

    _tensors = staticmethod(_tensor)

    def __init__(self, index, *args, device=None, stream=None,
                 cuda_buffers=2, **kwargs):
        super().__init__(index, *args, **kwargs)
        self.device = _torch.device(device) if device is not None else None
        if self.device is not None and self.device.type == "cpu":
            self.device = None
        self.stream = stream
        self.cuda_path = None
        self.cuda_note = ""
        self._dev_held = None
        if self.device is None:
            return
        if self.device.type != "cuda":
            raise ValueError("device must be cpu or cuda, not %s" %
                             self.device)
        ok, self.cuda_note = _cuda_api_ready()
        if not ok:
            self.cuda_path = "copy"
            return
        copt = _lib.CudaOptions()
        _c.wharf_cuda_options_init(ctypes.byref(copt))
        copt.buffers = int(cuda_buffers)
        with _torch.cuda.device(self.device):
            _torch.cuda.init()
            rc = _c.wharf_loader_cuda_enable(self._handle(),
                                             ctypes.byref(copt))
        if rc:
            _raise(rc)
        self.cuda_path = "prefetch"
        self._set_epoch_fn = "wharf_loader_device_set_epoch"
        self._save_fn = "wharf_loader_device_state_save"
        self._restore_fn = "wharf_loader_device_state_restore"

    def _stream(self):
        s = self.stream or _torch.cuda.current_stream(self.device)
        return s, ctypes.c_void_p(s.cuda_stream)

    def __iter__(self):
        if self.cuda_path == "prefetch":
            yield from self._iter_prefetch()
        elif self.cuda_path == "copy":
            for b in super().__iter__():
                yield self._to_device(b)
        else:
            yield from super().__iter__()

    def _to_device(self, b):
        stream, _ = self._stream()
        with _torch.cuda.stream(stream):
            fields = tuple(t.to(self.device, non_blocking=True)
                           for t in b._fields())
        # The copy reads the ring: it must finish before the slot is reused.
        stream.synchronize()
        b.release()
        return fields

    # -- libwharf's CUDA prefetch -----------------------------------------

    def release(self):
        if self._dev_held is not None and not self.closed:
            ptr, self._dev_held = self._dev_held, None
            rc = _c.wharf_loader_release_device(self._handle(), ptr,
                                                self._stream()[1])
            if rc:
                self._fail(rc)
        super().release()

    def close(self):
        self._dev_held = None
        super().close()

    def _iter_prefetch(self):
        # As wharf.Loader.__iter__: a loop left early keeps its batch until
        # the next release point.  A batch that cannot be shown as tensors
        # is given back at once, not held by a loop that cannot go on.
        self._start_pass()
        _, sp = self._stream()
        while True:
            self.release()
            ptr = ctypes.POINTER(_lib.DeviceBatch)()
            with _torch.cuda.device(self.device):
                rc = _c.wharf_loader_next_device(self._handle(), sp,
                                                 ctypes.byref(ptr))
            if rc == _lib.WHARF_END:
                self._ended = True
                return
            if rc:
                self._fail(rc)
            self._dev_held = ptr
            try:
                fields = self._device_fields(ptr.contents)
            except BaseException:
                self.release()
                raise
            yield fields

    def _device_fields(self, b):
        dec = self.decoder
        n = b.count
        if not b.sample_size:
            raise WharfError(22, "variable-size samples cannot go to the "
                             "device as one tensor: use a fixed-size "
                             "decoder")
        name = dec.dtype
        np_dt = dec.np_dtype
        shape = dec.shape or (b.sample_size // np_dt.itemsize,)
        data = _torch.as_tensor(
            _DeviceArray(b.data, (n,) + tuple(shape), np_dt.str,
                         self._holder),
            device=self.device)
        if name == "bfloat16":
            data = data.view(_torch.bfloat16)
        if dec.fields[0] == "input":
            return (data[:, 0], data[:, 1])
        labels = _torch.as_tensor(
            _DeviceArray(b.labels, (n,), "<i4", self._holder),
            device=self.device)
        # int64, as cross_entropy takes: a copy of n labels on the device.
        return (data, labels.long())
