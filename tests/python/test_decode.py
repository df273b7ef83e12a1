"""wharf.decode: parameters checked by libwharf's own spec parser, dtype
spellings from its one table, (height, width) JPEG sizes, and token windows
that move each epoch, resumed exactly.

Run by tests/test-python.sh (make check).
"""

import os
import re
import shutil
import tempfile
import unittest

import numpy as np

import wharf
import wharf.decode

SRCDIR = os.environ.get("WHARF_SRCDIR",
                        os.path.join(os.path.dirname(__file__), "..", ".."))

try:
    from PIL import Image
except ImportError:  # pragma: no cover - depends on the machine
    Image = None


def _has_jpeg():
    """Whether libwharf takes a jpeg spec (it was built with libjpeg)."""
    try:
        wharf.decode.jpeg(8)
    except wharf.decode.DecodeError as e:
        return "libjpeg" not in str(e)
    return True


class Tmp(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="wharf-pydecode-")
        self.shm = os.path.join(self.dir, "shm")
        os.mkdir(self.shm)
        self.addCleanup(shutil.rmtree, self.dir, True)

    def path(self, *p):
        return os.path.join(self.dir, *p)

    def loader(self, ix, **kw):
        l = wharf.Loader(ix, shm_dir=self.shm, **kw)
        self.addCleanup(l.close)
        return l


class TestSpellings(unittest.TestCase):
    def man_dtypes(self):
        """The array dtypes libwharf(3) lists, as it spells them."""
        with open(os.path.join(SRCDIR, "man", "libwharf.3")) as f:
            text = f.read()
        m = re.search(r"\(u8, i8, [^)]*\)", text)
        self.assertIsNotNone(m, "libwharf(3) lists no array dtypes")
        return m.group(0).strip("()").split(", ")

    def test_every_documented_spelling(self):
        names = self.man_dtypes()
        self.assertIn("u16", names)
        for short in names:
            a = wharf.decode.array(short, (2, 3))
            # The long name NumPy and torch use, from libwharf's table.
            long = a.dtype
            self.assertEqual(wharf.decode.array(long, (2, 3)).dtype, long)
            # libwharf's size is NumPy's (Decoder._check compares the
            # sample bytes too).
            self.assertEqual(wharf.decode._dtype(short)[1],
                             a.np_dtype.itemsize)
            if long != "bfloat16":
                self.assertEqual(wharf.decode.array(np.dtype(long),
                                                    (2,)).dtype, long)

    def test_tokens_u16_as_documented(self):
        for dtype, size in (("u16", 2), ("uint16", 2), (np.uint16, 2),
                            ("u32", 4), ("uint32", 4)):
            t = wharf.decode.tokens(dtype, 8)
            self.assertEqual(t.record_bytes, 9 * size)
            self.assertEqual(t.dtype, "int64")
        self.assertEqual(wharf.decode.tokens("u16", 8, out="i32").dtype,
                         "int32")
        self.assertEqual(wharf.decode.tokens("u32", 8, out="same").dtype,
                         "uint32")
        with self.assertRaises(ValueError) as cm:
            wharf.decode.tokens("i16", 8)
        self.assertIn("u16 or u32", str(cm.exception))
        with self.assertRaises(ValueError):
            wharf.decode.array("f33", (2,))


@unittest.skipUnless(_has_jpeg(), "libwharf was built without jpeg")
class TestJpegParameters(Tmp):
    def test_height_width(self):
        self.assertEqual(wharf.decode.jpeg((224, 160)).shape, (3, 224, 160))
        self.assertEqual(wharf.decode.jpeg([224, 160], layout="hwc").shape,
                         (224, 160, 3))
        self.assertEqual(wharf.decode.jpeg(np.int64(96)).shape, (3, 96, 96))
        for bad in ((224,), (224, 160, 3), "224", (224.0, 160), (0, 160),
                    (224, 5000), True):
            with self.assertRaises(ValueError, msg=repr(bad)) as cm:
                wharf.decode.jpeg(bad)
            self.assertIn("size", str(cm.exception))

    def test_mean_and_std_together(self):
        m, s = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
        wharf.decode.jpeg(64, dtype="float32", mean=m, std=s)
        with self.assertRaises(ValueError) as cm:
            wharf.decode.jpeg(64, dtype="float32", mean=m)
        self.assertIn("mean= needs std=", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            wharf.decode.jpeg(64, dtype="f32", std=s)
        self.assertIn("std= needs mean=", str(cm.exception))

    def test_limits_are_parameters(self):
        d = wharf.decode.jpeg(64, max_scans=5000, max_pixel_scans=0)
        self.assertIn("max_scans=5000", d.spec)
        with self.assertRaises(ValueError):
            wharf.decode.jpeg(64, max_scans=-1)

    @unittest.skipIf(Image is None, "PIL is not installed "
                     "(apt-get install python3-pil)")
    def test_batches_have_the_shape(self):
        os.mkdir(self.path("img"))
        rng = np.random.default_rng(3)
        for i in range(3):
            Image.fromarray(rng.integers(0, 255, (90, 120, 3),
                                         dtype=np.uint8)).save(
                self.path("img", "%d.jpg" % i), quality=90)
        ix = wharf.Index.build(self.path("i.idx"), dir=self.path("img"))
        self.addCleanup(ix.close)
        dec = wharf.decode.jpeg((48, 80), crop="center")
        x, _ = next(iter(self.loader(ix, batch_size=3, decode=dec)))
        self.assertEqual(x.shape, (3, 3, 48, 80))


class TestMovingWindows(Tmp):
    W = 8
    RECORDS = (30, 17)

    def setUp(self):
        super().setUp()
        self.files = []
        for f, n in enumerate(self.RECORDS):
            p = self.path("t%d.u32" % f)
            (np.arange(n * (self.W + 1), dtype=np.uint32) +
             f * 100000).tofile(p)
            self.files.append(p)
        dec = wharf.decode.tokens("u32", self.W, out="same")
        self.ix = wharf.Index.build(self.path("t.idx"), files=self.files,
                                    record_bytes=dec.record_bytes)
        self.addCleanup(self.ix.close)

    def epoch(self, epoch, windows="moving", seed=5, state=None, stop=None,
              num_workers=2):
        """{sample: (input, target)} of one epoch, and the state after stop
        batches."""
        l = self.loader(self.ix, batch_size=4, shuffle=True, seed=seed,
                        num_workers=num_workers,
                        decode=wharf.decode.tokens("u32", self.W, out="same",
                                                   windows=windows))
        if state is not None:
            l.load_state_dict(state)
        else:
            l.set_epoch(epoch)
        got = {}
        for k, b in enumerate(l):
            x, y = b
            for i, s in enumerate(b.samples):
                got[int(s)] = (x[i].copy(), y[i].copy())
            if stop is not None and k + 1 == stop:
                return got, l.state_dict()
        return got, None

    def test_every_pair_trained(self):
        trained = [set() for _ in self.RECORDS]
        for e in range(2):
            got, _ = self.epoch(e)
            self.assertEqual(len(got), sum(self.RECORDS))
            for s, (x, y) in got.items():
                f = int(x[0]) // 100000
                np.testing.assert_array_equal(y, x + 1)
                trained[f].update(int(v) % 100000 for v in x)
                if e == 0:
                    self.assertEqual(int(x[0]) % 100000,
                                     (s - f * self.RECORDS[0]) *
                                     (self.W + 1))
        for f, n in enumerate(self.RECORDS):
            # Every pair (t[i], t[i + 1]) inside the records.
            self.assertEqual(trained[f], set(range(n * (self.W + 1) - 1)))

    def test_fixed_never_trains_the_boundary(self):
        for e in range(3):
            got, _ = self.epoch(e, windows="fixed")
            for s, (x, _) in got.items():
                self.assertEqual(int(x[0]) % 100000 % (self.W + 1), 0)

    def test_pure_function_of_seed_and_epoch(self):
        a, _ = self.epoch(3)
        b, _ = self.epoch(3, num_workers=0)
        self.assertEqual(a.keys(), b.keys())
        for s in a:
            np.testing.assert_array_equal(a[s][0], b[s][0])

    def test_resumed_epoch_equals_uninterrupted(self):
        full, _ = self.epoch(2)
        first, state = self.epoch(2, stop=4)
        rest, _ = self.epoch(None, state=state, num_workers=1)
        self.assertEqual(set(first) | set(rest), set(full))
        self.assertFalse(set(first) & set(rest))
        for s, (x, _) in list(first.items()) + list(rest.items()):
            np.testing.assert_array_equal(x, full[s][0])


if __name__ == "__main__":
    unittest.main()
