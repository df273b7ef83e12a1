"""WebDataset tar shards: Index.build(tar=...), Index.fields(), the same
index through samples= with fields, and loaders reading one field (raw,
and JPEG decode under wharf.torch.Loader) on shards written here with
tarfile.

Run by tests/test-python.sh (make check).
"""

import io
import os
import shutil
import tarfile
import tempfile
import unittest

import numpy as np

import wharf

try:
    import torch
    import wharf.torch
except ImportError:  # numpy alone: the tests that need torch skip, each
    torch = None     # with its own SKIP line
NO_TORCH = "torch is not installed (apt-get install python3-torch)"

try:
    from PIL import Image
except ImportError:  # pragma: no cover - depends on the machine
    Image = None

LONG = "d" * 120  # a directory name past ustar's 100-byte name field


def _has_jpeg():
    """Whether libwharf takes a jpeg spec (it was built with libjpeg)."""
    import ctypes
    from wharf import _c
    h = ctypes.c_void_p()
    if _c.wharf_decoder_new(b"jpeg size=8", ctypes.byref(h)):
        return False
    _c.wharf_decoder_free(h)
    return True


def _jpeg(seed):
    """A small JPEG (PIL) of a flat colour picked by seed."""
    rgb = np.full((24, 32, 3), (seed * 40) % 256, np.uint8)
    out = io.BytesIO()
    Image.fromarray(rgb).save(out, format="JPEG", quality=95)
    return out.getvalue()


def write_shard(path, samples, fmt):
    """samples: [(key, {field: bytes})], packed in order."""
    with tarfile.open(path, "w", format=fmt) as t:
        for key, fields in samples:
            for ext, data in fields.items():
                ti = tarfile.TarInfo("%s.%s" % (key, ext))
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))


class TarIndex(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="wharf-pytar-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.shm = os.path.join(self.dir, "shm")
        os.mkdir(self.shm)
        rng = np.random.default_rng(5)
        self.samples = []
        for s in range(3):
            shard = []
            for k in range(4):
                key = "%s/%04d" % (LONG, s * 4 + k) if k == 1 else \
                    "%04d" % (s * 4 + k)
                fields = {"jpg": _jpeg(s * 4 + k) if Image else
                          rng.bytes(100 + k),
                          "cls": b"%d\n" % ((s * 4 + k) % 5),
                          "txt": b""}
                shard.append((key, fields))
            self.samples += shard
            write_shard(os.path.join(self.dir, "shard-%d.tar" % s), shard,
                        tarfile.PAX_FORMAT if s % 2 else tarfile.GNU_FORMAT)

    def build(self, **kw):
        ix = wharf.Index.build(os.path.join(self.dir, "tar.idx"),
                               tar=[os.path.join(self.dir, "shard-*.tar")],
                               **kw)
        self.addCleanup(ix.close)
        return ix

    def test_fields_are_the_members(self):
        ix = self.build()
        self.assertEqual(len(ix), len(self.samples))
        self.assertEqual(ix.num_files, 3)
        for i, (key, fields) in enumerate(self.samples):
            path, offset, length, label = ix.sample(i)
            self.assertEqual(label, i % 5)
            got = ix.fields(i)
            self.assertEqual([f[0] for f in got], list(fields))
            with open(path, "rb") as f:
                for name, off, n in got:
                    f.seek(off)
                    self.assertEqual(f.read(n), fields[name], (key, name))
                    self.assertGreaterEqual(off, offset)
                    self.assertLessEqual(off + n, offset + length)

    def test_samples_with_fields_build_the_same(self):
        ix = self.build()
        rows = [ix.sample(i) + (ix.fields(i),) for i in range(len(ix))]
        again = wharf.Index.build(os.path.join(self.dir, "again.idx"),
                                  samples=rows)
        self.addCleanup(again.close)
        for i in range(len(ix)):
            self.assertEqual(again.sample(i), ix.sample(i))
            self.assertEqual(again.fields(i), ix.fields(i))

    def test_label_field_and_partial(self):
        ix = self.build(label_field="")
        self.assertEqual(ix.num_labels, 0)
        with self.assertRaises(ValueError):
            wharf.Index.build(os.path.join(self.dir, "x.idx"),
                              dir=self.dir, partial=True)
        cut = os.path.join(self.dir, "shard-0.tar")
        with open(cut, "r+b") as f:
            f.truncate(os.path.getsize(cut) // 2)
        with self.assertRaises(wharf.WharfError) as e:
            self.build()
        self.assertIn("shard-0.tar: byte ", str(e.exception))
        ix = self.build(partial=True)
        self.assertLess(len(ix), len(self.samples))
        self.assertGreaterEqual(len(ix), 8)

    def test_loader_reads_a_field(self):
        ix = self.build()
        with wharf.Loader(ix, batch_size=4, num_workers=2,
                          shm_dir=self.shm,
                          decode=wharf.decode.raw(field="cls")) as ld:
            got = [bytes(x) for b in ld for x in b.data]
        self.assertEqual(got, [f["cls"] for _, f in self.samples])
        with self.assertRaises(wharf.WharfError) as e:
            wharf.Loader(ix, shm_dir=self.shm,
                         decode=wharf.decode.raw(field="npy"))
        self.assertIn("its fields: jpg, cls, txt", str(e.exception))

    @unittest.skipIf(torch is None, NO_TORCH)
    @unittest.skipIf(Image is None or not _has_jpeg(),
                     "PIL is not installed, or libwharf lacks libjpeg")
    def test_torch_loader_decodes_the_image_field(self):
        ix = self.build()
        for dec in (wharf.decode.jpeg(16, crop="center"),
                    wharf.decode.jpeg(16, crop="center", field="jpg")):
            with wharf.torch.Loader(ix, batch_size=4, num_workers=2,
                                    shm_dir=self.shm, decode=dec) as ld:
                for b in ld:
                    x, y = b[0], b[1]
                    self.assertEqual(tuple(x.shape)[1:], (3, 16, 16))
                    for k, sid in enumerate(b.samples.tolist()):
                        want = (sid * 40) % 256
                        self.assertLess(abs(x[k].float().mean().item() -
                                            want), 3, sid)
                        self.assertEqual(int(y[k]), sid % 5)


if __name__ == "__main__":
    unittest.main()
