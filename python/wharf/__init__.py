"""wharf: libwharf's data loader for Python training loops.

    import wharf
    index = wharf.Index.build("train.idx", dir="/mnt/wharf/train")
    with wharf.Loader(index, batch_size=64, shuffle=True, num_workers=4,
                      decode=wharf.decode.array("float32", (3, 224, 224))
                      ) as loader:
        for epoch in range(10):
            for x, y in loader:          # each for is a full epoch
                ...                      # x: (64, 3, 224, 224), y: labels

Batches are NumPy views of the loader's shared-memory ring: no sample is
copied.  Labels are int64 (what cross_entropy takes), a copy of the
batch's few int32 labels.  The lifetime rule is DataLoader's: a batch stays
valid and unchanged as long as anything refers to it (the batch, an array,
a view or slice of one), also after close() and after a with block; its
ring slot goes back when the last reference dies.  A kept batch holds only
that slot (in /dev/shm): close(), the end of the with block, or dropping
the Loader lets go of the workers and of every file on the dataset's
filesystem, so a wharf mount there can be unmounted while the last batch
is still referenced (a variable, a notebook, a traceback).  Code that
holds more than held_batches (1: the loop's current batch) as it asks for
the next gets that one as a copy, so the workers keep their slots: counted
in stats()["copied_batches"], with one warning.

Each iter(loader) is a full pass: the epoch set_epoch() named, else the
next one (a pass left early is not continued; state_dict() and
load_state_dict() resume a cut epoch).  One pass is live at a time, as
with DataLoader: a new iter() ends the one before, which raises
RuntimeError if it is used again.

A Loader belongs to the process that made it: in a process forked later
(a DataLoader worker) its calls raise WharfError (EPERM) saying to make one
in each process, and the parent's loader goes on untouched.

The library's warnings (a damaged tar shard kept with partial=True, a
global shuffle larger than a wharf mount's cache) are Python warnings of
category WharfWarning, so that warnings.filterwarnings can keep, silence
or raise them; its error messages also go to logging.getLogger("wharf").

Reading and decoding run in forked C workers (see wharf.decode); a Python
callback in the workers is not offered on purpose.
"""

import atexit
import ctypes
import errno
import glob as _glob
import logging
import os
import sys
import threading
import warnings
import weakref

import numpy as np

from . import _lib
from . import decode
from ._lib import LibraryNotFound

__all__ = ["Index", "Loader", "Batch", "WharfError", "WharfWarning",
           "LibraryNotFound", "decode", "library_path", "version",
           "__version__"]

_c = _lib.load()
library_path = _c.wharf_path


def version():
    """The linked libwharf's version as (major, minor, patch)."""
    n = _c.wharf_version_number()
    return (n // 10000, n // 100 % 100, n % 100)


# The package ships with its library: one version for both.
__version__ = "%d.%d.%d" % version()


class WharfError(OSError):
    """A libwharf call failed; errno is the C error, str() its message."""


class WharfWarning(UserWarning):
    """A warning from libwharf (its log function's WHARF_LOG_WARN): the
    category to name in warnings.filterwarnings."""


def _outside():
    """The stacklevel for warnings.warn, called in the function that
    warns, that names the first caller outside this package: the user's
    line, however deep the package's own calls go."""
    here = os.path.dirname(os.path.abspath(__file__))
    f, level = sys._getframe(1), 1
    while f is not None and \
            os.path.dirname(os.path.abspath(f.f_code.co_filename)) == here:
        f, level = f.f_back, level + 1
    return level


_logger = logging.getLogger("wharf")
# A warning that a filter turned into an exception, raised in the C call's
# callback: ctypes would only print it there, so the binding raises it once
# the call is back (_raise_warned), on the thread that made the call.
_warned = threading.local()


def _on_log(level, msg, arg):
    """libwharf's log function: called on the thread that logs (ctypes
    takes the GIL), from inside a C call."""
    text = (msg or b"").decode("utf-8", "replace")
    try:
        if level == _lib.WHARF_LOG_WARN:
            warnings.warn(text, WharfWarning, stacklevel=_outside())
        elif level == _lib.WHARF_LOG_ERROR:
            _logger.error("%s", text)
        elif level == _lib.WHARF_LOG_INFO:
            _logger.info("%s", text)
        else:
            _logger.debug("%s", text)
    except BaseException as e:  # noqa: B902 - must not unwind through C
        pending = getattr(_warned, "errors", None)
        if pending is None:
            pending = _warned.errors = []
        pending.append(e)


def _raise_warned():
    """Raises what a warning filter made of a C warning during the last
    call (warnings.simplefilter("error")), once."""
    pending = getattr(_warned, "errors", None)
    if pending:
        first = pending[0]
        del pending[:]
        raise first


# Kept for the life of the process: C holds the pointer.  Installed once,
# at import, before any loader runs (wharf_log_set_func is not safe against
# a message logged at the same time); given back to stderr at exit, after
# the loaders' own exit handler (atexit runs the last registered first).
_log_func = _lib.LogFunc(_on_log)


@atexit.register
def _log_to_stderr():
    _c.wharf_log_set_func(_lib.LogFunc(), None)


_c.wharf_log_set_func(_log_func, None)


def _raise(rc, message=None):
    # The call's error is what it raises: a warning a filter made an error
    # during the same call goes with it, not into a later call.
    del getattr(_warned, "errors", [])[:]
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
        self._h = None
        h = ctypes.c_void_p()
        rc = _c.wharf_index_open(_path(path),
                                 _lib.WHARF_INDEX_VERIFY if verify else 0,
                                 ctypes.byref(h))
        if rc:
            _raise(rc)
        self._h = h
        self._closed = False
        self.path = os.fspath(path)
        self._loaders = weakref.WeakSet()  # _Holder of loaders on it

    @classmethod
    def build(cls, out, dir=None, list=None, files=None, record_bytes=None,
              samples=None, tar=None, root=None, stat=True, verify=False,
              label_field=None, partial=False):
        """Writes an index to out and opens it.  Exactly one source:

        dir=D: every file under D in byte order of the path, labelled by its
        top-level subdirectory (ImageFolder); list=F: a file of "PATH [LABEL]"
        lines, or of "PATH OFFSET LENGTH [LABEL]" lines after a first line
        "#wharf-list offsets" (stat=False leaves sizes unknown and offsets
        unchecked); files=[...] with record_bytes=N: each file cut into
        N-byte records; samples=iterable of (path, offset, length, label)
        tuples, samples inside any container (label None or -1 for none,
        length None for "to the end of the file", as Index.sample() gives
        them), streamed to disk as they come, and a fifth element, when
        present, the sample's fields: (name, offset, length) tuples (as
        Index.fields() gives them); tar=[...]: WebDataset tar shards (paths
        or glob patterns), one sample per key, its members as fields, the
        label from the field label_field (default "cls", "" for none), a
        damaged shard failing the build unless partial=True (the samples
        before the damage kept, with a warning).  Relative paths of
        samples= and tar= are resolved against root (default: the current
        directory).
        """
        given = [x is not None for x in (dir, list, files, samples, tar)]
        if sum(given) != 1:
            raise ValueError("Index.build needs exactly one of dir=, list=, "
                             "files=, samples=, tar=")
        if (label_field is not None or partial) and tar is None:
            raise ValueError("label_field= and partial= go with tar=")
        if dir is not None:
            rc = _c.wharf_index_build_dir(_path(dir), _path(out))
        elif list is not None:
            rc = _c.wharf_index_build_list(_path(list), int(bool(stat)),
                                           _path(out))
        elif samples is not None:
            rc = cls._build_samples(out, samples, root)
        elif tar is not None:
            rc = cls._build_tar(out, tar, root, label_field, partial)
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

    @staticmethod
    def _build_samples(out, samples, root):
        """samples= through the C builder: one call per sample, so memory
        stays flat however long the iterable is.  Returns 0 or raises."""
        b = ctypes.c_void_p()
        rc = _c.wharf_index_builder_new(
            _path(out), None if root is None else _path(root),
            ctypes.byref(b))
        if rc:
            _raise(rc)
        try:
            for sample in samples:
                path, offset, length, label = sample[:4]
                fields = sample[4] if len(sample) > 4 else ()
                if length is None:
                    length = _lib.WHARF_LENGTH_UNKNOWN
                if label is None:
                    label = -1
                if offset < 0 or length < 0:
                    raise ValueError("sample (%r, %r, %r): offset and "
                                     "length must be >= 0"
                                     % (path, offset, length))
                rc = _c.wharf_index_builder_add(b, _path(path), int(offset),
                                                int(length), int(label))
                if rc:
                    _raise(rc)
                for name, foff, flen in fields:
                    rc = _c.wharf_index_builder_field(
                        b, str(name).encode(), int(foff), int(flen))
                    if rc:
                        _raise(rc)
            rc = _c.wharf_index_builder_finish(b)
            if rc:
                _raise(rc)
        finally:
            _c.wharf_index_builder_free(b)
        return 0

    @staticmethod
    def _build_tar(out, tar, root, label_field, partial):
        """tar= through wharf_index_build_tar.  Returns its code."""
        if isinstance(tar, (str, bytes, os.PathLike)):
            tar = [tar]
        names = []
        for t in tar:
            t = os.fspath(t)
            pattern = os.fsdecode(t)
            if any(c in pattern for c in "*?["):
                where = os.path.join(os.fspath(root), pattern) if root \
                    else pattern
                found = sorted(_glob.glob(where))
                if not found:
                    raise FileNotFoundError(
                        errno.ENOENT, "no shard matches %r" % pattern)
                if root:
                    found = [os.path.relpath(f, os.fspath(root))
                             for f in found]
                names += [_path(f) for f in found]
            else:
                names.append(_path(t))
        if not names:
            raise ValueError("tar= names no shard")
        o = _lib.TarOptions()
        _c.wharf_tar_options_init(ctypes.byref(o))
        o.partial = int(bool(partial))
        o.root = None if root is None else _path(root)
        o.label_field = None if label_field is None else \
            str(label_field).encode()
        arr = (ctypes.c_char_p * len(names))(*names)
        rc = _c.wharf_index_build_tar(arr, len(names), ctypes.byref(o),
                                      _path(out))
        if not rc:
            _raise_warned()  # a failure's own error comes first
        return rc

    def fields(self, i):
        """The fields of sample i, [(name, offset, length)...] in archive
        order: the members of a WebDataset key (tar=), [] in an index
        without fields."""
        h = self._handle()
        f = _lib.Field()
        out = []
        for k in range(_c.wharf_index_num_fields(h, i)):
            rc = _c.wharf_index_field(h, i, k, ctypes.byref(f))
            if rc:
                _raise(rc)
            out.append((f.name.decode("utf-8", "surrogateescape"),
                        f.offset, f.length))
        return out

    def _handle(self):
        if self._closed:
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

    @property
    def classes(self):
        """Class names by label (the class folders of an index built with
        dir=, as ImageFolder's classes), or None for other indexes."""
        h = self._handle()
        # An index without names answers None for label 0: no walk over
        # labels that may number 2^31.
        if _c.wharf_index_class_name(h, 0) is None:
            return None
        names = [_c.wharf_index_class_name(h, k)
                 for k in range(_c.wharf_index_num_labels(h))]
        if any(n is None for n in names):
            return None
        return [os.fsdecode(n) for n in names]

    @property
    def class_to_idx(self):
        """{class name: label}, as ImageFolder's; None without classes."""
        names = self.classes
        return None if names is None else {n: k for k, n in
                                           enumerate(names)}

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
        """Closes (unmaps) the index.  A loader on it must be closed first;
        batches of closed loaders that are still referenced do not need
        the index, so they do not keep it (nor a mount it lies on)."""
        if any(h.loader and not h.stopped for h in self._loaders):
            raise WharfError(16, "index %s is used by an open loader: close "
                             "the loader first" % self.path)
        self._closed = True
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
    """One batch.  Unpacks as (data, labels), or (input, target) with the
    tokens decoder.  epoch, index (batch number in the epoch), samples
    (index positions), labels, worker and skipped describe it.

    data views the ring (no copy) and stays valid while anything refers to
    it; labels and samples are copies.  copied says whether data is a copy
    (the loop held more than held_batches batches when this one came).
    """

    __slots__ = ("_dec", "epoch", "index", "count", "skipped", "worker",
                 "slot", "data", "labels", "samples", "copied",
                 "__weakref__")

    def __init__(self, loader, b, tensors, keep):
        """b: the C batch (a copy of the struct); keep: the lease every
        view keeps alive, or None for a copied batch (its views are
        copies: the caller gives the slot back once they are made)."""
        self._dec = dec = loader.decoder
        self.epoch, self.index, self.count = b.epoch, b.index, b.count
        self.skipped, self.worker, self.slot = b.skipped, b.worker, b.slot
        self.copied = copy = keep is None
        n = b.count
        self.labels = _copy_of(b.labels, n, np.int32, tensors, np.int64)
        self.samples = _copy_of(b.samples, n, np.uint64, tensors)
        if b.sample_size:
            shape = dec.shape
            if shape is None:
                shape = (b.sample_size // dec.np_dtype.itemsize,)
            data = _view(b.data, n * b.sample_size, dec.np_dtype, keep,
                         tensors, (n,) + tuple(shape), dec.dtype)
            self.data = _clone(data) if copy else data
        else:
            # Variable-size: one uint8 array per sample.
            offs = _copy_of(b.offsets, n + 1, np.uint64, None).tolist()
            whole = _view(b.data, offs[-1], np.uint8, keep, tensors)
            if copy:
                whole = _clone(whole)
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
        return self.data is None

    def release(self):
        """Drops this batch's own reference to its slot; the slot goes back
        once no view taken from the batch is left either."""
        self.data = None


def _address(p):
    return p if isinstance(p, int) else ctypes.cast(p, ctypes.c_void_p).value


def _copy_of(addr, n, dtype, tensors, to=None):
    """A copy of n values at addr (as dtype `to` when given): they outlive
    the slot."""
    if not n:
        arr = np.empty(0, to or dtype)
    else:
        item = np.dtype(dtype).itemsize
        raw = (ctypes.c_char * (n * item)).from_address(_address(addr))
        arr = np.frombuffer(raw, dtype).astype(to or dtype)
    if tensors is None:
        return arr
    # torch has no uint64: the bits as int64, as the ring's views had.
    return _torch_from_numpy(arr.view(np.int64) if arr.dtype == np.uint64
                             else arr)


def _torch_from_numpy(arr):
    import torch
    return torch.from_numpy(arr)


def _clone(x):
    return x.copy() if isinstance(x, np.ndarray) else x.clone()


def _view(addr, nbytes, dtype, keep, tensors, shape=None, dtype_name=None):
    """A zero-copy array (or torch tensor) over nbytes at addr; `keep`
    (a _Lease) lives as long as the array or anything made from it."""
    nbytes = int(nbytes)
    buf = (ctypes.c_char * nbytes).from_address(_address(addr)) if nbytes \
        else bytearray()
    if nbytes and keep is not None:
        buf._keep = keep
    if tensors is not None:
        return tensors(buf, nbytes, dtype, shape, dtype_name)
    arr = np.frombuffer(buf, dtype=dtype)
    arr.flags.writeable = False
    return arr.reshape(shape) if shape is not None else arr


class _Lease:
    """Keeps one ring slot (or device buffer) from reuse while any view of
    it lives.  It is made unarmed, for the views being built to refer to,
    and armed last, once nothing can fail: only an armed lease gives its
    slot back, so a batch whose construction failed (^C, MemoryError) is
    given back once, by the code that was building it, never again by
    this lease's death.  It holds a copy of the C batch: the slot and
    generation it names refuse a late release after the slot went out
    again.  An armed lease's death queues the slot; the loader gives it
    back at its next call (a finalizer may run on any thread, so it only
    appends to a list, atomic; the C loader is called from the loader's own
    calls).
    """

    __slots__ = ("_holder", "_batch", "_device", "armed")

    def __init__(self, holder, batch, device=False):
        self._holder = holder
        self._batch = batch
        self._device = device
        self.armed = False

    def arm(self):
        # No call and no loop in here: Python delivers a signal's
        # exception (^C) only at those, so the count and the flag change
        # together.
        if self._device:
            self._holder.dev_held += 1
        else:
            self._holder.held += 1
        self.armed = True

    def __del__(self):
        if not self.armed:
            return
        h = self._holder
        (h.dev_gone if self._device else h.gone).append(self._batch)
        if h.stopped:
            h.collect()


def _hand_out(holder, ptr, must_copy, build, release, stream=None):
    """What build(b, lease) makes of the batch C handed out at ptr: b a
    copy of the struct (ptr's is the loader's, reused when its slot goes
    out again), lease the _Lease its views keep, or None when must_copy()
    says the batch is a copy (build makes copies).  The slot, or device
    buffer with a stream, goes back exactly once: through the lease, armed
    last, when nothing can fail any more; or here, by release(struct), at
    once for a copy or when anything failed on the way (^C, MemoryError),
    what build made so far being garbage."""
    lease = None
    given = False
    try:
        b = ptr._type_.from_buffer_copy(ptr.contents)
        if not must_copy():
            lease = _Lease(holder, b if stream is None else (b, stream),
                           device=stream is not None)
        item = build(b, lease)
        if lease is None:
            rc = release(b)
            given = True
            if rc:
                holder.fail(rc)
        else:
            lease.arm()
        return item
    except BaseException:
        if not given and not (lease is not None and lease.armed):
            # C refuses (-EINVAL) a release that went through just before
            # the exception: it names the hand-out by its generation, so
            # this gives back nothing else.
            release(ptr)
        raise


class _Pass:
    """One iter(loader): its batches until the epoch's end, or until a
    later iter() over the same loader ends it."""

    __slots__ = ("_loader", "_state", "__weakref__")

    def __init__(self, loader):
        self._loader = loader
        self._state = "live"  # "done" at the epoch's end, "ended"

    def _end(self):
        if self._state == "live":
            self._state = "ended"

    def __iter__(self):
        return self

    def __next__(self):
        if self._state == "ended":
            raise RuntimeError(
                "this iterator over a wharf.Loader was ended by a later "
                "iter() of the same loader, which started the next pass: "
                "one pass is live at a time, as with DataLoader (use the "
                "newest iterator, or a Loader for each pass you keep)")
        if self._state == "done":
            raise StopIteration
        b = self._loader._pass_next()
        if b is None:
            self._state = "done"
            raise StopIteration
        return b


_open_loaders = weakref.WeakSet()  # the _Holder of each open loader


@atexit.register
def _close_all():
    # Workers die with the interpreter anyway (they watch it); stopping
    # them here also reaps them.  The rings stay mapped until the process
    # ends: a later exit handler may still read a batch.
    for h in list(_open_loaders):
        h.close(final=False)


class _Holder:
    """Owns a C loader and its decoder.  Leases (one per batch handed out
    without a copy) count what the caller still holds; close() stops the
    workers at once and unmaps the ring when the last lease is gone.

    Views keep this alive, not the Loader: Loader -> view -> Loader would
    be a cycle through ndarray.base, which the gc cannot see, so a Loader
    never closed would leak its workers and ring.  Hence no reference to
    the Loader here.
    """

    __slots__ = ("loader", "dec", "index", "own_index", "held", "dev_held",
                 "gone", "dev_gone", "release_device", "stopped", "unpin",
                 "pid", "__weakref__")

    def __init__(self, index, own_index=False):
        self.pid = os.getpid()  # the C loader's process: see foreign()
        self.loader = None
        self.dec = None
        self.index = index  # the C loader borrows it until stopped
        self.own_index = own_index  # opened by the Loader from a path
        self.held = 0  # host slots the caller holds (leases alive)
        self.dev_held = 0  # device buffers likewise
        self.gone = []  # slots whose lease died, not given back yet
        self.dev_gone = []
        # wharf.torch: gives a device batch back, (holder, ptr); a function
        # of the holder, not a Loader's method, so that the holder does not
        # keep its Loader alive (the Loader's death closes it).
        self.release_device = None
        self.stopped = False
        self.unpin = None  # wharf.torch: undoes pin_memory before unmap
        index._loaders.add(self)
        _open_loaders.add(self)

    def foreign(self):
        """True in a process forked after the loader was made: its slots,
        workers and ring are the parent's, never given back from here."""
        return os.getpid() != self.pid

    def fail(self, rc):
        # A call refused in a forked child says so, whatever stopped the
        # parent's loader before the fork.
        msg = None if rc == -errno.EPERM else \
            _c.wharf_loader_error(self.loader)
        _raise(rc, msg or _c.wharf_last_error())

    def give_back(self, batch):
        rc = _c.wharf_loader_release(self.loader, batch)
        if rc:
            self.fail(rc)

    def drain(self):
        """Gives back the slots no view refers to any more."""
        give = self.loader and not self.foreign()
        while self.gone:
            batch = self.gone.pop()
            self.held -= 1
            if give:
                self.give_back(batch)
        while self.dev_gone:
            batch = self.dev_gone.pop()
            self.dev_held -= 1
            if give:
                self.release_device(self, batch)

    def collect(self):
        """After close(): unmaps once nothing is held."""
        self.drain()
        if not self.held and not self.dev_held:
            self.close()

    def close(self, final=True):
        """Stops the workers and lets go of every file the loader has open
        on the dataset's filesystem (so that a mount there can be
        unmounted), closing the index when the Loader opened it; unmaps the
        ring (and frees the decoder) now if nothing is held, else when the
        last view dies.  final=False does not unmap."""
        if self.loader and not self.stopped:
            _c.wharf_loader_stop(self.loader)
            self.stopped = True
        if self.index is not None and (self.stopped or not self.loader):
            # The C loader reads it no more: the batches kept (which keep
            # this holder) must not keep it mapped, nor a mount it lies on.
            if self.own_index:
                self.index.close()
            self.index = None
        _open_loaders.discard(self)
        if final:
            self.drain()
            if not self.held and not self.dev_held:
                self._free()

    def _free(self):
        if self.loader:
            if self.unpin and not self.foreign():
                self.unpin()
            _c.wharf_loader_close(self.loader)
            self.loader = None
        if self.dec:
            _c.wharf_decoder_free(self.dec)
            self.dec = None

    def __del__(self):
        # No lease is left (each refers to this), so nothing is held.
        # After _close_all() at exit the module's globals may be gone.
        if self.loader or self.dec:
            self._free()


# DataLoader's arguments that wharf has no use for: why, and the wharf way.
_REFUSED = {
    "sampler": "wharf orders the samples itself: shuffle=, seed= (or "
    "generator=) and rank=/world_size= do what RandomSampler and "
    "DistributedSampler do; for a subset or another order, build an index "
    "of those samples (wharf.Index.build(out, list=...))",
    "batch_sampler": "wharf makes the batches itself from batch_size=, "
    "shuffle=, drop_last= and rank=/world_size=; for another grouping, "
    "build an index in the order you want and use shuffle=False",
    "collate_fn": "the C workers write each batch in place, there is no "
    "list of samples to collate; change a finished batch in your loop "
    "(for x, y in loader: x = f(x)) or decode in the workers with a "
    "wharf.decode decoder or plug-in",
    "worker_init_fn": "the workers are C processes that run no Python; "
    "per-worker setup belongs in a decode plug-in (wharf.decode.plugin) "
    "or the C API's worker_init",
}


def _dataloader_args(kw, seed):
    """Takes DataLoader's keywords out of kw: {option: value} with wharf's
    meaning, or a ValueError that says why not and the wharf way."""
    out = {}
    for name, why in _REFUSED.items():
        if kw.pop(name, None) is not None:
            raise ValueError("%s= is not supported: %s" % (name, why))
    # Workers are forked C processes that never run Python: the reasons
    # for a spawn context (CUDA or threads in the parent) do not apply.
    ctx = kw.pop("multiprocessing_context", None)
    if ctx is not None and str(getattr(ctx, "_name", ctx)) not in (
            "fork", "spawn", "forkserver"):
        raise ValueError("multiprocessing_context=%r: not a start method"
                         % (ctx,))
    if "persistent_workers" in kw:
        out["persistent"] = bool(kw.pop("persistent_workers"))
    gen = kw.pop("generator", None)
    if gen is not None:
        if not hasattr(gen, "initial_seed"):
            raise ValueError("generator= takes a torch.Generator (its "
                             "initial_seed() becomes seed=)")
        if seed not in (0, gen.initial_seed()):
            raise ValueError("seed=%d and generator= (seed %d) disagree: "
                             "give one" % (seed, gen.initial_seed()))
        out["seed"] = gen.initial_seed()
    if kw:
        raise TypeError("unknown argument%s %s (wharf.Loader takes "
                        "DataLoader's where they mean something here)"
                        % ("s" if len(kw) > 1 else "",
                           ", ".join(sorted(kw))))
    return out


def _shuffle_mode(shuffle):
    """wharf_options.shuffle for shuffle=: False, True or "shards"."""
    if isinstance(shuffle, str):
        if shuffle != "shards":
            raise ValueError('shuffle=%r: give True, False or "shards"'
                             % shuffle)
        return _lib.WHARF_SHUFFLE_SHARDS
    return int(bool(shuffle))


class Loader:
    """Reads an index's samples in batches with forked C workers.

    Arguments follow torch.utils.data.DataLoader where they overlap:
    batch_size, shuffle, num_workers, drop_last, timeout (seconds; 0 or
    None: none), prefetch_factor (batches read ahead per worker, also
    spelled prefetch), persistent_workers (default True: workers live
    across epochs), generator (its initial_seed() is the seed),
    multiprocessing_context (accepted; the workers run no Python) and, in
    wharf.torch, pin_memory.  sampler, batch_sampler, collate_fn and
    worker_init_fn are refused with the wharf way to do the same.

    shuffle is False (index order), True (a global shuffle keyed by seed
    and epoch) or "shards": the shard-aware order for data larger than a
    mount's cache.  A shard is a run of consecutive samples of one file
    (a tar shard, a record file); the shards go in an order keyed by seed
    and epoch, each rank takes a consecutive range of that order (whole
    shards, but for one split at each range's end) and reads the samples
    of shard_window shards (default 4) at a time in a shuffled order, so
    that a mount streams each shard once per epoch when its cache holds
    about three windows of shards.  Deterministic in (seed, epoch, rank,
    world_size) and resumable with state_dict() like the global order;
    with shard sizes that differ, even="pad" repeats a rank's last sample
    where it has one fewer and even="drop" leaves the longer ranks' last
    sample out.

    index is an Index or the path of an index file; rank/world_size
    default to $RANK/$WORLD_SIZE (or SLURM's); decode is a wharf.decode
    decoder (default raw bytes); held_batches is how many batches your code
    may hold (the loop's current one counts) when it asks for the next,
    without copies: each is one more ring slot.
    """

    _tensors = None  # wharf.torch sets a tensor maker
    # The C calls that know where the epoch stands (wharf.torch swaps in
    # the _device ones when batches go through CUDA).
    _set_epoch_fn = "wharf_loader_set_epoch"
    _save_fn = "wharf_loader_state_save"
    _restore_fn = "wharf_loader_state_restore"

    def __init__(self, index, batch_size=32, shuffle=False, seed=0,
                 num_workers=2, prefetch=None, drop_last=False,
                 in_order=True, rank=None, world_size=None, decode=None,
                 even="pad", skip_bad=False, timeout=None, sample_bytes=0,
                 slot_bytes=0, shm_dir=None, held_batches=1,
                 prefetch_factor=None, pin_memory=False, shard_window=None,
                 **dataloader):
        if pin_memory and self._tensors is None:
            raise ValueError("pin_memory= is for torch tensors: use "
                             "wharf.torch.Loader (wharf.Loader gives NumPy "
                             "arrays)")
        if batch_size is None:
            raise ValueError("batch_size=None (one sample at a time) is not "
                             "supported: wharf hands out batches; use "
                             "batch_size=1 and take x[0]")
        if prefetch is not None and prefetch_factor is not None and \
                prefetch != prefetch_factor:
            raise ValueError("prefetch=%d and prefetch_factor=%d: give one"
                             % (prefetch, prefetch_factor))
        prefetch = prefetch if prefetch is not None else prefetch_factor
        extra = _dataloader_args(dataloader, int(seed))
        self._copied = 0
        self._warned = False
        self._taken = False  # a batch of this pass was handed out
        own = not isinstance(index, Index)
        if own:
            index = Index(index)
        self.index = index
        self._holder = _Holder(index, own_index=own)
        self.decoder = globals()["decode"].coerce(decode)
        if even not in ("pad", "drop"):
            raise ValueError("even must be 'pad' or 'drop'")
        opt = _lib.Options()
        _c.wharf_options_init(ctypes.byref(opt))
        opt.batch_size = int(batch_size)
        opt.num_workers = int(num_workers)
        if prefetch is not None:
            opt.prefetch = int(prefetch)
        opt.shuffle = _shuffle_mode(shuffle)
        if shard_window is not None:
            if opt.shuffle != _lib.WHARF_SHUFFLE_SHARDS:
                raise ValueError('shard_window= is for shuffle="shards"')
            if int(shard_window) < 1:
                raise ValueError("shard_window must be at least 1 (shards "
                                 "open at once)")
            opt.shard_window = int(shard_window)
        opt.drop_last = int(bool(drop_last))
        opt.in_order = int(bool(in_order))
        opt.even = _lib.WHARF_EVEN_PAD if even == "pad" else \
            _lib.WHARF_EVEN_DROP
        opt.rank = -1 if rank is None else int(rank)
        opt.world = -1 if world_size is None else int(world_size)
        opt.skip_bad = int(bool(skip_bad))
        opt.timeout_ms = 0 if not timeout else max(1, int(timeout * 1000))
        # -EINTR back from a wait, so that ^C raises KeyboardInterrupt in
        # next_batch's loop rather than only once the batch arrives.
        opt.interruptible = 1
        opt.seed = int(extra.get("seed", seed)) & (2**64 - 1)
        if "persistent" in extra:
            opt.persistent = int(extra["persistent"])
        opt.sample_bytes = int(sample_bytes)
        opt.slot_bytes = int(slot_bytes)
        if int(held_batches) < 1:
            raise ValueError("held_batches must be at least 1: a loop holds "
                             "its current batch while it takes the next")
        # The ring has a slot more than that: the batch handed out while
        # held_batches are held.
        self.held_batches = int(held_batches)
        opt.held = self.held_batches + 1
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
        self._pass = None  # weakref to the live iter(), see __iter__
        rc = _c.wharf_loader_open(index._handle(), ctypes.byref(opt),
                                  ctypes.byref(h))
        if rc:
            _raise(rc)
        self._holder.loader = h
        self._opt = opt
        self._epoch = 0
        self._epoch_chosen = False
        _raise_warned()

    # -- lifetime ---------------------------------------------------------

    @property
    def closed(self):
        return self._holder.loader is None or self._holder.stopped

    def close(self):
        """Stops the workers and closes every file the loader has on the
        dataset's filesystem (an index given as a path too), so that a wharf
        mount there can be unmounted.  Batches still referenced stay valid:
        they hold only their ring slots in /dev/shm; the ring is unmapped
        when the last of them dies.  A Loader nothing refers to any more is
        closed the same way."""
        self._holder.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # Nobody can ask for a batch any more: the batches still referenced
        # must not keep workers and open files on the mount.
        holder = getattr(self, "_holder", None)
        if holder is not None:
            holder.close()

    def _handle(self):
        if self.closed:
            raise ValueError("the loader is closed")
        return self._holder.loader

    def _fail(self, rc):
        self._holder.fail(rc)

    @property
    def classes(self):
        """The index's class names (see Index.classes)."""
        return self.index.classes

    @property
    def class_to_idx(self):
        return self.index.class_to_idx

    # -- batches ----------------------------------------------------------

    def _must_copy(self, held):
        """True when the caller holds more than held_batches batches as it
        asks for the next: that one is handed out as a copy, so the workers
        keep their slots."""
        if held <= self.held_batches:
            return False
        self._copied += 1
        if not self._warned:
            self._warned = True
            warnings.warn(
                "wharf: your code held %d batches of this loader as it "
                "asked for the next (held_batches=%d), so that batch, and "
                "any later one asked for while more than %d are held, is a "
                "copy (counted in stats()['copied_batches']).  Keep .clone() "
                "(torch) or .copy() (NumPy) of what you store, or raise "
                "held_batches="
                % (held, self.held_batches, self.held_batches),
                RuntimeWarning, stacklevel=_outside())
        return True

    def next_batch(self):
        """The next batch of the epoch, None at its end.  The batch holds its
        slot as long as anything refers to it."""
        h = self._handle()
        self._holder.drain()
        ptr = ctypes.POINTER(_lib.BatchC)()
        rc = _c.wharf_loader_next(h, ctypes.byref(ptr))
        while rc == -errno.EINTR:
            # A signal ended the wait so that its handler could run (^C
            # raises KeyboardInterrupt here); otherwise wait on.
            rc = _c.wharf_loader_next(h, ctypes.byref(ptr))
        return self._hand_out(ptr) if self._came(rc) else None

    def _came(self, rc):
        """After a C next (host or device): True when it handed out a
        batch, False at the epoch's end; raises its error."""
        self._taken = True
        self._epoch_chosen = False
        if rc == _lib.WHARF_END:
            return False
        if rc:
            self._fail(rc)
        return True

    def _hand_out(self, ptr):
        """The batch C handed out at ptr, as a Batch (see _hand_out)."""
        holder = self._holder
        return _hand_out(
            holder, ptr, lambda: self._must_copy(holder.held),
            lambda b, lease: Batch(self, b, self._tensors, lease),
            lambda b: _c.wharf_loader_release(holder.loader, b))

    def release(self):
        """Gives back the slots of batches nothing refers to any more (each
        next batch does this too)."""
        if not self.closed:
            self._holder.drain()

    def _start_pass(self):
        """A new iter(): the epoch set_epoch() or load_state_dict() chose,
        else the next one once a batch of the current one was taken."""
        self._handle()
        if self._taken and not self._epoch_chosen:
            self.set_epoch(self._epoch + 1)
        self._epoch_chosen = False

    def __iter__(self):
        """A pass over an epoch (see _start_pass).  One pass is live at a
        time, as with DataLoader: a new iter() ends the one before, which
        raises RuntimeError if used again; the two would otherwise share
        the loader's place, each moving the other on."""
        old = self._pass() if self._pass is not None else None
        if old is not None:
            old._end()
        self._start_pass()
        it = _Pass(self)
        self._pass = weakref.ref(it)
        return it

    def _pass_next(self):
        """The next item of a pass, None at the epoch's end."""
        return self.next_batch()

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
        self._taken = False
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
        self._taken = False
        self._epoch_chosen = True

    # -- numbers ----------------------------------------------------------

    def stats(self):
        """Counters since open; wait_s is the data stall (time blocked in
        next), stall_share that over the time since open."""
        st = _lib.Stats()
        st.size = ctypes.sizeof(st)
        self.release()  # held_batches counts what is still referenced
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
        d["copied_batches"] = self._copied
        d["held_batches"] = self._holder.held + self._holder.dev_held
        return d
