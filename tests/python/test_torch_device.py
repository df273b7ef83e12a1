"""wharf.torch's device path: batches on the GPU, ordered on the stream.

TestFakeCuda runs it everywhere libwharf has CUDA, against the stand-in
runtime of test-cuda-host (fake-cudart.c, preloaded in a child process) and
a stand-in for torch.cuda.  The tests that need a GPU skip without one (one
SKIP line each); tests/gpu/run runs this file on a GPU machine and fails on
any skip.  There $WHARF_EXPECT_CUDA_PATH names the path the loader must
take ("prefetch": libwharf built with CUDA).
"""

import os
import shutil
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

GPU = torch is not None and torch.cuda.is_available()


@unittest.skipIf(torch is None, NO_TORCH)
class TestBrokenCuda(unittest.TestCase):
    def test_broken_cuda_is_an_error_not_a_fallback(self):
        # libwharf says its CUDA is broken (a driver too old): device="cuda"
        # raises with the runtime's words instead of copying quietly.
        c = wharf.torch._c
        if not getattr(c, "wharf_has_cuda_api", False):
            self.skipTest("libwharf predates wharf/cuda.h")
        saved = c.wharf_cuda_available, c.wharf_last_error
        msg = (b"CUDA cudaGetDeviceCount: CUDA driver version is "
               b"insufficient for CUDA runtime version: update the driver")
        c.wharf_cuda_available = lambda: -5
        c.wharf_last_error = lambda: msg
        try:
            with self.assertRaises(wharf.WharfError) as cm:
                wharf.torch._cuda_api_ready()
        finally:
            c.wharf_cuda_available, c.wharf_last_error = saved
        self.assertIn("insufficient", str(cm.exception))
        self.assertIn("update the driver", str(cm.exception))


FAKE_CUDART = os.path.join(os.environ.get("WHARF_BUILDDIR", ""), "tests",
                           "python", ".libs", "fakecudart.so")


def labelled_records(test, n):
    """n float32 (3, 5) records in test.dir, labels 1000 + 3i (a stale label
    shows): (records, labels, index)."""
    rng = np.random.default_rng(6)
    recs = rng.standard_normal((n, 3, 5)).astype(np.float32)
    path = os.path.join(test.dir, "r.f32")
    recs.tofile(path)
    labels = np.arange(n, dtype=np.int64) * 3 + 1000
    ix = wharf.Index.build(
        os.path.join(test.dir, "r.idx"),
        samples=[(path, i * 60, 60, int(labels[i])) for i in range(n)])
    test.addCleanup(ix.close)
    return recs, labels, ix


@unittest.skipIf(torch is None, NO_TORCH)
class TestFakeCuda(unittest.TestCase):
    """The device path against the stand-in runtime (fake-cudart.c), whose
    host-to-device copies take 20 ms, and a stand-in for torch.cuda: a
    read of the buffer on another stream than the copy's event guards (the
    labels' cast, once) sees it before the copy lands."""

    def setUp(self):
        if not os.path.exists(FAKE_CUDART):
            self.skipTest("%s not built (libwharf without CUDA)"
                          % FAKE_CUDART)
        self.dir = tempfile.mkdtemp(prefix="wharf-ptf-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.shm = os.path.join(self.dir, "shm")
        os.mkdir(self.shm)
        self.recs, self.labels, self.ix = labelled_records(self, 48)

    def run_child(self, which):
        import json
        import subprocess
        import sys
        env = dict(os.environ)
        pre = env.get("LD_PRELOAD")  # an ASan runtime stays first
        env["LD_PRELOAD"] = (pre + " " if pre else "") + FAKE_CUDART
        env["WHARF_FAKE_CUDART"] = FAKE_CUDART
        r = subprocess.run(
            [sys.executable,
             os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          "fake_torch_cuda.py"),
             os.path.join(self.dir, "r.idx"), self.shm, "48", "6", which],
            capture_output=True, text=True, timeout=300, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout.splitlines()[-1])
        self.assertEqual(out["cuda_path"], "prefetch")
        np.testing.assert_array_equal(
            np.array(out["data"], np.float32), self.recs.ravel())
        np.testing.assert_array_equal(out["labels"], self.labels)
        self.assertEqual(out["misuses"], 0, out["first_misuse"])

    def test_given_stream(self):
        self.run_child("given")

    def test_current_stream(self):
        self.run_child("current")


@unittest.skipIf(torch is None, NO_TORCH)
class TestTorchDevice(unittest.TestCase):
    N, BATCH = 96, 8

    def setUp(self):
        if not GPU:
            self.skipTest("no CUDA device (torch %s sees none)"
                          % torch.__version__)
        self.dir = tempfile.mkdtemp(prefix="wharf-ptd-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.shm = os.path.join(self.dir, "shm")
        os.mkdir(self.shm)
        self.recs, self.labels, self.ix = labelled_records(self, self.N)

    def expected_path(self):
        want = os.environ.get("WHARF_EXPECT_CUDA_PATH")
        if want:
            return want
        ok, _ = wharf.torch._cuda_api_ready()
        return "prefetch" if ok else "copy"

    def epoch(self, stream, sleep_cycles=0, **kw):
        """One epoch in order; each step keeps clones made on the step's
        stream and, with sleep_cycles, first keeps that stream busy, which
        holds the next copy into the buffer until the step is done."""
        l = wharf.torch.Loader(self.ix, batch_size=self.BATCH,
                               num_workers=2, shm_dir=self.shm,
                               device="cuda", stream=stream,
                               decode=wharf.decode.array("float32", (3, 5)),
                               **kw)
        self.addCleanup(l.close)
        self.assertEqual(l.cuda_path, self.expected_path(), l.cuda_note)
        s = stream or torch.cuda.current_stream()
        xs, ys = [], []
        for x, y in l:
            self.assertEqual(x.device.type, "cuda")
            self.assertEqual(y.dtype, torch.int64)
            with torch.cuda.stream(s):
                if sleep_cycles:
                    torch.cuda._sleep(sleep_cycles)
                xs.append(x.clone())
                ys.append(y.clone())
            del x, y
        torch.cuda.synchronize()
        return l, torch.cat(xs).cpu(), torch.cat(ys).cpu()

    def check(self, x, y):
        np.testing.assert_array_equal(x.numpy(), self.recs)
        np.testing.assert_array_equal(y.numpy(), self.labels)

    def test_current_stream(self):
        _, x, y = self.epoch(None)
        self.check(x, y)

    def test_given_stream(self):
        l, x, y = self.epoch(torch.cuda.Stream())
        self.check(x, y)
        # A second pass is epoch 1, and a checkpoint counts handed-out
        # batches only.
        it = iter(l)
        next(it)
        self.assertEqual(l.state_dict()["position"], 1)
        self.assertEqual(l.state_dict()["epoch"], 1)

    def test_given_stream_with_delayed_copies(self):
        # Each step keeps its stream busy for ~10 ms before it lets the
        # batch go: the copy into a buffer lands late, and whatever read
        # the buffer off that stream (the labels' cast, once) sees the batch
        # before.
        _, x, y = self.epoch(torch.cuda.Stream(), sleep_cycles=20_000_000)
        self.check(x, y)

    def test_fresh_workers_after_registration(self):
        # persistent=False forks workers again each epoch, after the ring
        # was registered with CUDA.
        stream = torch.cuda.Stream()
        l, x, y = self.epoch(stream, persistent_workers=False)
        self.check(x, y)
        xs, ys = [], []
        for xb, yb in l:
            with torch.cuda.stream(stream):
                xs.append(xb.clone())
                ys.append(yb.clone())
        torch.cuda.synchronize()
        self.check(torch.cat(xs).cpu(), torch.cat(ys).cpu())


if __name__ == "__main__":
    unittest.main()
