"""wharf: libwharf's data loader for Python training loops.

    import wharf
    index = wharf.Index.build("train.idx", dir="/mnt/wharf/train")
    with wharf.Loader(index, batch_size=64, shuffle=True, num_workers=4,
                      decode=wharf.decode.array("float32", (3, 224, 224))
                      ) as loader:
        for epoch in range(10):
            loader.set_epoch(epoch)
            for x, y in loader:
                ...                      # x: (64, 3, 224, 224), y: labels

Batches are NumPy views of the loader's shared-memory ring: no sample is
copied.  Labels are int64 (what cross_entropy takes), a copy of the
batch's few int32 labels.  The rule for views: a batch's arrays are valid until the batch is
released, which happens when a loop takes the next batch, on set_epoch(),
Batch.release() or Loader.release(), and at Loader.close().  A loop left
early (break, next(iter(loader))) keeps its last batch until then.  After
that the memory holds another batch (or is unmapped: touching a view after
close() may crash the interpreter).  Keep data longer with .copy(), or take
batches with Loader.next_batch(), which holds them until you release them.
A loader dropped without close() stops its workers and unmaps its ring once
no view of it is left.

Reading and decoding run in forked C workers (see wharf.decode); a Python
callback in the workers is not offered on purpose.
"""

import atexit
import ctypes
import errno
import os
import weakref

import numpy as np

from . import _lib
from . import decode
from ._lib import LibraryNotFound

__all__ = ["Index", "Loader", "Batch", "WharfError", "LibraryNotFound",
           "decode", "library_path", "version"]

_c = _lib.load()
library_path = _c.wharf_path


def version():
    """The linked libwharf's version as (major, minor, patch)."""
    n = _c.wharf_version_number()
    return (n // 10000, n // 100 % 100, n % 100)


class WharfError(OSError):
    """A libwharf call failed; errno is the C error, str() its message."""


def _raise(rc, message=None):
    if message is None:
        message = _c.wharf_last_error()
    if isinstance(message, bytes):
        message = message.decode("utf-8", "replace")
    raise WharfError(-rc, message or _lib.strerror(rc))


def _path(p):
    return os.fsencode(p)


class Index:
    """A sample index (flat file, mapped read-only): files, offsets, lengths
    and labels.  Open one with Index(path) or make one with Index.build()."""

    def __init__(self, path, verify=False):
        h = ctypes.c_void_p()
        rc = _c.wharf_index_open(_path(path),
                                 _lib.WHARF_INDEX_VERIFY if verify else 0,
                                 ctypes.byref(h))
        if rc:
            _raise(rc)
        self._h = h
        self.path = os.fspath(path)
        self._loaders = weakref.WeakSet()  # _Holder of loaders on it

    @classmethod
    def build(cls, out, dir=None, list=None, files=None, record_bytes=None,
              stat=True, verify=False):
        """Writes an index to out and opens it.  Exactly one source:

        dir=D: every file under D in byte order of the path, labelled by its
        top-level subdirectory (ImageFolder); list=F: a file of "PATH [LABEL]"
        lines (stat=False leaves sizes unknown); files=[...] with
        record_bytes=N: each file cut into N-byte records.
        """
        given = [x is not None for x in (dir, list, files)]
        if sum(given) != 1:
            raise ValueError("Index.build needs exactly one of dir=, list=, "
                             "files=")
        if dir is not None:
            rc = _c.wharf_index_build_dir(_path(dir), _path(out))
        elif list is not None:
            rc = _c.wharf_index_build_list(_path(list), int(bool(stat)),
                                           _path(out))
        else:
            if not record_bytes or record_bytes <= 0:
                raise ValueError("files= needs record_bytes=")
            names = [_path(f) for f in files]
            arr = (ctypes.c_char_p * len(names))(*names)
            rc = _c.wharf_index_build_records(int(record_bytes), arr,
                                              len(names), _path(out))
        if rc:
            _raise(rc)
        return cls(out, verify=verify)

    def _handle(self):
        if not self._h:
            raise ValueError("index %s is closed" % self.path)
        return self._h

    def __len__(self):
        return _c.wharf_index_count(self._handle())

    @property
    def num_files(self):
        return _c.wharf_index_num_files(self._handle())

    @property
    def num_labels(self):
        return _c.wharf_index_num_labels(self._handle())

    def file_path(self, file):
        buf = ctypes.create_string_buffer(4096)
        rc = _c.wharf_index_path(self._handle(), file, buf, len(buf))
        if rc < 0:
            _raise(rc)
        return os.fsdecode(buf.value)

    def sample(self, i):
        """(path, offset, length or None, label or None) of sample i."""
        s = _lib.Sample()
        rc = _c.wharf_index_sample(self._handle(), i, ctypes.byref(s))
        if rc:
            _raise(rc)
        length = None if s.length == 2**64 - 1 else s.length
        return (self.file_path(s.file), s.offset, length,
                None if s.label < 0 else s.label)

    def close(self):
        if any(h.loader for h in self._loaders):
            raise WharfError(16, "index %s is used by an open loader"
                             % self.path)
        if self._h:
            _c.wharf_index_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_h", None):
            _c.wharf_index_close(self._h)
            self._h = None


class Batch:
    """One batch: views of a ring slot (see the module's rule for views).

    Unpacks as (data, labels), or (input, target) with the tokens decoder.
    epoch, index (batch number in the epoch), samples (index positions),
    labels, worker and skipped describe it.
    """

    __slots__ = ("_holder", "_dec", "_ptr", "epoch", "index", "count",
                 "skipped", "worker", "slot", "data", "labels", "samples",
                 "__weakref__")

    def __init__(self, loader, ptr, tensors):
        b = ptr.contents
        # The holder, not the Loader: a batch kept alone keeps the ring.
        self._holder = keep = loader._holder
        self._dec = dec = loader.decoder
        self._ptr = ptr
        self.epoch, self.index, self.count = b.epoch, b.index, b.count
        self.skipped, self.worker, self.slot = b.skipped, b.worker, b.slot
        n = b.count
        if b.sample_size:
            # A slot's arrays sit at fixed addresses, so the views of a
            # slot (for one batch length) are made once and handed out
            # again: the rule for views is the same either way.
            key = (b.data, n, b.sample_size)
            views = loader._views.get(key)
            if views is None:
                shape = dec.shape
                if shape is None:
                    shape = (b.sample_size // dec.np_dtype.itemsize,)
                views = (
                    _view(b.data, n * b.sample_size, dec.np_dtype, keep,
                          tensors, (n,) + tuple(shape), dec.dtype),
                    _view(b.labels, n * 4, np.int32, keep, tensors),
                    _view(b.samples, n * 8, np.uint64, keep, tensors))
                loader._views[key] = views
            self.data, labels, self.samples = views
            self.labels = _int64(labels)
            return
        self.labels = _int64(_view(b.labels, n * 4, np.int32, keep, tensors))
        self.samples = _view(b.samples, n * 8, np.uint64, keep, tensors)
        # Variable-size: one uint8 array per sample.
        offs = np.ctypeslib.as_array(b.offsets, (n + 1,)).copy()
        whole = _view(b.data, int(offs[-1]), np.uint8, keep, tensors)
        offs = offs.tolist()
        self.data = [whole[offs[k]:offs[k + 1]] for k in range(n)]

    @property
    def input(self):
        return self.data[:, 0]

    @property
    def target(self):
        return self.data[:, 1]

    def _fields(self):
        if self._dec.fields[0] == "input":
            return (self.input, self.target)
        return (self.data, self.labels)

    def __iter__(self):
        return iter(self._fields())

    def __getitem__(self, i):
        return self._fields()[i]

    def __len__(self):
        return self.count

    @property
    def released(self):
        return self._ptr is None

    def release(self):
        """Gives the slot back; the views are invalid from now on."""
        if self._ptr is not None:
            self._holder.release(self)


def _int64(labels):
    """Labels as int64, which losses such as cross_entropy take: a copy of
    a batch's few labels, so it stays valid after the batch is released."""
    if isinstance(labels, np.ndarray):
        return labels.astype(np.int64)
    return labels.long()


def _view(addr, nbytes, dtype, keep, tensors, shape=None, dtype_name=None):
    """A zero-copy array (or torch tensor) over nbytes at addr."""
    if not isinstance(addr, int):
        addr = ctypes.cast(addr, ctypes.c_void_p).value
    buf = (ctypes.c_char * nbytes).from_address(addr) if nbytes else \
        bytearray()
    if nbytes:
        buf._keep = keep  # the mapping outlives every view
    if tensors is not None:
        return tensors(buf, nbytes, dtype, shape, dtype_name)
    arr = np.frombuffer(buf, dtype=dtype)
    arr.flags.writeable = False
    return arr.reshape(shape) if shape is not None else arr


_open_loaders = weakref.WeakSet()  # the _Holder of each open loader


@atexit.register
def _close_all():
    # Workers die with the interpreter anyway (PR_SET_PDEATHSIG); closing
    # here also reaps them and leaves /dev/shm clean on a normal exit.
    for h in list(_open_loaders):
        h.close()


class _Holder:
    """Owns a C loader and its decoder; closes them when the last of its
    Loader, batches and views lets go, or on Loader.close().

    Views keep this alive, not the Loader: Loader -> view cache -> view ->
    Loader would be a cycle through ndarray.base, which the gc cannot see,
    so a Loader never closed would leak its workers and ring.  Hence no
    reference to the Loader here.
    """

    __slots__ = ("loader", "dec", "index", "batches", "__weakref__")

    def __init__(self, index):
        self.loader = None
        self.dec = None
        self.index = index  # the C loader borrows it
        self.batches = weakref.WeakSet()  # handed out, not released
        index._loaders.add(self)
        _open_loaders.add(self)

    def fail(self, rc):
        msg = _c.wharf_loader_error(self.loader) or _c.wharf_last_error()
        _raise(rc, msg)

    def release(self, b):
        ptr, b._ptr = b._ptr, None
        self.batches.discard(b)
        if self.loader:
            rc = _c.wharf_loader_release(self.loader, ptr)
            if rc:
                self.fail(rc)

    def close(self):
        """Stops the workers and unmaps the ring: every view is invalid."""
        for b in list(self.batches):
            b._ptr = None
        self.batches.clear()
        if self.loader:
            _c.wharf_loader_close(self.loader)
            self.loader = None
        if self.dec:
            _c.wharf_decoder_free(self.dec)
            self.dec = None
        _open_loaders.discard(self)

    def __del__(self):
        # Nothing is left to close after _close_all() at exit, when the
        # module's globals may already be gone.
        if self.loader or self.dec:
            self.close()


class Loader:
    """Reads an index's samples in batches with forked C workers.

    Arguments follow torch.utils.data.DataLoader where they overlap.
    rank/world_size default to $RANK/$WORLD_SIZE (or SLURM's); decode is a
    wharf.decode decoder (default raw bytes).  Iterating runs the current
    epoch from where it stands; a new iteration after an epoch ran to its
    end moves to the next epoch unless set_epoch() chose one.
    """

    _tensors = None  # wharf.torch sets a tensor maker
    # The C calls that know where the epoch stands (wharf.torch swaps in
    # the _device ones when batches go through CUDA).
    _set_epoch_fn = "wharf_loader_set_epoch"
    _save_fn = "wharf_loader_state_save"
    _restore_fn = "wharf_loader_state_restore"

    def __init__(self, index, batch_size=32, shuffle=False, seed=0,
                 num_workers=2, prefetch=2, drop_last=False, in_order=True,
                 rank=None, world_size=None, decode=None, even="pad",
                 skip_bad=False, timeout=None, sample_bytes=0, slot_bytes=0,
                 shm_dir=None):
        self._current = None
        self._views = {}  # (data address, count, sample size) -> views
        if not isinstance(index, Index):
            index = Index(index)
        self.index = index
        self._holder = _Holder(index)
        self.decoder = globals()["decode"].coerce(decode)
        if even not in ("pad", "drop"):
            raise ValueError("even must be 'pad' or 'drop'")
        opt = _lib.Options()
        _c.wharf_options_init(ctypes.byref(opt))
        opt.batch_size = int(batch_size)
        opt.num_workers = int(num_workers)
        opt.prefetch = int(prefetch)
        opt.shuffle = int(bool(shuffle))
        opt.drop_last = int(bool(drop_last))
        opt.in_order = int(bool(in_order))
        opt.even = _lib.WHARF_EVEN_PAD if even == "pad" else \
            _lib.WHARF_EVEN_DROP
        opt.rank = -1 if rank is None else int(rank)
        opt.world = -1 if world_size is None else int(world_size)
        opt.skip_bad = int(bool(skip_bad))
        opt.timeout_ms = 0 if timeout is None else int(timeout * 1000)
        opt.seed = int(seed) & (2**64 - 1)
        opt.sample_bytes = int(sample_bytes)
        opt.slot_bytes = int(slot_bytes)
        self._shm_dir = _path(shm_dir) if shm_dir else None
        opt.shm_dir = self._shm_dir
        dec = ctypes.c_void_p()
        rc = _c.wharf_decoder_new(self.decoder.spec.encode(),
                                  ctypes.byref(dec))
        if rc:
            _raise(rc)
        self._holder.dec = dec
        rc = _c.wharf_decoder_apply(dec, ctypes.byref(opt))
        if rc:
            _raise(rc)
        h = ctypes.c_void_p()
        rc = _c.wharf_loader_open(index._handle(), ctypes.byref(opt),
                                  ctypes.byref(h))
        if rc:
            _raise(rc)
        self._holder.loader = h
        self._opt = opt
        self._epoch = 0
        self._ended = False
        self._epoch_chosen = False

    # -- lifetime ---------------------------------------------------------

    @property
    def closed(self):
        return self._holder.loader is None

    def close(self):
        """Stops the workers and unmaps the ring: every view is invalid."""
        self._current = None
        self._views.clear()
        self._holder.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _handle(self):
        if self.closed:
            raise ValueError("the loader is closed")
        return self._holder.loader

    def _fail(self, rc):
        self._holder.fail(rc)

    # -- batches ----------------------------------------------------------

    def next_batch(self):
        """The next batch of the epoch, held until you release it; None at
        the end of the epoch."""
        h = self._handle()
        ptr = ctypes.POINTER(_lib.BatchC)()
        rc = _c.wharf_loader_next(h, ctypes.byref(ptr))
        while rc == -errno.EINTR:
            # A signal ended the wait so that its handler could run (^C
            # raises KeyboardInterrupt here); otherwise wait on.
            rc = _c.wharf_loader_next(h, ctypes.byref(ptr))
        if rc == _lib.WHARF_END:
            self._ended = True
            return None
        if rc:
            self._fail(rc)
        b = Batch(self, ptr, self._tensors)
        self._holder.batches.add(b)
        return b

    def release(self):
        """Releases the batch the loop handed out last (and invalidates its
        views); a loop does this itself when it takes the next one."""
        b, self._current = self._current, None
        if b is not None:
            b.release()

    def _start_pass(self):
        self._handle()
        if self._ended and not self._epoch_chosen:
            self.set_epoch(self._epoch + 1)
        self._epoch_chosen = False

    def __iter__(self):
        # No release when the loop is left early (GeneratorExit): the batch
        # handed out stays valid until the next loop, set_epoch(),
        # release() or close(), so one slot at most stays held.  A failure
        # here leaves nothing held: release() ran before next_batch().
        self._start_pass()
        while True:
            self.release()
            b = self.next_batch()
            if b is None:
                return
            self._current = b
            yield b

    def __len__(self):
        return _c.wharf_loader_num_batches(self._handle())

    def set_epoch(self, epoch):
        """Starts epoch `epoch` (the shuffle depends on seed and epoch).
        Batches read ahead for another epoch are dropped; the epoch the
        loader is at, before any of its batches was taken, keeps them."""
        self.release()
        rc = getattr(_c, self._set_epoch_fn)(self._handle(), int(epoch))
        if rc:
            self._fail(rc)
        self._epoch = int(epoch)
        self._ended = False
        self._epoch_chosen = True

    @property
    def epoch(self):
        return self._epoch

    @property
    def rank(self):
        return _c.wharf_loader_rank(self._handle())

    @property
    def world_size(self):
        return _c.wharf_loader_world(self._handle())

    # -- checkpoints ------------------------------------------------------

    def state_dict(self):
        """Where the epoch stands: every batch handed out counts as done."""
        st = _lib.State()
        st.size = ctypes.sizeof(st)
        rc = getattr(_c, self._save_fn)(self._handle(), ctypes.byref(st))
        if rc:
            self._fail(rc)
        return {name: getattr(st, name) for name, _ in st._fields_
                if name != "size"}

    def load_state_dict(self, state):
        """Continues from state_dict(): the next batch is the first one not
        handed out when it was saved."""
        st = _lib.State()
        st.size = ctypes.sizeof(st)
        for name, _ in st._fields_:
            if name != "size":
                setattr(st, name, int(state[name]))
        self.release()
        rc = getattr(_c, self._restore_fn)(self._handle(), ctypes.byref(st))
        if rc:
            self._fail(rc)
        self._epoch = st.epoch
        self._ended = False
        self._epoch_chosen = True

    # -- numbers ----------------------------------------------------------

    def stats(self):
        """Counters since open; wait_s is the data stall (time blocked in
        next), stall_share that over the time since open."""
        st = _lib.Stats()
        st.size = ctypes.sizeof(st)
        rc = _c.wharf_loader_stats(self._handle(), ctypes.byref(st))
        if rc:
            self._fail(rc)
        d = {name: getattr(st, name) for name, _ in st._fields_
             if name != "size"}
        d["wait_s"] = st.wait_ns / 1e9
        d["stall_share"] = st.wait_ns / st.open_ns if st.open_ns else 0.0
        d["worker_busy_s"] = [
            _c.wharf_loader_worker_busy_ns(self._handle(), w) / 1e9
            for w in range(max(st.num_workers, 1))]
        return d
