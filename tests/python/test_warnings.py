"""libwharf's messages in Python (issue 43, defect 7): its warnings are
Python warnings of category wharf.WharfWarning, which a trainer can
filter, record or turn into errors; its error messages go to
logging.getLogger("wharf").  Neither is written to the C stderr.

Run by tests/test-python.sh (make check).
"""

import io
import os
import shutil
import signal
import tarfile
import tempfile
import threading
import unittest
import warnings

import wharf
from test_loader import children


def write_shard(path, n):
    """n samples of two members each, in a WebDataset tar shard."""
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as t:
        for k in range(n):
            for ext, data in (("bin", bytes([k]) * 600), ("cls", b"%d" % k)):
                ti = tarfile.TarInfo("%04d.%s" % (k, ext))
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))


class CStderr:
    """What C writes to file descriptor 2 inside the with block."""

    def __enter__(self):
        self.file = tempfile.TemporaryFile()
        self.saved = os.dup(2)
        os.dup2(self.file.fileno(), 2)
        return self

    def __exit__(self, *exc):
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.file.seek(0)
        self.text = self.file.read().decode("utf-8", "replace")
        self.file.close()


class TestWarnings(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="wharf-pywarn-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.shard = os.path.join(self.dir, "shard.tar")
        write_shard(self.shard, 8)
        # Cut inside a member: partial=True keeps the samples before it,
        # with libwharf's warning "...; kept the N samples before it".
        with open(self.shard, "r+b") as f:
            f.truncate(os.path.getsize(self.shard) // 2 + 100)
        self.n = 0

    def build(self):
        self.n += 1
        ix = wharf.Index.build(os.path.join(self.dir, "%d.idx" % self.n),
                               tar=[self.shard], partial=True)
        ix.close()

    def test_category(self):
        self.assertTrue(issubclass(wharf.WharfWarning, UserWarning))
        self.assertIn("WharfWarning", wharf.__all__)

    def test_c_warning_is_a_python_warning(self):
        with CStderr() as err:
            with warnings.catch_warnings(record=True) as got:
                warnings.simplefilter("always")
                self.build()
        ours = [w for w in got if issubclass(w.category, wharf.WharfWarning)]
        self.assertEqual(len(ours), 1, [str(w.message) for w in got])
        self.assertIn("kept the", str(ours[0].message))
        self.assertIn("shard.tar", str(ours[0].message))
        # It names the caller's line, not the binding's.
        self.assertEqual(ours[0].filename, __file__)
        self.assertNotIn("kept the", err.text)

    def test_filters_apply(self):
        with CStderr() as err:
            with warnings.catch_warnings(record=True) as got:
                warnings.simplefilter("always")
                warnings.filterwarnings("ignore",
                                        category=wharf.WharfWarning)
                self.build()
        self.assertEqual(got, [])
        self.assertEqual(err.text, "")
        with warnings.catch_warnings():
            warnings.simplefilter("error", wharf.WharfWarning)
            with self.assertRaises(wharf.WharfWarning) as cm:
                self.build()
        self.assertIn("kept the", str(cm.exception))
        # A call that fails after a warning raises its own error, and the
        # warning made an error is not left for a later call.
        with warnings.catch_warnings():
            warnings.simplefilter("error", wharf.WharfWarning)
            with self.assertRaises(wharf.WharfError) as cm:
                wharf.Index.build(os.path.join(self.dir, "two.idx"),
                                  tar=[self.shard, self.shard + ".gone"],
                                  partial=True)
        self.assertIn(".gone", str(cm.exception))
        # Raised once: the next call is clean.
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            wharf.Index.build(os.path.join(self.dir, "dir.idx"),
                              dir=self.dir).close()
        self.assertEqual(got, [])

    def test_warning_from_another_thread(self):
        # The log function runs on the thread that logs; a filter that
        # makes the warning an error raises there.
        errors = []

        def build():
            try:
                self.build()
            except wharf.WharfWarning as e:
                errors.append(e)

        with warnings.catch_warnings():
            warnings.simplefilter("error", wharf.WharfWarning)
            t = threading.Thread(target=build)
            t.start()
            t.join(60)
        self.assertEqual(len(errors), 1)
        self.assertIn("kept the", str(errors[0]))


class TestErrorsLogged(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="wharf-pylog-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        os.mkdir(os.path.join(self.dir, "data"))
        for i in range(40):
            with open(os.path.join(self.dir, "data", "f%02d" % i),
                      "wb") as f:
                f.write(bytes([i]) * 32)
        self.ix = wharf.Index.build(os.path.join(self.dir, "i.idx"),
                                    dir=os.path.join(self.dir, "data"))
        self.addCleanup(self.ix.close)

    def test_worker_death_goes_to_logging(self):
        before = children()
        l = wharf.Loader(self.ix, batch_size=2, num_workers=1, prefetch=1,
                         shm_dir=os.path.join(self.dir))
        self.addCleanup(l.close)
        kids = children() - before
        self.assertEqual(len(kids), 1)
        worker = kids.pop()
        os.kill(worker, signal.SIGKILL)
        with CStderr() as err:
            with self.assertLogs("wharf", "ERROR") as logs:
                with self.assertRaises(wharf.WharfError):
                    for _ in l:
                        pass
        self.assertEqual(len(logs.records), 1, logs.output)
        self.assertIn("pid %d) was killed by signal 9" % worker,
                      logs.records[0].getMessage())
        self.assertNotIn("killed", err.text)


if __name__ == "__main__":
    unittest.main()
