"""A batch kept by the caller must not keep a wharf mount busy.

A loop's last batch is often still referenced when the script (or a
notebook cell) unmounts: `last = batch` kept for logging, a traceback.
Each test serves a dataset with bench/origin, mounts it with `wharf mount
-f`, reads a batch, keeps it, closes (or drops) the loader, and runs
`wharf umount`: it must succeed, and the batch must still read right.
Run by tests/test-python.sh (make check), which sets WHARF_BUILDDIR.
"""

import gc
import os
import shutil
import subprocess
import tempfile
import time
import unittest

import numpy as np

import wharf

BUILDDIR = os.environ.get("WHARF_BUILDDIR", "")
WHARF = os.path.join(BUILDDIR, "cli", "wharf")
ORIGIN = os.path.join(BUILDDIR, "bench", "origin")
SIZE = 32  # bytes per sample file
FILES = 12


def _missing():
    """Why the mount tests cannot run here, or None."""
    if not os.path.exists(WHARF) or not os.path.exists(ORIGIN):
        return "%s or %s is not built (a build with the filesystem)" % (
            WHARF, ORIGIN)
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not usable here"
    if os.geteuid() != 0 and not shutil.which("fusermount3"):
        return "fusermount3 is not installed (apt-get install fuse3)"
    return None


def _wait_for(path, proc, what, timeout=30, filled=False):
    """Polls (bounded) until path exists (filled: and is not empty); fails
    if proc ends first."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) or (filled and
                                       not os.path.getsize(path)):
        if proc.poll() is not None:
            raise AssertionError("%s exited with %s" % (what, proc.returncode))
        if time.monotonic() > deadline:
            raise AssertionError("%s did not come up in %d s" % (what,
                                                                 timeout))
        time.sleep(0.02)


def _held_under(d):
    """This process's descriptors and mappings of files under d."""
    d = d + "/"
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if target.startswith(d):
            found.append(target)
    with open("/proc/self/maps") as f:
        found += [line.split()[-1] for line in f if d in line]
    return found


@unittest.skipIf(_missing(), _missing() or "")
class TestKeptBatchLetsTheMountGo(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="wharf-pyhold-")
        self.addCleanup(shutil.rmtree, self.work, True)
        self.mnt = tempfile.mkdtemp(prefix="wharf-pyhold-mnt-")
        self.addCleanup(self._unmount_leftover)
        data = os.path.join(self.work, "data")
        os.makedirs(os.path.join(data, "c0"))
        rng = np.random.default_rng(3)
        self.files = {}
        for i in range(FILES):
            name = "c0/f%02d" % i
            b = rng.integers(0, 256, SIZE, dtype=np.uint8).tobytes()
            with open(os.path.join(data, name), "wb") as f:
                f.write(b)
            self.files[os.path.join(self.mnt, name)] = b
        # An index that lies on the mount too, naming the mount's files.
        wharf.Index.build(
            os.path.join(data, "train.idx"),
            samples=[(p, 0, SIZE, 0) for p in sorted(self.files)]).close()
        self.index_path = os.path.join(self.mnt, "train.idx")
        self.shm = os.path.join(self.work, "shm")
        os.mkdir(self.shm)
        port_file = os.path.join(self.work, "port")
        log = open(os.path.join(self.work, "log"), "ab")
        self.addCleanup(log.close)
        self.origin = subprocess.Popen(
            [ORIGIN, "--port-file", port_file, data], stdout=log,
            stderr=log)
        self.addCleanup(self._stop, self.origin)
        _wait_for(port_file, self.origin, "bench/origin", filled=True)
        with open(port_file) as f:
            url = "http://127.0.0.1:%d/" % int(f.read())
        self.daemon = subprocess.Popen(
            [WHARF, "mount", "-f", "--cache-dir",
             os.path.join(self.work, "cache"), url, self.mnt],
            stdout=log, stderr=log)
        self.addCleanup(self._stop, self.daemon)
        _wait_for(os.path.join(self.mnt, ".wharf", "stats"), self.daemon,
                  "wharf mount")

    @staticmethod
    def _stop(proc):
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _unmount_leftover(self):
        with open("/proc/self/mounts") as f:
            if any(line.split()[1] == self.mnt for line in f):
                subprocess.run(["umount", "-l", self.mnt])
        os.rmdir(self.mnt)

    def umount(self):
        return subprocess.run([WHARF, "umount", self.mnt],
                              capture_output=True, text=True, timeout=60)

    def assert_unmounts(self):
        r = self.umount()
        self.assertEqual(r.returncode, 0,
                         "wharf umount: %s(held here: %s)"
                         % (r.stderr, _held_under(self.mnt)))
        self.assertEqual(self.daemon.wait(30), 0)

    def assert_intact(self, data, samples):
        want = [self.files[p] for p in sorted(self.files)]
        self.assertEqual([bytes(x) for x in data],
                         [want[int(s)] for s in samples])

    def test_batch_kept_after_with(self):
        # The index by its path on the mount: the Loader opens and owns it.
        with wharf.Loader(self.index_path, batch_size=4, num_workers=2,
                          shuffle=True, shm_dir=self.shm,
                          decode=wharf.decode.raw(SIZE)) as loader:
            for batch in loader:
                last = batch
        self.assertEqual(_held_under(self.mnt), [])
        self.assert_unmounts()
        self.assert_intact(last.data, last.samples)

    def test_dropped_loader_with_a_batch_kept(self):
        # No workers: the loader reads in this process.  Never closed, the
        # loop abandoned: dropping the Loader closes it.
        ix = wharf.Index(self.index_path)
        loader = wharf.Loader(ix, batch_size=4, num_workers=0,
                              shm_dir=self.shm, decode=wharf.decode.raw(SIZE))
        for batch in loader:
            break
        x, ids = batch.data, list(map(int, batch.samples))
        del loader, batch
        gc.collect()
        ix.close()
        self.assertEqual(_held_under(self.mnt), [])
        self.assert_unmounts()
        self.assert_intact(x, ids)

    def test_index_made_for_the_loader_goes_with_it(self):
        # wharf.Index(...) made inline: only the Loader refers to it, and
        # the batch kept past the dropped Loader must not keep it mapped.
        loader = wharf.Loader(wharf.Index(self.index_path), batch_size=4,
                              num_workers=2, shm_dir=self.shm,
                              decode=wharf.decode.raw(SIZE))
        last = loader.next_batch()
        del loader
        gc.collect()
        self.assertEqual(_held_under(self.mnt), [])
        self.assert_unmounts()
        self.assert_intact(last.data, last.samples)

    def test_busy_mount_names_what_holds_it(self):
        ix = wharf.Index(self.index_path)
        with wharf.Loader(ix, batch_size=4, num_workers=1, shm_dir=self.shm,
                          decode=wharf.decode.raw(SIZE)) as loader:
            last = loader.next_batch()
        # The index is the caller's: open, it keeps the mount busy, and
        # wharf umount says who holds what.
        r = self.umount()
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("process %d (" % os.getpid(), r.stderr)
        self.assertIn("mapped %s" % self.index_path, r.stderr)
        ix.close()
        self.assert_unmounts()
        self.assert_intact(last.data, last.samples)


if __name__ == "__main__":
    unittest.main()
