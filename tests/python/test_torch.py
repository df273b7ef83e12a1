"""wharf.torch: tensors over the ring, without copies."""

import os
import shutil
import tempfile
import time
import unittest

import numpy as np

import wharf

try:
    import torch
    import wharf.torch
except ImportError:  # numpy alone: the tests that need torch skip, each
    torch = None     # with its own SKIP line
NO_TORCH = "torch is not installed (apt-get install python3-torch)"


@unittest.skipIf(torch is None, NO_TORCH)
class TestTorch(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="wharf-pyt-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.shm = os.path.join(self.dir, "shm")
        os.mkdir(self.shm)
        rng = np.random.default_rng(4)
        self.recs = rng.standard_normal((24, 3, 5)).astype(np.float32)
        self.recs.tofile(os.path.join(self.dir, "r.f32"))
        self.ix = wharf.Index.build(os.path.join(self.dir, "r.idx"),
                                    files=[os.path.join(self.dir, "r.f32")],
                                    record_bytes=3 * 5 * 4)
        self.addCleanup(self.ix.close)

    def loader(self, **kw):
        kw.setdefault("num_workers", 2)
        l = wharf.torch.Loader(self.ix, shm_dir=self.shm, **kw)
        self.addCleanup(l.close)
        return l

    def test_tensors_equal_records_and_share_the_ring(self):
        l = self.loader(batch_size=5, shuffle=True, seed=1,
                        decode=wharf.decode.array("float32", (3, 5)))
        n, where = 0, set()
        for epoch in range(3):
            for b in l:
                x, y = b
                self.assertIsInstance(x, torch.Tensor)
                self.assertEqual(x.dtype, torch.float32)
                self.assertEqual(tuple(x.shape), (b.count, 3, 5))
                ids = b.samples.numpy().astype(np.int64)
                np.testing.assert_array_equal(x.numpy(), self.recs[ids])
                self.assertTrue(torch.all(y == -1))
                self.assertEqual(y.dtype, torch.int64)
                self.assertFalse(b.copied)
                where.add(x.data_ptr())
                n += b.count
        self.assertEqual(n, 72)
        # Zero copy: 15 batches lay in the ring's 2 x 2 + 2 slots.
        self.assertLessEqual(len(where), 6)

    def test_batch_of_an_abandoned_loop_stays_valid(self):
        # One worker slot: had the dropped loop given b's slot back, the
        # worker would have filled it with batch 1 by now.
        l = self.loader(batch_size=5, num_workers=1, prefetch=1,
                        decode=wharf.decode.array("float32", (3, 5)))
        b = next(iter(l))
        time.sleep(0.2)
        np.testing.assert_array_equal(b.data.numpy(), self.recs[:5])
        # A new loop is the next epoch; b stays as it was.
        got = [x.clone() for x, _ in l]
        np.testing.assert_array_equal(torch.cat(got).numpy(), self.recs)
        np.testing.assert_array_equal(b.data.numpy(), self.recs[:5])

    def test_kept_tensor_after_the_with_block(self):
        # The habit that crashed the interpreter: keep the last batch for
        # logging, use it after the loader is gone.
        with wharf.torch.Loader(self.ix, batch_size=5, num_workers=2,
                                shm_dir=self.shm, shuffle=True,
                                decode=wharf.decode.array("float32",
                                                          (3, 5))) as l:
            for b in l:
                last, ids = b.data, b.samples.numpy().astype(np.int64)
        del l, b
        import gc
        gc.collect()
        time.sleep(0.1)
        self.assertAlmostEqual(float(last.float().mean()),
                               float(self.recs[ids].mean()), places=5)
        np.testing.assert_array_equal(last.numpy(), self.recs[ids])

    def test_appended_batches_equal_their_clones(self):
        rng = np.random.default_rng(8)
        recs = rng.standard_normal((100, 4)).astype(np.float32)
        path = os.path.join(self.dir, "h.f32")
        recs.tofile(path)
        ix = wharf.Index.build(os.path.join(self.dir, "h.idx"), files=[path],
                               record_bytes=16)
        self.addCleanup(ix.close)
        l = wharf.torch.Loader(ix, batch_size=2, shuffle=True, seed=3,
                               num_workers=2, shm_dir=self.shm,
                               decode=wharf.decode.array("float32", (4,)))
        self.addCleanup(l.close)
        kept, clones = [], []
        with self.assertWarns(RuntimeWarning):
            for x, y in l:
                kept.append(x)
                clones.append(x.clone())
        self.assertEqual(len(kept), 50)
        for k, c in zip(kept, clones):
            self.assertTrue(torch.equal(k, c))
        got = torch.cat(kept).numpy()
        self.assertEqual(sorted(map(bytes, got)), sorted(map(bytes, recs)))

    def test_dataloader_keywords(self):
        g = torch.Generator().manual_seed(11)
        a = self.loader(batch_size=4, shuffle=True, generator=g,
                        decode=wharf.decode.array("float32", (3, 5)))
        b = self.loader(batch_size=4, shuffle=True, seed=11,
                        decode=wharf.decode.array("float32", (3, 5)))
        self.assertEqual([s.tolist() for x in a for s in [x.samples]],
                         [s.tolist() for x in b for s in [x.samples]])
        with self.assertRaises(ValueError) as cm:
            self.loader(seed=3, generator=g)
        self.assertIn("disagree", str(cm.exception))
        if torch.cuda.is_available():
            self.skipTest("pin_memory without a GPU is what is checked")
        with self.assertWarns(UserWarning) as cm:
            p = self.loader(batch_size=4, pin_memory=True)
        self.assertIn("no CUDA device", str(cm.warning))
        self.assertEqual(sum(x.count for x in p), 24)

    def test_tokens_as_long_tensors(self):
        toks = np.arange(4 * 9, dtype=np.uint16)
        path = os.path.join(self.dir, "t.u16")
        toks.tofile(path)
        dec = wharf.decode.tokens("uint16", 8)
        ix = wharf.Index.build(os.path.join(self.dir, "t.idx"), files=[path],
                               record_bytes=dec.record_bytes)
        self.addCleanup(ix.close)
        l = wharf.torch.Loader(ix, batch_size=4, decode=dec, num_workers=1,
                               shm_dir=self.shm)
        self.addCleanup(l.close)
        x, y = next(iter(l))
        self.assertEqual(x.dtype, torch.int64)
        want = torch.from_numpy(toks.astype(np.int64).reshape(4, 9))
        self.assertTrue(torch.equal(x, want[:, :8]))
        self.assertTrue(torch.equal(y, want[:, 1:]))
        # An embedding and a loss take them as they are.
        emb = torch.nn.Embedding(64, 4)
        loss = torch.nn.functional.cross_entropy(
            emb(x).reshape(-1, 4), (y % 4).reshape(-1))
        self.assertTrue(torch.isfinite(loss))


@unittest.skipIf(torch is None, NO_TORCH)
class TestExample(unittest.TestCase):
    def test_train_imagefolder_runs(self):
        import subprocess
        import sys
        src = os.environ.get("WHARF_SRCDIR", os.path.join(
            os.path.dirname(__file__), "..", ".."))
        d = tempfile.mkdtemp(prefix="wharf-pyx-")
        self.addCleanup(shutil.rmtree, d, True)
        rng = np.random.default_rng(2)
        for c in range(3):
            os.makedirs(os.path.join(d, "train", "c%d" % c))
            for i in range(20):
                rng.integers(0, 256, int(rng.integers(100, 5000)),
                             dtype=np.uint8).tofile(
                    os.path.join(d, "train", "c%d" % c, "%d.bin" % i))
        r = subprocess.run(
            [sys.executable, os.path.join(src, "examples",
                                          "train_imagefolder.py"),
             os.path.join(d, "train"), "--epochs", "2", "--batch-size", "8",
             "--bytes", "512", "--device", "cpu"],
            capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("index: 60 files, 3 classes", r.stdout)
        self.assertIn("epoch 1: 60 samples", r.stdout)
        self.assertIn("data stall", r.stdout)


if __name__ == "__main__":
    unittest.main()
