"""Decoders: what the C workers turn each stored sample into.

Decoding runs in libwharf's forked workers (include/wharf/decode.h), chosen
here by name and parameters.  There is deliberately no way to pass a Python
function: every worker would run a forked copy of the interpreter (unsafe
when the parent has threads, as torch does) and every sample would pass
through Python objects, which is what makes torch's DataLoader slow.  Code
of your own goes into a plug-in shared object (plugin()).
"""

import numpy as np

# numpy dtype name -> (spec name, size)
_DTYPES = {
    "uint8": "u8", "int8": "i8", "uint16": "u16", "int16": "i16",
    "uint32": "u32", "int32": "i32", "uint64": "u64", "int64": "i64",
    "float16": "f16", "float32": "f32", "float64": "f64",
    "bfloat16": "bf16",
}


def _spec_dtype(dtype):
    name = str(dtype).replace("torch.", "")
    if name not in _DTYPES:
        name = np.dtype(dtype).name
    if name not in _DTYPES:
        raise ValueError("unsupported dtype %r (one of %s)" %
                         (dtype, ", ".join(sorted(_DTYPES))))
    return name, _DTYPES[name]


def _np_dtype(name):
    # numpy has no bfloat16: those arrays come out as uint16 bit patterns
    # (wharf.torch gives real torch.bfloat16 tensors).
    return np.dtype("uint16" if name == "bfloat16" else name)


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

    def __repr__(self):
        return "wharf.decode<%s>" % self.spec


class Raw(Decoder):
    def __init__(self, size=None):
        if size:
            self.shape = (int(size),)
            self.spec = "raw bytes=%d" % int(size)


class Array(Decoder):
    def __init__(self, dtype, shape, offset=0):
        self.dtype, code = _spec_dtype(dtype)
        self.shape = tuple(int(d) for d in shape)
        if not self.shape or min(self.shape) <= 0:
            raise ValueError("shape must be positive dimensions: %r" %
                             (shape,))
        self.spec = "array dtype=%s shape=%s offset=%d" % (
            code, ",".join(map(str, self.shape)), int(offset))


class Tokens(Decoder):
    fields = ("input", "target")

    def __init__(self, dtype="uint16", window=1024, out="int64"):
        name, code = _spec_dtype(dtype)
        if code not in ("u16", "u32"):
            raise ValueError("token dtype must be uint16 or uint32")
        if out in ("same", None):
            out = name
        out_name, out_code = _spec_dtype(out)
        if out_name != name and out_code not in ("i64", "i32"):
            raise ValueError("out must be int64, int32 or the token dtype")
        self.window = int(window)
        self.dtype = out_name
        self.shape = (2, self.window)
        self.spec = "tokens dtype=%s window=%d out=%s" % (
            code, self.window, "same" if out_name == name else out_code)
        self.record_bytes = (self.window + 1) * np.dtype(name).itemsize


class Plugin(Decoder):
    def __init__(self, path, symbol="wharf_transform", arg="",
                 sample_bytes=0, dtype="uint8", shape=None):
        for word in (path, symbol, arg):
            if any(c.isspace() for c in str(word)):
                raise ValueError("plugin path, symbol and arg cannot hold "
                                 "spaces: %r" % (word,))
        self.dtype, _ = _spec_dtype(dtype)
        self.shape = tuple(shape) if shape is not None else None
        if self.shape is not None and not sample_bytes:
            sample_bytes = int(np.prod(self.shape)) * \
                self.np_dtype.itemsize
        self.spec = "plugin path=%s symbol=%s" % (path, symbol)
        if arg:
            self.spec += " arg=%s" % arg
        if sample_bytes:
            self.spec += " bytes=%d" % int(sample_bytes)


class Jpeg(Decoder):
    def __init__(self, size=224, crop="random-resized", scale=(0.08, 1.0),
                 ratio=(3 / 4, 4 / 3), flip=None, dtype="uint8",
                 layout="chw", mean=None, std=None):
        self.size = int(size)
        if crop not in ("random-resized", "center"):
            raise ValueError("crop must be 'random-resized' or 'center'")
        if layout not in ("chw", "hwc"):
            raise ValueError("layout must be 'chw' or 'hwc'")
        self.dtype, code = _spec_dtype(dtype)
        if code not in ("u8", "f32"):
            raise ValueError("dtype must be uint8 or float32")
        if (mean is not None or std is not None) and code != "f32":
            raise ValueError("mean and std need dtype float32")

        def nums(v, n):
            v = [float(x) for x in v]
            if len(v) != n:
                raise ValueError("expected %d numbers, got %r" % (n, v))
            return ",".join(repr(x) for x in v)

        words = ["jpeg", "size=%d" % self.size, "crop=%s" % crop,
                 "dtype=%s" % code, "layout=%s" % layout]
        if crop == "random-resized":
            words += ["scale=%s" % nums(scale, 2),
                      "ratio=%s" % nums(ratio, 2)]
        if flip is not None:
            words.append("flip=%d" % bool(flip))
        if mean is not None:
            words.append("mean=%s" % nums(mean, 3))
        if std is not None:
            words.append("std=%s" % nums(std, 3))
        self.spec = " ".join(words)
        s = self.size
        self.shape = (3, s, s) if layout == "chw" else (s, s, 3)


def raw(size=None):
    """The stored bytes: uint8 arrays (count, size), or one per sample when
    sizes differ.  With size, each sample is cut or zero-padded to size
    bytes, so any files make (count, size) batches."""
    return Raw(size)


def array(dtype, shape, offset=0):
    """Fixed-shape arrays: every sample is offset header bytes and then
    prod(shape) elements of dtype; batches are (count, *shape)."""
    return Array(dtype, shape, offset)


def tokens(dtype="uint16", window=1024, out="int64"):
    """Language-model windows: samples of window + 1 tokens (index records of
    (window + 1) * itemsize bytes) become input and target, (count, window)
    each, of type out."""
    return Tokens(dtype, window, out)


def plugin(path, symbol="wharf_transform", arg="", sample_bytes=0,
           dtype="uint8", shape=None):
    """A transform exported by a shared object (see wharf/decode.h)."""
    return Plugin(path, symbol, arg, sample_bytes, dtype, shape)


def jpeg(size=224, crop="random-resized", scale=(0.08, 1.0),
         ratio=(3 / 4, 4 / 3), flip=None, dtype="uint8", layout="chw",
         mean=None, std=None):
    """JPEG files decoded and augmented in the workers (libjpeg-turbo):
    batches (count, 3, size, size) with layout "chw", (count, size, size,
    3) with "hwc".

    crop="random-resized" is torchvision's RandomResizedCrop(size, scale,
    ratio); crop="center" its eval transform, Resize(size / 0.875) then
    CenterCrop(size).  flip: a horizontal flip with probability 1/2
    (default: on with random-resized, off with center).  Random choices
    are a function of (the loader's seed, epoch, sample index).  dtype
    uint8 keeps 0..255; float32 gives v / 255, then (x - mean) / std per
    channel when mean and std are given (ToTensor, Normalize).  Grayscale
    and CMYK files come out RGB; a file that is not a JPEG, or is damaged,
    fails naming the sample (skip_bad leaves it out)."""
    return Jpeg(size, crop, scale, ratio, flip, dtype, layout, mean, std)


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
