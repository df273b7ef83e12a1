"""What a training script may do to a wharf.Loader by mistake or by bad
luck, and what must hold through it: an exception while a batch is being
built (^C, MemoryError) never costs a batch held elsewhere its bytes; a
process forked after the Loader was made is refused, and its parent goes
on; a second iter() ends the first one instead of sharing its place.

Run by tests/test-python.sh (make check).
"""

import errno
import gc
import os
import select
import shutil
import signal
import tempfile
import unittest
import warnings
from unittest import mock

import numpy as np

import wharf


class Boom(Exception):
    """The failure injected into a batch's construction."""


def failing_on(n, fn, exc):
    """fn, except that its n-th call (from 1) raises exc instead."""
    calls = [0]

    def wrapper(*a, **kw):
        calls[0] += 1
        if calls[0] == n:
            raise exc("injected into call %d of %s" % (n, fn.__name__))
        return fn(*a, **kw)
    return wrapper


class Tmp(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="wharf-pymisuse-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.shm = os.path.join(self.dir, "shm")
        os.mkdir(self.shm)
        # 24 files of 16 bytes (fixed-size batches), and 24 of 16 to 20
        # (variable-size ones).
        self.files = {}
        rng = np.random.default_rng(3)
        for tree, extra in (("fixed", 0), ("varied", 5)):
            os.mkdir(os.path.join(self.dir, tree))
            for i in range(24):
                p = os.path.join(self.dir, tree, "f%03d" % i)
                b = rng.integers(0, 256, 16 + (i % extra if extra else 0),
                                 dtype=np.uint8).tobytes()
                with open(p, "wb") as f:
                    f.write(b)
                self.files[p] = b
        self.ix = self.index("fixed")
        self.vix = self.index("varied")
        self.n = 24

    def index(self, tree):
        ix = wharf.Index.build(os.path.join(self.dir, tree + ".idx"),
                               dir=os.path.join(self.dir, tree))
        self.addCleanup(ix.close)
        return ix

    def loader(self, ix=None, **kw):
        kw.setdefault("shm_dir", self.shm)
        kw.setdefault("batch_size", 2)
        l = wharf.Loader(ix or self.ix, **kw)
        self.addCleanup(l.close)
        return l

    def assert_intact(self, batch, ids, what, ix=None):
        ix = ix or self.ix
        self.assertEqual([int(s) for s in batch.samples], ids, what)
        for k, sid in enumerate(ids):
            self.assertEqual(bytes(batch.data[k]),
                             self.files[ix.sample(sid)[0]],
                             "%s: sample %d holds another batch's bytes"
                             % (what, sid))


class TestFailedBatch(Tmp):
    """Issue 43, defect 1: a batch whose construction raised gave its slot
    back, and its half-made lease, kept alive by the traceback, gave the
    same slot back again when it died, freeing whichever batch held the
    slot by then.  With no workers the loader fills the lowest free slot,
    so the batch taken right after the failure is in the failed one's
    slot: the one a second release would free."""

    # (function of the wharf module, which call fails, the exception):
    # the labels' copy, the samples' copy, the data's view, and for
    # variable-size batches the offsets' copy.
    POINTS = [("_copy_of", 1, MemoryError), ("_copy_of", 2, KeyboardInterrupt),
              ("_view", 1, KeyboardInterrupt), ("_view", 1, MemoryError)]

    def provoke(self, name, n, exc, ix, **kw):
        l = self.loader(ix, num_workers=0, prefetch=1, **kw)
        what = "%s call %d raising %s" % (name, n, exc.__name__)
        caught = None
        with mock.patch.object(wharf, name,
                               failing_on(n, getattr(wharf, name), exc)):
            try:
                l.next_batch()
            except exc as e:
                # Kept with its traceback and the frames' locals, as
                # IPython keeps the last one (assertRaises drops them).
                caught = e
        self.assertIsNotNone(caught, what + ": nothing raised")
        held = l.next_batch()
        ids = [int(s) for s in held.samples]
        # The traceback goes: whatever it kept alive dies now.
        del caught
        gc.collect()
        for _ in range(4):
            b = l.next_batch()
            self.assertIsNotNone(b)
            del b
        self.assert_intact(held, ids, what, ix)
        self.assertEqual(l.stats()["held_batches"], 1, what)
        del held
        # The loader still hands out the whole epoch.
        self.assertEqual(len([1 for _ in l]), self.n // 2)
        self.assertEqual(l.stats()["held_batches"], 0, what)

    def test_fixed_size(self):
        for name, n, exc in self.POINTS:
            with self.subTest(point=name, call=n, exc=exc.__name__):
                self.provoke(name, n, exc, self.ix,
                             decode=wharf.decode.raw(16))

    def test_variable_size(self):
        for name, n, exc in self.POINTS + [("_copy_of", 3, MemoryError)]:
            with self.subTest(point=name, call=n, exc=exc.__name__):
                self.provoke(name, n, exc, self.vix)

    def test_a_copied_batch(self):
        # held_batches=1 and two held: the third comes as a copy, whose
        # clone fails; the slot is given back once, the two stay.
        l = self.loader(num_workers=0, prefetch=1, held_batches=1)
        a, b = l.next_batch(), l.next_batch()
        ids = ([int(s) for s in a.samples], [int(s) for s in b.samples])
        # The copies' warning is test_loader's to check.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for exc in (MemoryError, KeyboardInterrupt):
                with mock.patch.object(wharf, "_clone",
                                       failing_on(1, wharf._clone, exc)):
                    with self.assertRaises(exc):
                        l.next_batch()
                gc.collect()
                c = l.next_batch()
                self.assertTrue(c.copied)
                del c
        self.assert_intact(a, ids[0], "first held")
        self.assert_intact(b, ids[1], "second held")
        self.assertEqual(l.stats()["held_batches"], 2)

    def test_lease_not_armed(self):
        # The lease goes live last: a failure in arming it is like one
        # before it, given back here, once.
        l = self.loader(num_workers=0, prefetch=1)
        with mock.patch.object(wharf._Lease, "arm",
                               failing_on(1, wharf._Lease.arm, Boom)):
            with self.assertRaises(Boom):
                l.next_batch()
        held = l.next_batch()
        ids = [int(s) for s in held.samples]
        gc.collect()
        for _ in range(4):
            l.next_batch()
        self.assert_intact(held, ids, "after a failed arm")
        self.assertEqual(l.stats()["held_batches"], 1)


class TestFork(Tmp):
    """Issue 43, defect 5: a child that used its parent's loader took the
    parent's batches and left the parent waiting for ever."""

    def run_child(self, fn):
        """fn() in a forked child; what it returns (a str) comes back."""
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                signal.alarm(30)  # a call that blocks says so
                out = fn()
            except BaseException as e:  # noqa: B902
                out = "child raised %r" % e
            finally:
                try:
                    os.write(w, out.encode())
                finally:
                    os._exit(0)
        os.close(w)
        got = b""
        while select.select([r], [], [], 60)[0]:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            got += chunk
        os.close(r)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(status, 0, "child: %s" % got.decode())
        return got.decode()

    def test_child_is_refused_and_the_parent_goes_on(self):
        l = self.loader(num_workers=2, timeout=60, held_batches=2)
        it = iter(l)
        first = next(it)
        ids = [int(s) for s in first.samples]

        def child():
            try:
                b = l.next_batch()
                return "next_batch gave a batch: %r" % (b and b.index)
            except wharf.WharfError as e:
                said = "%d %s" % (e.errno, e.strerror)
            # Each call is refused the same way.
            for call in (lambda: next(iter(l)), lambda: l.set_epoch(5),
                         l.state_dict, l.stats):
                try:
                    call()
                    return "a call after the first was not refused"
                except wharf.WharfError as e:
                    if e.errno != errno.EPERM:
                        return "refused with %r" % e
            return said

        said = self.run_child(child)
        self.assertTrue(said.startswith("%d " % errno.EPERM), said)
        self.assertIn("this loader was opened in process %d; open one in "
                      "each process (inside the DataLoader worker, not "
                      "before the fork)" % os.getpid(), said)
        # The parent: its batch intact, then every batch of the epoch.
        self.assert_intact(first, ids, "the parent's batch")
        rest = [int(s) for b in it for s in b.samples]
        self.assertEqual(sorted(ids + rest), list(range(self.n)))
        self.assert_intact(first, ids, "the parent's batch")
        self.assertEqual(len([1 for _ in l]), self.n // 2)

    def test_child_close_frees_only_its_copy(self):
        # As a DataLoader worker that drops a Loader copied into it: with
        # no batch held, its close reaches wharf_loader_close.
        l = self.loader(num_workers=2, timeout=60)
        it = iter(l)
        got = [int(s) for s in next(it).samples]

        def child():
            l.close()
            gc.collect()
            return "closed" if l._holder.loader is None else "still open"

        self.assertEqual(self.run_child(child), "closed")
        got += [int(s) for b in it for s in b.samples]
        self.assertEqual(sorted(got), list(range(self.n)))
        self.assertEqual(len([1 for _ in l]), self.n // 2)


class TestIterators(Tmp):
    """Issue 43, defect 6: two live iterators shared the loader's place,
    each moving the other to the next epoch, silently."""

    def test_second_iter_ends_the_first(self):
        l = self.loader(num_workers=2, shuffle=True, seed=3)
        a = iter(l)
        next(a)
        b = iter(l)
        with self.assertRaises(RuntimeError) as cm:
            next(a)
        self.assertIn("ended by a later iter()", str(cm.exception))
        # The new one is a full pass of the next epoch, as a fresh
        # loader's epoch 1.
        got = [int(s) for x in b for s in x.samples]
        self.assertEqual(l.epoch, 1)
        ref = self.loader(num_workers=0, shuffle=True, seed=3)
        ref.set_epoch(1)
        self.assertEqual(got, [int(s) for x in ref for s in x.samples])
        # Still ended, and a new pass is untouched by it.
        with self.assertRaises(RuntimeError):
            next(a)
        self.assertEqual(sum(1 for _ in iter(l)), self.n // 2)

    def test_finished_iterator_stays_finished(self):
        l = self.loader(num_workers=1)
        a = iter(l)
        self.assertEqual(sum(1 for _ in a), self.n // 2)
        iter(l)
        with self.assertRaises(StopIteration):
            next(a)

    def test_for_loops_and_next_iter(self):
        l = self.loader(num_workers=1)
        for epoch in range(3):
            self.assertEqual(sum(1 for _ in l), self.n // 2)
            self.assertEqual(l.epoch, epoch)
        next(iter(l))
        next(iter(l))
        self.assertEqual(l.epoch, 4)


if __name__ == "__main__":
    unittest.main()
