"""wharf.decode.jpeg against torchvision, on JPEGs written here with PIL.

The eval transform (crop="center") must agree with torchvision's
Resize(256) + CenterCrop(224) on PIL images within MAD_LIMIT (1 level of
255) per image: the mean absolute difference over all pixels and
channels.  Measured: at most 0.01 level for the pictures decoded at a DCT
scale of 8/8 (RGB, grayscale, CMYK, progressive alike), about 0.2 level
for the 2000 x 1500 one, which the decoder reads at 4/8.  A random crop
forced to the whole 4:3 picture agrees with Resize((224, 224)) within
RANDOM_MAD_LIMIT (1.5): measured 0.004 at 8/8, 0.4 to 0.6 where the
decoder reads at 2/8 or 4/8 (random crops allow a smaller DCT scale than
the eval crop: at least 224 pixels, not 448).  Skips where
torchvision, PIL, or libwharf's jpeg decoder are missing.
"""

import os
import shutil
import subprocess
import sys
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
    import torchvision.transforms as T
    from PIL import Image
except ImportError:  # pragma: no cover - depends on the machine
    T = None

MAD_LIMIT = 1.0  # levels of 255, per image
# Random crops are decoded at 1/4 or 1/2 of the size where the crop allows
# it (at least 224 pixels left), which differs more from a full decode.
RANDOM_MAD_LIMIT = 1.5
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SIZES = [(500, 375), (375, 500), (333, 257), (640, 480), (1200, 900),
         (257, 333), (224, 224), (300, 200), (2000, 1500)]


def _photo(rng, w, h):
    """Shapes, gradients and grain: what a photograph asks of a decoder."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([x * 255 / w, y * 255 / h,
                    128 + 90 * np.sin(x / 13) * np.cos(y / 11)], -1)
    for _ in range(4):
        cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(20, 90)
        inside = ((x - cx) ** 2 + (y - cy) ** 2 < r * r)[..., None]
        img = np.where(inside, rng.uniform(0, 255, 3), img)
    img += rng.normal(0, 6, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def _has_jpeg():
    """Whether libwharf takes a jpeg spec (it was built with libjpeg)."""
    import ctypes
    from wharf import _c
    h = ctypes.c_void_p()
    if _c.wharf_decoder_new(b"jpeg size=8", ctypes.byref(h)):
        return False
    _c.wharf_decoder_free(h)
    return True


@unittest.skipIf(torch is None, NO_TORCH)
@unittest.skipIf(T is None, "torchvision or PIL is not installed "
                 "(apt-get install python3-torchvision)")
@unittest.skipUnless(_has_jpeg(), "libwharf was built without jpeg")
class TestJpeg(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="wharf-pyjpeg-")
        rng = np.random.default_rng(18)
        img = os.path.join(cls.dir, "img")
        os.mkdir(img)
        cls.paths = []
        for i, (w, h) in enumerate(SIZES):
            p = os.path.join(img, "%02d-rgb.jpg" % i)
            Image.fromarray(_photo(rng, w, h)).save(p, quality=90)
            cls.paths.append(p)
        p = os.path.join(img, "20-gray.jpg")
        Image.fromarray(_photo(rng, 410, 300)).convert("L").save(p)
        cls.paths.append(p)
        p = os.path.join(img, "21-cmyk.jpg")
        Image.fromarray(_photo(rng, 380, 290)).convert("CMYK").save(p)
        cls.paths.append(p)
        p = os.path.join(img, "22-progressive.jpg")
        Image.fromarray(_photo(rng, 500, 375)).save(p, progressive=True)
        cls.paths.append(p)
        cls.ix = wharf.Index.build(os.path.join(cls.dir, "idx"), dir=img)

    @classmethod
    def tearDownClass(cls):
        cls.ix.close()
        shutil.rmtree(cls.dir, True)

    def decode(self, dec, **kw):
        """Every sample's output, in index order, as one tensor."""
        kw.setdefault("num_workers", 2)
        epoch = kw.pop("epoch", 0)
        out = [None] * len(self.paths)
        with wharf.torch.Loader(self.ix, batch_size=4, decode=dec,
                                **kw) as ld:
            ld.set_epoch(epoch)
            for b in ld:
                x = b[0]
                for k, sid in enumerate(b.samples.tolist()):
                    out[sid] = x[k].clone()
        return torch.stack(out)

    def test_eval_matches_torchvision(self):
        got = self.decode(wharf.decode.jpeg(224, crop="center"))
        self.assertEqual(got.dtype, torch.uint8)
        self.assertEqual(tuple(got.shape), (len(self.paths), 3, 224, 224))
        ref = T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()])
        mads = []
        for i, p in enumerate(self.paths):
            want = ref(Image.open(p).convert("RGB"))
            mad = (got[i].int() - want.int()).abs().float().mean().item()
            mads.append(mad)
            self.assertLess(mad, MAD_LIMIT, "%s: MAD %.3f" % (p, mad))
        print("\n  eval MAD vs torchvision, levels of 255: " +
              ", ".join("%s %.3f" % (os.path.basename(p), m)
                        for p, m in zip(self.paths, mads)))

    def test_whole_image_crop_matches_resize(self):
        # A random-resized crop forced to the whole 4:3 picture is a plain
        # resize to 224 x 224: torchvision's Resize((224, 224)).
        got = self.decode(wharf.decode.jpeg(224, scale=(1, 1),
                                            ratio=(4 / 3, 4 / 3),
                                            flip=False))
        ref = T.Compose([T.Resize((224, 224)), T.PILToTensor()])
        mads = {}
        for i, (w, h) in enumerate(SIZES):
            if w * 3 != h * 4:
                continue
            want = ref(Image.open(self.paths[i]).convert("RGB"))
            mads[w] = (got[i].int() - want.int()).abs().float().mean().item()
            self.assertLess(mads[w], RANDOM_MAD_LIMIT, "%dx%d" % (w, h))
        self.assertTrue(mads, "no 4:3 picture among SIZES")
        print("\n  whole-image crop MAD vs Resize((224, 224)): " +
              ", ".join("%d wide %.3f" % wm for wm in mads.items()))

    def test_float_is_normalized_u8(self):
        u8 = self.decode(wharf.decode.jpeg(64, crop="center"))
        f32 = self.decode(wharf.decode.jpeg(64, crop="center",
                                            dtype="float32", mean=MEAN,
                                            std=STD))
        self.assertEqual(f32.dtype, torch.float32)
        want = (u8.float() / 255 - torch.tensor(MEAN)[:, None, None]) / \
            torch.tensor(STD)[:, None, None]
        torch.testing.assert_close(f32, want, rtol=0, atol=1e-5)
        hwc = self.decode(wharf.decode.jpeg(64, crop="center",
                                            layout="hwc"))
        self.assertEqual(tuple(hwc.shape), (len(self.paths), 64, 64, 3))
        self.assertTrue(torch.equal(hwc.permute(0, 3, 1, 2), u8))

    def test_random_crops_follow_seed_and_epoch(self):
        dec = wharf.decode.jpeg(96)
        a = self.decode(dec, seed=3, epoch=1, shuffle=True, num_workers=0)
        b = self.decode(dec, seed=3, epoch=1, num_workers=2)
        c = self.decode(dec, seed=3, epoch=2, num_workers=2)
        self.assertTrue(torch.equal(a, b))
        self.assertFalse(torch.equal(a, c))

    def test_example_trains(self):
        # examples/train_jpeg.py on two classes of the pictures (links).
        tree = os.path.join(self.dir, "tree")
        for i, p in enumerate(self.paths):
            d = os.path.join(tree, "c%d" % (i % 2))
            os.makedirs(d, exist_ok=True)
            os.symlink(p, os.path.join(d, os.path.basename(p)))
        ex = os.path.join(os.environ.get("WHARF_SRCDIR", os.path.join(
            os.path.dirname(__file__), "..", "..")), "examples",
            "train_jpeg.py")
        r = subprocess.run([sys.executable, ex, tree, "--epochs", "2",
                            "--size", "32", "--batch-size", "4",
                            "--device", "cpu"],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("epoch 1: %d samples" % len(self.paths), r.stdout)
        self.assertIn("eval (center crop", r.stdout)

    def test_spec_errors_are_value_errors(self):
        with self.assertRaises(ValueError):
            wharf.decode.jpeg(224, crop="middle")
        with self.assertRaises(ValueError):
            wharf.decode.jpeg(224, mean=MEAN, std=STD)
        with self.assertRaises(wharf.WharfError):
            wharf.torch.Loader(self.ix, decode=wharf.decode.jpeg(0))


if __name__ == "__main__":
    unittest.main()
