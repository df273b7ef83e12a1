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
copy), and the lifetime rule is DataLoader's: a batch's tensors stay valid
and unchanged while anything refers to them, also after close(); keeping
more than held_batches batches at once makes the later ones copies (see
wharf.Loader).  The tensors are writable in form only: do not write into
them.

device="cuda" gives device tensors on `stream` (default: the current
stream).  When libwharf was built with CUDA (wharf/cuda.h), the ring is
pinned and the copy of the next batch runs on a side stream while the
current step computes; the tensors are the library's device buffers (no
copy), kept from reuse while referenced, for work enqueued on `stream`:
run the step on that stream (`with torch.cuda.stream(stream):`), or make
another stream wait for it first; the labels' int64 cast is made there
too.  A libwharf whose CUDA is broken (a driver too old for its runtime)
raises WharfError with the runtime's message.  Without CUDA in libwharf
(cuda_path == "copy") each batch is copied with a non-blocking .to() from
the unpinned ring, which waits for the copy before the slot goes back.

pin_memory=True (DataLoader's spelling): with device="cuda" the ring is
pinned already.  Without a device, when torch sees a GPU, each ring slot of
fixed-size batches is registered with CUDA (cudaHostRegister) the first
time it is handed out, so x.to("cuda", non_blocking=True) is an
asynchronous copy; with no GPU it does nothing and warns, as DataLoader
does.
"""

import ctypes

import numpy as np
import torch as _torch

import warnings

from . import Batch, Index, WharfError, decode  # noqa: F401
from . import Loader as _NumpyLoader
from . import _c, _hand_out, _lib, _raise, _raise_warned

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
    why).  Raises WharfError when libwharf's CUDA is there but broken (a
    driver too old for its runtime): falling back to copies would hide
    it."""
    if not getattr(_c, "wharf_has_cuda_api", False):
        return False, "libwharf predates wharf/cuda.h"
    rc = _c.wharf_cuda_available()
    if rc < 0:
        _raise(rc)
    if rc != 1:
        return False, (_c.wharf_last_error() or b"").decode()
    return True, ""


def _unpin(pinned):
    cudart = _torch.cuda.cudart()
    for addr in pinned:
        cudart.cudaHostUnregister(addr)
    del pinned[:]


def _release_device(holder, leased):
    """Gives a device batch back (holder.release_device): leased is (a
    copy of the C device batch, the stream of its last use)."""
    batch, stream = leased
    rc = _c.wharf_loader_release_device(holder.loader, batch, stream)
    if rc:
        holder.fail(rc)


class Loader(_NumpyLoader):
    """wharf.Loader yielding torch tensors; see wharf.Loader for arguments.

    device: None (CPU tensors over the ring) or a CUDA device; stream: the
    torch.cuda.Stream the batches are for (default: the current stream);
    cuda_buffers: device buffers the CUDA prefetch reads ahead into (at
    least 2; held_batches + 1 more are made for batches the loop keeps);
    pin_memory: see the module's documentation.  cuda_path says which way
    batches reach the device: "prefetch" (pinned ring, libwharf's copy
    stream), "copy" (.to() per batch), or None.
    """

    _tensors = staticmethod(_tensor)

    def __init__(self, index, *args, device=None, stream=None,
                 cuda_buffers=2, pin_memory=False, **kwargs):
        super().__init__(index, *args, **kwargs)
        self.device = _torch.device(device) if device is not None else None
        if self.device is not None and self.device.type == "cpu":
            self.device = None
        self.stream = stream
        self.cuda_path = None
        self.cuda_note = ""
        self.pin_memory = False
        if self.device is None:
            if pin_memory:
                self._pin_ring()
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
        copt.buffers = int(cuda_buffers) + self.held_batches + 1
        with _torch.cuda.device(self.device):
            _torch.cuda.init()
            rc = _c.wharf_loader_cuda_enable(self._handle(),
                                             ctypes.byref(copt))
        if rc:
            _raise(rc)
        _raise_warned()
        self.cuda_path = "prefetch"
        self.pin_memory = True
        self._holder.release_device = _release_device
        self._set_epoch_fn = "wharf_loader_device_set_epoch"
        self._save_fn = "wharf_loader_device_state_save"
        self._restore_fn = "wharf_loader_device_state_restore"

    def _stream(self):
        s = self.stream or _torch.cuda.current_stream(self.device)
        return s, ctypes.c_void_p(s.cuda_stream)

    def _pass_next(self):
        # One pass at a time, as wharf.Loader's (its __iter__).
        if self.cuda_path == "prefetch":
            return self._next_prefetch()
        b = self.next_batch()
        if b is not None and self.cuda_path == "copy":
            return self._to_device(b)
        return b

    def _to_device(self, b):
        stream, _ = self._stream()
        with _torch.cuda.stream(stream):
            fields = tuple(t.to(self.device, non_blocking=True)
                           for t in b._fields())
        # The copy reads the ring: it must finish before the slot is reused.
        stream.synchronize()
        return fields

    # -- pin_memory without a device ----------------------------------------

    def _pin_ring(self):
        if not _torch.cuda.is_available():
            warnings.warn("pin_memory=True, but torch sees no CUDA device: "
                          "batches are not pinned", UserWarning,
                          stacklevel=3)
            return
        self.pin_memory = True
        self._pinned = pinned = []
        # Not a method: the holder must not keep this Loader alive.
        self._holder.unpin = lambda: _unpin(pinned)

    def next_batch(self):
        b = super().next_batch()
        if b is not None and self.pin_memory and self.cuda_path is None \
                and not b.copied and b.data is not None \
                and not isinstance(b.data, list):
            addr = b.data.data_ptr()
            if addr not in self._pinned:
                # A slot's data sits at a fixed address and holds at most
                # batch_size samples: registered once, for good.
                one = b.data[0]
                size = self._opt.batch_size * one.element_size() * one.numel()
                err = _torch.cuda.cudart().cudaHostRegister(addr, size, 0)
                if int(err) == 0:
                    self._pinned.append(addr)
        return b

    # -- libwharf's CUDA prefetch -----------------------------------------

    def _next_prefetch(self):
        # As wharf.Loader.next_batch, with device buffers: a batch's buffer
        # goes back when nothing refers to its tensors; a loop that keeps
        # held_batches of them gets clones.  None at the epoch's end.
        hold = self._holder
        hold.drain()
        stream, sp = self._stream()
        ptr = ctypes.POINTER(_lib.DeviceBatch)()
        with _torch.cuda.device(self.device):
            rc = _c.wharf_loader_next_device(self._handle(), sp,
                                             ctypes.byref(ptr))
        if not self._came(rc):
            return None

        def build(b, lease):
            # Whatever reads the buffer here (the labels' cast, clones)
            # runs on the stream that waits for the copy, and that the
            # release is recorded on.
            with _torch.cuda.stream(stream):
                fields = self._device_fields(b, lease)
                if lease is None:
                    fields = tuple(t.clone() for t in fields)
            return fields

        return _hand_out(
            hold, ptr, lambda: self._must_copy(hold.dev_held), build,
            lambda b: _c.wharf_loader_release_device(hold.loader, b, sp),
            stream=sp)

    def _device_fields(self, b, keep):
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
            _DeviceArray(b.data, (n,) + tuple(shape), np_dt.str, keep),
            device=self.device)
        if name == "bfloat16":
            data = data.view(_torch.bfloat16)
        if dec.fields[0] == "input":
            return (data[:, 0], data[:, 1])
        labels = _torch.as_tensor(
            _DeviceArray(b.labels, (n,), "<i4", keep), device=self.device)
        # int64, as cross_entropy takes: a copy of n labels on the device.
        return (data, labels.long())
