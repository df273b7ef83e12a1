"""ctypes declarations of libwharf's public API (include/wharf/*.h).

Nothing here is compiled: the structs mirror the C headers field by field,
and every function gets its argument and result types so that ctypes
converts and checks them.  tests/python/test_layout.py compares each
struct's size and offsets with the C compiler's (tests/python/layout.c):
a field changed in C must be changed here, and listed there.
"""

import ctypes
import errno
import os

c_u32 = ctypes.c_uint32
c_i32 = ctypes.c_int32
c_u64 = ctypes.c_uint64
c_void_p = ctypes.c_void_p
c_char_p = ctypes.c_char_p

WHARF_END = 1
WHARF_INDEX_VERIFY = 1
WHARF_LENGTH_UNKNOWN = (1 << 64) - 1
WHARF_EVEN_PAD = 0
WHARF_EVEN_DROP = 1
WHARF_SHUFFLE_SHARDS = 2


class Sample(ctypes.Structure):
    _fields_ = [("offset", c_u64), ("length", c_u64), ("file", c_u32),
                ("label", c_i32)]


class Field(ctypes.Structure):
    _fields_ = [("offset", c_u64), ("length", c_u64), ("name", c_char_p)]


# wharf/log.h: the log function (level, message, arg).
WHARF_LOG_ERROR, WHARF_LOG_WARN, WHARF_LOG_INFO, WHARF_LOG_DEBUG = range(4)
LogFunc = ctypes.CFUNCTYPE(None, ctypes.c_int, c_char_p, c_void_p)

# The progress callback of TarOptions (left NULL from Python).
TarProgress = ctypes.CFUNCTYPE(None, c_void_p, c_u64, c_u64, c_u64)


class TarOptions(ctypes.Structure):
    _fields_ = [("size", c_u32), ("partial", c_u32), ("root", c_char_p),
                ("label_field", c_char_p), ("progress", TarProgress),
                ("progress_arg", c_void_p)]


class BatchC(ctypes.Structure):
    _fields_ = [
        ("epoch", c_u64),
        ("index", c_u64),
        ("sample_size", c_u64),
        ("bytes", c_u64),
        ("data", c_void_p),
        ("offsets", ctypes.POINTER(c_u64)),
        ("samples", ctypes.POINTER(c_u64)),
        ("labels", ctypes.POINTER(c_i32)),
        ("count", c_u32),
        ("skipped", c_u32),
        ("worker", c_u32),
        ("slot", c_u32),
        ("generation", c_u64),
    ]


class Options(ctypes.Structure):
    _fields_ = [
        ("size", c_u32),
        ("batch_size", c_u32),
        ("num_workers", c_u32),
        ("prefetch", c_u32),
        ("shuffle", c_u32),
        ("drop_last", c_u32),
        ("in_order", c_u32),
        ("even", c_u32),
        ("rank", c_i32),
        ("world", c_i32),
        ("skip_bad", c_u32),
        ("persistent", c_u32),
        ("timeout_ms", c_u32),
        ("held", c_u32),
        ("seed", c_u64),
        ("sample_bytes", c_u64),
        ("slot_bytes", c_u64),
        ("shm_dir", c_char_p),
        ("worker_init", c_void_p),
        ("sample_fn", c_void_p),
        ("batch_fn", c_void_p),
        ("user", c_void_p),
        ("shift_step", c_u32),
        ("reserved1", c_u32),
        ("field", c_char_p),
        ("field_if_any", c_u32),
        ("reserved2", c_u32),
        ("shard_window", c_u32),
        ("reserved3", c_u32),
        ("interruptible", c_u32),
        ("epoch_end", c_u32),
    ]


class State(ctypes.Structure):
    _fields_ = [
        ("size", c_u32),
        ("version", c_u32),
        ("seed", c_u64),
        ("epoch", c_u64),
        ("position", c_u64),
        ("done_mask", c_u64),
        ("num_samples", c_u64),
        ("batch_size", c_u32),
        ("rank", c_u32),
        ("world", c_u32),
        ("flags", c_u32),
    ]


class Stats(ctypes.Structure):
    _fields_ = [
        ("size", c_u32),
        ("num_workers", c_u32),
        ("batches", c_u64),
        ("samples", c_u64),
        ("bytes", c_u64),
        ("skipped", c_u64),
        ("wait_ns", c_u64),
        ("open_ns", c_u64),
        ("read_bytes", c_u64),
        ("preads", c_u64),
    ]


class CudaOptions(ctypes.Structure):
    _fields_ = [("size", c_u32), ("buffers", c_u32), ("flags", c_u32),
                ("reserved0", c_u32)]


class DeviceBatch(ctypes.Structure):
    _fields_ = [
        ("epoch", c_u64),
        ("index", c_u64),
        ("sample_size", c_u64),
        ("bytes", c_u64),
        ("data", c_void_p),
        ("offsets", c_void_p),
        ("labels", c_void_p),
        ("samples", ctypes.POINTER(c_u64)),
        ("host_labels", ctypes.POINTER(c_i32)),
        ("count", c_u32),
        ("skipped", c_u32),
        ("buffer", c_u32),
        ("generation", c_u32),
    ]


_P = ctypes.POINTER
_SIGNATURES = {
    # name: (restype, argtypes)
    "wharf_version_number": (ctypes.c_uint, []),
    "wharf_last_error": (c_char_p, []),
    "wharf_log_set_func": (None, [LogFunc, c_void_p]),
    "wharf_dtype": (c_char_p, [c_char_p, _P(c_u32)]),
    "wharf_index_open": (ctypes.c_int, [c_char_p, c_u32, _P(c_void_p)]),
    "wharf_index_close": (None, [c_void_p]),
    "wharf_index_count": (c_u64, [c_void_p]),
    "wharf_index_num_files": (c_u64, [c_void_p]),
    "wharf_index_num_labels": (c_u32, [c_void_p]),
    "wharf_index_sample": (ctypes.c_int, [c_void_p, c_u64, _P(Sample)]),
    "wharf_index_class_name": (c_char_p, [c_void_p, c_u32]),
    "wharf_index_path": (ctypes.c_int,
                         [c_void_p, c_u32, c_char_p, ctypes.c_size_t]),
    "wharf_index_build_dir": (ctypes.c_int, [c_char_p, c_char_p]),
    "wharf_index_build_list": (ctypes.c_int,
                               [c_char_p, ctypes.c_int, c_char_p]),
    "wharf_index_build_records": (ctypes.c_int, [
        c_u64, _P(c_char_p), ctypes.c_size_t, c_char_p]),
    "wharf_index_builder_new": (ctypes.c_int,
                                [c_char_p, c_char_p, _P(c_void_p)]),
    "wharf_index_builder_add": (ctypes.c_int, [
        c_void_p, c_char_p, c_u64, c_u64, c_i32]),
    "wharf_index_builder_finish": (ctypes.c_int, [c_void_p]),
    "wharf_index_builder_field": (ctypes.c_int, [
        c_void_p, c_char_p, c_u64, c_u64]),
    "wharf_index_num_fields": (c_u32, [c_void_p, c_u64]),
    "wharf_index_field": (ctypes.c_int, [c_void_p, c_u64, c_u32,
                                         _P(Field)]),
    "wharf_tar_options_init": (None, [_P(TarOptions)]),
    "wharf_index_build_tar": (ctypes.c_int, [
        _P(c_char_p), ctypes.c_size_t, _P(TarOptions), c_char_p]),
    "wharf_index_builder_free": (None, [c_void_p]),
    "wharf_options_init": (None, [_P(Options)]),
    "wharf_loader_open": (ctypes.c_int,
                          [c_void_p, _P(Options), _P(c_void_p)]),
    "wharf_loader_next": (ctypes.c_int, [c_void_p, _P(_P(BatchC))]),
    "wharf_loader_release": (ctypes.c_int, [c_void_p, _P(BatchC)]),
    "wharf_loader_set_epoch": (ctypes.c_int, [c_void_p, c_u64]),
    "wharf_loader_num_batches": (c_u64, [c_void_p]),
    "wharf_loader_rank": (c_u32, [c_void_p]),
    "wharf_loader_world": (c_u32, [c_void_p]),
    "wharf_loader_state_save": (ctypes.c_int, [c_void_p, _P(State)]),
    "wharf_loader_state_restore": (ctypes.c_int, [c_void_p, _P(State)]),
    "wharf_loader_stats": (ctypes.c_int, [c_void_p, _P(Stats)]),
    "wharf_loader_worker_busy_ns": (c_u64, [c_void_p, c_u32]),
    "wharf_loader_error": (c_char_p, [c_void_p]),
    "wharf_loader_stop": (None, [c_void_p]),
    "wharf_loader_close": (None, [c_void_p]),
    "wharf_decoder_new": (ctypes.c_int, [c_char_p, _P(c_void_p)]),
    "wharf_decoder_apply": (ctypes.c_int, [c_void_p, _P(Options)]),
    "wharf_decoder_sample_bytes": (c_u64, [c_void_p]),
    "wharf_decoder_input_bytes": (c_u64, [c_void_p]),
    "wharf_decoder_free": (None, [c_void_p]),
}

# wharf/cuda.h: every build has these (without CUDA they return -ENOTSUP),
# but a library older than the CUDA path lacks them; the package then works
# without it.
_OPTIONAL = {
    "wharf_cuda_available": (ctypes.c_int, []),
    "wharf_cuda_options_init": (None, [_P(CudaOptions)]),
    "wharf_loader_cuda_enable": (ctypes.c_int, [c_void_p, _P(CudaOptions)]),
    "wharf_loader_next_device": (ctypes.c_int, [
        c_void_p, c_void_p, _P(_P(DeviceBatch))]),
    "wharf_loader_release_device": (ctypes.c_int, [
        c_void_p, _P(DeviceBatch), c_void_p]),
    "wharf_loader_device_set_epoch": (ctypes.c_int, [c_void_p, c_u64]),
    "wharf_loader_device_state_save": (ctypes.c_int, [c_void_p, _P(State)]),
    "wharf_loader_device_state_restore": (ctypes.c_int,
                                          [c_void_p, _P(State)]),
}


class LibraryNotFound(ImportError):
    """libwharf.so could not be found or loaded."""


def _candidates():
    """Where to look for libwharf, in order; each entry is (path, why).

    An installed package uses the library inside it (pip install puts it
    there) or the system's; the build trees of the checkout the package sits
    in come last, so that PYTHONPATH=python works after ./quickstart build
    (build/plain) or an in-tree make."""
    env = os.environ.get("WHARF_LIBRARY")
    if env:
        # A named library is the only one: another would hide a wrong path.
        yield env, "WHARF_LIBRARY"
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libwharf.so.0"), "inside the package"
    try:
        from . import _installed  # written by make install
        yield (os.path.join(_installed.LIBDIR, "libwharf.so.0"),
               "make install's libdir")
    except ImportError:
        pass
    yield "libwharf.so.0", "linker path"
    checkout = os.path.normpath(os.path.join(here, "..", ".."))
    trees = [os.path.join(checkout, "build", "plain"), checkout]
    if os.environ.get("WHARF_BUILDDIR"):
        trees.append(os.environ["WHARF_BUILDDIR"])
    for tree in trees:
        yield (os.path.join(tree, "loader", ".libs", "libwharf.so"),
               "build tree")


def load():
    tried = []
    for path, why in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append("%s (%s): absent" % (path, why))
            continue
        try:
            lib = ctypes.CDLL(path, use_errno=True)
        except OSError as e:
            tried.append("%s (%s): %s" % (path, why, e))
            continue
        missing = [n for n in _SIGNATURES if not hasattr(lib, n)]
        if missing:
            tried.append("%s (%s): lacks %s" % (path, why,
                                               ", ".join(missing)))
            continue
        have = dict(_SIGNATURES)
        if all(hasattr(lib, n) for n in _OPTIONAL):
            have.update(_OPTIONAL)
        lib.wharf_has_cuda_api = len(have) > len(_SIGNATURES)
        for name, (res, args) in have.items():
            fn = getattr(lib, name)
            fn.restype = res
            fn.argtypes = args
        lib.wharf_path = path
        return lib
    checkout = os.path.join(os.path.dirname(__file__), "..", "..")
    if os.path.exists(os.path.join(checkout, "pyproject.toml")):
        checkout = os.path.abspath(checkout)
    else:
        checkout = "/path/to/wharf-checkout"
    raise LibraryNotFound(
        "cannot load libwharf.  Install the package with the library inside "
        "it: pip install --no-build-isolation %s (or set WHARF_LIBRARY to "
        "a libwharf.so).  Tried:\n  %s" % (checkout, "\n  ".join(tried)))


def strerror(rc):
    return os.strerror(-rc) if rc < 0 else "code %d" % rc


def errno_name(rc):
    return errno.errorcode.get(-rc, str(rc))
