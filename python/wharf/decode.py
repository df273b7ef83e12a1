"""Decoders: what the C workers turn each stored sample into.

Decoding runs in libwharf's forked workers (include/wharf/decode.h), chosen
here by name and parameters.  There is deliberately no way to pass a Python
function: every worker would run a forked copy of the interpreter (unsafe
when the parent has threads, as torch does) and every sample would pass
through Python objects, which is what makes torch's DataLoader slow.  Code
of your own goes into a plug-in shared object (plugin()).
"""

import ctypes
import errno

import numpy as np

from . import _lib


def _c():
    """The library, as the package loaded it (after its import)."""
    from . import _c as lib
    return lib


_error = None


def _decode_error():
    """DecodeError, made once the package's WharfError exists."""
    global _error
    if _error is None:
        from . import WharfError
        _error = type("DecodeError", (WharfError, ValueError), {
            "__doc__": "A decoder's parameters were refused (by libwharf's "
                       "spec parser): a WharfError and a ValueError.",
            "__module__": __name__})
    return _error


def _refused(message):
    """A DecodeError for a parameter refused here, before libwharf."""
    return _decode_error()(errno.EINVAL, message)


def __getattr__(name):
    if name == "DecodeError":
        return _decode_error()
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def _dtype(dtype):
    """(long name, size) of an element type, in either spelling libwharf
    takes (u16 or uint16), or as a NumPy or torch dtype: libwharf's table
    (wharf_dtype) is the only one."""
    name = str(dtype).replace("torch.", "")
    size = ctypes.c_uint32()
    lib = _c()
    got = lib.wharf_dtype(name.encode(), ctypes.byref(size))
    if got is None:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            pass
        got = lib.wharf_dtype(name.encode(), ctypes.byref(size))
    if got is None:
        raise _refused("unsupported dtype %r (libwharf(3), Decoders, lists "
                       "them)" % (dtype,))
    return got.decode(), size.value


def _np_dtype(name):
    # numpy has no bfloat16: those arrays come out as uint16 bit patterns
    # (wharf.torch gives real torch.bfloat16 tensors).
    return np.dtype("uint16" if name == "bfloat16" else name)


def _word(key, value):
    """key=value for a spec; a value cannot hold a space (it would end the
    word)."""
    value = str(value)
    if not value or any(c.isspace() for c in value):
        raise _refused("%s cannot be empty or hold spaces: %r"
                       % (key, value))
    return "%s=%s" % (key, value)


class Decoder:
    """A decoder spec and the layout of one decoded sample.

    dtype is the element type name, shape the shape of one sample (None:
    raw bytes, fixed or variable size), fields the names a batch unpacks to.
    """

    spec = "raw"
    dtype = "uint8"
    shape = None
    fields = ("data", "labels")

    @property
    def np_dtype(self):
        return _np_dtype(self.dtype)

    def _check(self):
        """Has libwharf parse the spec now, so that a bad parameter fails
        here with its message, and checks that it agrees on the size."""
        lib = _c()
        d = ctypes.c_void_p()
        rc = lib.wharf_decoder_new(self.spec.encode(), ctypes.byref(d))
        if rc:
            raise _decode_error()(-rc, lib.wharf_last_error().decode(
                "utf-8", "replace"))
        got = lib.wharf_decoder_sample_bytes(d)
        lib.wharf_decoder_free(d)
        want = int(np.prod(self.shape)) * self.np_dtype.itemsize
        if got != want:
            raise RuntimeError("%r: libwharf makes %d bytes a sample, the "
                               "package expects %d (mismatched versions?)"
                               % (self, got, want))

    def __repr__(self):
        return "wharf.decode<%s>" % self.spec


def _field(field):
    """The spec word of field= (a name or names), or ""."""
    if field is None:
        return ""
    if not isinstance(field, str):
        field = ",".join(field)
    return " " + _word("field", field)


class Raw(Decoder):
    def __init__(self, size=None, field=None):
        if size:
            self.shape = (int(size),)
            self.spec = "raw bytes=%d" % int(size)
        self.spec += _field(field)


class Array(Decoder):
    def __init__(self, dtype, shape, offset=0, field=None):
        self.dtype, _ = _dtype(dtype)
        self.shape = tuple(int(d) for d in shape)
        self.spec = "array dtype=%s shape=%s offset=%d" % (
            self.dtype, ",".join(map(str, self.shape)), int(offset))
        self.spec += _field(field)
        self._check()


class Tokens(Decoder):
    fields = ("input", "target")

    def __init__(self, dtype="uint16", window=1024, out="int64",
                 windows="moving"):
        name, size = _dtype(dtype)
        if out in ("same", None):
            out = name
        self.dtype, _ = _dtype(out)
        self.window = int(window)
        self.windows = windows
        self.shape = (2, self.window)
        self.spec = "tokens dtype=%s window=%d out=%s %s" % (
            name, self.window, "same" if self.dtype == name else self.dtype,
            _word("windows", windows))
        self.record_bytes = (self.window + 1) * size
        self._check()


class Plugin(Decoder):
    def __init__(self, path, symbol="wharf_transform", arg="",
                 sample_bytes=0, dtype="uint8", shape=None):
        for word in (path, symbol, arg):
            if any(c.isspace() for c in str(word)):
                raise ValueError("plugin path, symbol and arg cannot hold "
                                 "spaces: %r" % (word,))
        self.dtype, _ = _dtype(dtype)
        self.shape = tuple(shape) if shape is not None else None
        if self.shape is not None and not sample_bytes:
            sample_bytes = int(np.prod(self.shape)) * \
                self.np_dtype.itemsize
        self.spec = "plugin path=%s symbol=%s" % (path, symbol)
        if arg:
            self.spec += " arg=%s" % arg
        if sample_bytes:
            self.spec += " bytes=%d" % int(sample_bytes)


def _size(size):
    """(height, width) of an int or a pair of ints, as torchvision's."""
    if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
        return int(size), int(size)
    if (isinstance(size, (tuple, list)) and len(size) == 2 and
            all(isinstance(v, (int, np.integer)) and
                not isinstance(v, bool) for v in size)):
        return int(size[0]), int(size[1])
    raise _refused("size must be an int or (height, width), got %r"
                   % (size,))


class Jpeg(Decoder):
    def __init__(self, size=224, crop="random-resized", scale=(0.08, 1.0),
                 ratio=(3 / 4, 4 / 3), flip=None, dtype="uint8",
                 layout="chw", mean=None, std=None, max_scans=None,
                 max_pixel_scans=None, field=None):
        h, w = _size(size)
        self.size = (h, w)
        self.dtype, _ = _dtype(dtype)

        def nums(key, v, n):
            v = [float(x) for x in v]
            if len(v) != n:
                raise _refused("%s: expected %d numbers, got %r"
                               % (key, n, v))
            return "%s=%s" % (key, ",".join(repr(x) for x in v))

        words = ["jpeg", "size=%d,%d" % (h, w), _word("crop", crop),
                 "dtype=%s" % self.dtype, _word("layout", layout)]
        if crop == "random-resized":
            words += [nums("scale", scale, 2), nums("ratio", ratio, 2)]
        if flip is not None:
            words.append("flip=%d" % bool(flip))
        if mean is not None:
            words.append(nums("mean", mean, 3))
        if std is not None:
            words.append(nums("std", std, 3))
        if max_scans is not None:
            words.append("max_scans=%d" % int(max_scans))
        if max_pixel_scans is not None:
            words.append("max_pixel_scans=%d" % int(max_pixel_scans))
        self.spec = " ".join(words) + _field(field)
        self.shape = (3, h, w) if layout == "chw" else (h, w, 3)
        self._check()


def raw(size=None, field=None):
    """The stored bytes: uint8 arrays (count, size), or one per sample when
    sizes differ.  With size, each sample is cut or zero-padded to size
    bytes, so any files make (count, size) batches.  field: in an index of
    tar shards, the field each sample is read from ("txt"; a list or
    "jpg,png": the first of them the sample has); default: the whole
    sample, its first member to its last."""
    return Raw(size, field)


def array(dtype, shape, offset=0, field=None):
    """Fixed-shape arrays: every sample is offset header bytes and then
    prod(shape) elements of dtype; batches are (count, *shape).  dtype: a
    NumPy or torch dtype, or its name in either spelling of libwharf(3)
    ("float32" or "f32", "uint16" or "u16", "bfloat16" or "bf16").
    field: as raw()'s."""
    return Array(dtype, shape, offset, field)


def tokens(dtype="uint16", window=1024, out="int64", windows="moving"):
    """Language-model windows: samples of window + 1 tokens (index records of
    (window + 1) * itemsize bytes: record_bytes) become input and target,
    (count, window) each, of type out (int64, int32, or "same").  dtype:
    uint16 or uint32 (u16, u32).

    windows="moving" (the default): epoch 0 reads the records themselves;
    each later epoch reads every window k tokens further on (1 <= k <=
    window, the same k for the whole epoch, a function of the loader's seed
    and the epoch), so that the pair of tokens across each record boundary
    is trained too, and state_dict() resumes the same windows.  The last
    record of each file is read in place.  windows="fixed": the records,
    every epoch (an evaluation loader that must see the very same windows
    at every pass, whatever its epoch)."""
    return Tokens(dtype, window, out, windows)


def plugin(path, symbol="wharf_transform", arg="", sample_bytes=0,
           dtype="uint8", shape=None):
    """A transform exported by a shared object (see wharf/decode.h)."""
    return Plugin(path, symbol, arg, sample_bytes, dtype, shape)


def jpeg(size=224, crop="random-resized", scale=(0.08, 1.0),
         ratio=(3 / 4, 4 / 3), flip=None, dtype="uint8", layout="chw",
         mean=None, std=None, max_scans=None, max_pixel_scans=None,
         field=None):
    """JPEG files decoded and augmented in the workers (libjpeg-turbo):
    batches (count, 3, height, width) with layout "chw", (count, height,
    width, 3) with "hwc".  size: an int (a square) or (height, width), as
    torchvision takes it.

    crop="random-resized" is torchvision's RandomResizedCrop(size, scale,
    ratio); crop="center" its eval transform, Resize(size / 0.875) then
    CenterCrop(size) (for (height, width): the picture resized, aspect
    kept, to cover height / 0.875 x width / 0.875, then its center).  flip:
    a horizontal flip with probability 1/2 (default: on with
    random-resized, off with center).  Random choices are a function of
    (the loader's seed, epoch, sample index).  dtype uint8 keeps 0..255;
    float32 gives v / 255, then (x - mean) / std per channel when mean and
    std are given, both or neither (ToTensor, Normalize).  Grayscale and
    CMYK files come out RGB; a file that is not a JPEG, is damaged, or is
    over a decode limit fails naming the sample and path (skip_bad leaves
    it out).

    Decode limits, against files made to cost minutes: max_scans (default
    500) caps a progressive file's scans, max_pixel_scans (default 2**30)
    its width x height x scans; 0 lifts a limit.  A 12-megapixel
    photograph passes both.  Bad parameters raise DecodeError (a
    ValueError and a WharfError) with libwharf's message.

    field: in an index of tar shards, the member decoded ("jpg"; a list or
    "jpg,jpeg": the first of them the sample has); default: the sample's
    first image member (jpg, jpeg, png or webp), or the whole sample in an
    index without fields."""
    return Jpeg(size, crop, scale, ratio, flip, dtype, layout, mean, std,
                max_scans, max_pixel_scans, field)


def coerce(decode):
    """None, a Decoder, or a spec string -> Decoder."""
    if decode is None:
        return Raw()
    if isinstance(decode, Decoder):
        return decode
    if isinstance(decode, str):
        d = Raw()
        d.spec = decode
        return d
    raise TypeError("decode must be a wharf.decode decoder or a spec string")
