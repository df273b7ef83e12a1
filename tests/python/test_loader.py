"""Tests of the wharf Python package against real files and forked workers.

Run by tests/test-python.sh (make check).  Each test works in its own
temporary directory and ring directory (WHARF_SHM_DIR-like shm_dir), so a
leftover segment shows up as a file there.
"""

import errno
import gc
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import warnings
import weakref

import numpy as np

import wharf

BUILDDIR = os.environ.get("WHARF_BUILDDIR", "")
TESTPLUGIN = os.path.join(BUILDDIR, "tests", "python", ".libs",
                          "testplugin.so")
SCALEPLUGIN = os.path.join(BUILDDIR, "examples", ".libs", "plugin_scale.so")


def children():
    """The pids of this process's children."""
    kids = set()
    for t in os.listdir("/proc/self/task"):
        with open("/proc/self/task/%s/children" % t) as f:
            kids.update(int(p) for p in f.read().split())
    return kids


def running(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def mapped_under(d):
    """This process's mappings and descriptors of files under d: a ring is
    an unnamed (or unlinked) file in its shm_dir, so listing d shows
    nothing."""
    d = os.path.realpath(d) + "/"
    with open("/proc/self/maps") as f:
        found = [line for line in f if d in line]
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + fd).startswith(d):
                found.append(fd)
        except OSError:
            pass
    return found


class Tmp(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="wharf-py-")
        self.shm = os.path.join(self.dir, "shm")
        os.mkdir(self.shm)
        self.addCleanup(shutil.rmtree, self.dir, True)

    def path(self, *p):
        return os.path.join(self.dir, *p)

    def image_folder(self, classes=3, per_class=7, size=None, seed=0):
        """classes x per_class files of random bytes (random sizes unless
        size); returns {path: bytes}."""
        rng = np.random.default_rng(seed)
        files = {}
        for c in range(classes):
            os.makedirs(self.path("data", "c%d" % c))
            for i in range(per_class):
                n = size or int(rng.integers(1, 3000))
                b = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
                p = self.path("data", "c%d" % c, "f%03d" % i)
                with open(p, "wb") as f:
                    f.write(b)
                files[p] = b
        return files

    def loader(self, index, **kw):
        kw.setdefault("shm_dir", self.shm)
        kw.setdefault("num_workers", 2)
        l = wharf.Loader(index, **kw)
        self.addCleanup(l.close)
        return l

    def order(self, loader):
        return [int(s) for b in loader for s in b.samples]


class TestBytes(Tmp):
    def test_variable_size_batches_equal_the_files(self):
        files = self.image_folder()
        ix = wharf.Index.build(self.path("i.idx"), dir=self.path("data"))
        self.assertEqual(len(ix), len(files))
        self.assertEqual(ix.num_labels, 3)
        seen = set()
        for b in self.loader(ix, batch_size=5, shuffle=True, seed=3):
            self.assertIsInstance(b.data, list)
            for k, sid in enumerate(b.samples):
                path, off, length, label = ix.sample(int(sid))
                self.assertEqual(b.data[k].tobytes(), files[path])
                self.assertEqual(int(b.labels[k]), label)
                self.assertEqual(label, int(path.split("/c")[-1][0]))
                seen.add(int(sid))
            # What cross_entropy takes, and a copy: it outlives the slot.
            self.assertEqual(b.labels.dtype, np.int64)
            self.assertTrue(b.labels.flags.owndata)
        self.assertEqual(seen, set(range(len(files))))

    def test_raw_cut_or_padded_to_a_size(self):
        files = self.image_folder(classes=2, per_class=5)
        ix = wharf.Index.build(self.path("i.idx"), dir=self.path("data"))
        checked = 0
        for b in self.loader(ix, batch_size=4,
                             decode=wharf.decode.raw(1500)):
            self.assertEqual(b.data.shape, (b.count, 1500))
            for k, sid in enumerate(b.samples):
                want = files[ix.sample(int(sid))[0]][:1500]
                want += bytes(1500 - len(want))
                self.assertEqual(b.data[k].tobytes(), want)
                checked += 1
        self.assertEqual(checked, len(files))

    def test_fixed_shape_arrays(self):
        files = self.image_folder(size=2 * 3 * 4 * 4)
        ix = wharf.Index.build(self.path("i.idx"), dir=self.path("data"))
        l = self.loader(ix, batch_size=4, drop_last=True,
                        decode=wharf.decode.array("float32", (2, 3, 4)))
        self.assertEqual(len(l), len(files) // 4)
        n = 0
        for b in l:
            x, y = b
            self.assertEqual(x.shape, (4, 2, 3, 4))
            self.assertEqual(x.dtype, np.float32)
            self.assertFalse(x.flags.writeable)
            for k in range(4):
                path = ix.sample(int(b.samples[k]))[0]
                want = np.frombuffer(files[path], np.float32).reshape(2, 3, 4)
                np.testing.assert_array_equal(x[k], want)
            n += 1
        self.assertEqual(n, len(files) // 4)

    def test_array_with_header_and_wrong_length(self):
        rec = np.arange(10, dtype=np.int16)
        with open(self.path("r.bin"), "wb") as f:
            for i in range(6):
                f.write(b"HDR!" + (rec + i).tobytes())
        ix = wharf.Index.build(self.path("r.idx"), files=[self.path("r.bin")],
                               record_bytes=24)
        got = [x.copy() for x, _ in self.loader(
            ix, batch_size=2, decode=wharf.decode.array("int16", (10,),
                                                        offset=4))]
        np.testing.assert_array_equal(np.concatenate(got),
                                      [rec + i for i in range(6)])
        # Without the header the size is wrong: the error names the sample.
        l = self.loader(ix, batch_size=2,
                        decode=wharf.decode.array("int16", (10,), offset=8))
        with self.assertRaises(wharf.WharfError) as cm:
            list(l)
        self.assertIn("sample 0", str(cm.exception))
        self.assertIn("24 bytes", str(cm.exception))

    def test_token_windows(self):
        window = 16
        toks = np.random.default_rng(1).integers(0, 65535, 40 * (window + 1),
                                                 dtype=np.uint16)
        for shard in range(2):
            toks[shard::2].tofile(self.path("shard%d.u16" % shard))
        shards = [np.fromfile(self.path("shard%d.u16" % s), np.uint16)
                  for s in range(2)]
        dec = wharf.decode.tokens("uint16", window)
        ix = wharf.Index.build(self.path("t.idx"),
                               files=[self.path("shard0.u16"),
                                      self.path("shard1.u16")],
                               record_bytes=dec.record_bytes)
        l = self.loader(ix, batch_size=8, shuffle=True, seed=9, decode=dec)
        flat = np.concatenate([s[:len(s) // (window + 1) * (window + 1)]
                               .reshape(-1, window + 1) for s in shards])
        count = 0
        for b in l:
            x, y = b
            self.assertEqual(x.dtype, np.int64)
            self.assertEqual(x.shape, (b.count, window))
            for k, sid in enumerate(b.samples):
                rec = flat[int(sid)].astype(np.int64)
                np.testing.assert_array_equal(x[k], rec[:-1])
                np.testing.assert_array_equal(y[k], rec[1:])
            count += b.count
        self.assertEqual(count, len(flat))
        # u32 tokens kept as they are.
        t32 = np.arange(3 * 5, dtype=np.uint32)
        t32.tofile(self.path("t32"))
        d32 = wharf.decode.tokens("uint32", 4, out="same")
        ix32 = wharf.Index.build(self.path("t32.idx"), files=[self.path("t32")],
                                 record_bytes=d32.record_bytes)
        b = next(iter(self.loader(ix32, batch_size=3, decode=d32)))
        self.assertEqual(b.input.dtype, np.uint32)
        np.testing.assert_array_equal(b.input, t32.reshape(3, 5)[:, :4])
        np.testing.assert_array_equal(b.target, t32.reshape(3, 5)[:, 1:])

    @unittest.skipUnless(os.path.exists(SCALEPLUGIN), "plugin_scale not built")
    def test_plugin_in_the_workers(self):
        files = self.image_folder(size=12, per_class=4)
        ix = wharf.Index.build(self.path("i.idx"), dir=self.path("data"))
        dec = wharf.decode.plugin(SCALEPLUGIN, arg="2.0", dtype="float32",
                                  shape=(12,))
        l = self.loader(ix, batch_size=4, decode=dec)
        checked = 0
        for b in l:
            for k, sid in enumerate(b.samples):
                raw = np.frombuffer(files[ix.sample(int(sid))[0]], np.uint8)
                np.testing.assert_allclose(b.data[k], raw * (2.0 / 255),
                                           rtol=1e-6)
                checked += 1
        self.assertEqual(checked, len(files))
        bad = wharf.decode.plugin(SCALEPLUGIN, arg="x", dtype="float32",
                                  shape=(12,))
        with self.assertRaises(wharf.WharfError) as cm:
            self.loader(ix, batch_size=4, decode=bad)
        self.assertIn("bad factor", str(cm.exception))


class TestOrder(Tmp):
    def setUp(self):
        super().setUp()
        self.image_folder(classes=2, per_class=23, size=8)
        self.ix = wharf.Index.build(self.path("i.idx"), dir=self.path("data"))

    def test_shuffle_is_a_function_of_seed_and_epoch(self):
        a = self.loader(self.ix, batch_size=4, shuffle=True, seed=5)
        b = self.loader(self.ix, batch_size=4, shuffle=True, seed=5,
                        num_workers=0)
        c = self.loader(self.ix, batch_size=4, shuffle=True, seed=6)
        e0 = self.order(a)
        self.assertEqual(sorted(e0), list(range(46)))
        self.assertNotEqual(e0, list(range(46)))
        self.assertEqual(e0, self.order(b))
        self.assertNotEqual(e0, self.order(c))
        # A second pass moves on to epoch 1: another order, same for b.
        e1 = self.order(a)
        self.assertEqual(a.epoch, 1)
        self.assertNotEqual(e0, e1)
        self.assertEqual(e1, self.order(b))
        a.set_epoch(0)
        self.assertEqual(self.order(a), e0)

    def test_sequential_and_ranks(self):
        self.assertEqual(self.order(self.loader(self.ix, batch_size=5)),
                         list(range(46)))
        parts = [self.order(self.loader(self.ix, batch_size=4, shuffle=True,
                                        seed=1, rank=r, world_size=2,
                                        even="drop"))
                 for r in range(2)]
        self.assertEqual(len(parts[0]), len(parts[1]))
        self.assertFalse(set(parts[0]) & set(parts[1]))

    def test_state_round_trip_resumes_exactly(self):
        ref = self.loader(self.ix, batch_size=4, shuffle=True, seed=2)
        ref.set_epoch(3)
        want = [list(map(int, b.samples)) for b in ref]
        a = self.loader(self.ix, batch_size=4, shuffle=True, seed=2)
        a.set_epoch(3)
        it = iter(a)
        got = [list(map(int, next(it).samples)) for _ in range(5)]
        state = a.state_dict()
        self.assertEqual(state["position"], 5)
        self.assertEqual(state["epoch"], 3)
        a.close()
        b = self.loader(self.ix, batch_size=4, shuffle=True, seed=2,
                        num_workers=1, prefetch=3)
        b.load_state_dict(state)
        rest = [list(map(int, x.samples)) for x in b]
        self.assertEqual(got + rest, want)
        stats = b.stats()
        self.assertEqual(stats["batches"], len(want) - 5)
        wrong = self.loader(self.ix, batch_size=8, shuffle=True, seed=2)
        with self.assertRaises(wharf.WharfError) as cm:
            wrong.load_state_dict(state)
        self.assertEqual(cm.exception.errno, errno.EINVAL)

    def shard_index(self, sizes):
        """One file per shard, sizes[k] samples of 4 bytes each, indexed
        with (path, offset, length, label); returns (index, shard of each
        sample)."""
        samples, shard_of = [], []
        for k, n in enumerate(sizes):
            p = self.path("shard%02d" % k)
            with open(p, "wb") as f:
                f.write(bytes(range(4)) * n)
            samples += [(p, 4 * i, 4, k) for i in range(n)]
            shard_of += [k] * n
        ix = wharf.Index.build(self.path("s.idx"), samples=samples)
        return ix, shard_of

    def test_shard_order(self):
        sizes = [5, 1, 9, 3, 12, 7, 2, 8, 4, 6, 11]
        ix, shard_of = self.shard_index(sizes)
        n = sum(sizes)

        def ranks(world, even, window=None, epoch=0):
            out = []
            for r in range(world):
                l = self.loader(ix, batch_size=3, shuffle="shards", seed=4,
                                rank=r, world_size=world, even=even,
                                shard_window=window)
                l.set_epoch(epoch)
                out.append(self.order(l))
            return out

        for window in (None, 1, 3):
            w = 4 if window is None else window
            for world in (1, 3):
                parts = ranks(world, "drop", window)
                flat = [i for p in parts for i in p]
                self.assertEqual(len(flat), len(set(flat)))  # disjoint
                self.assertEqual(len(flat), n // world * world)
                parts = ranks(world, "pad", window)
                self.assertEqual(set(i for p in parts for i in p),
                                 set(range(n)))  # covering
                for p in parts:
                    # At most w shards open at any point of the order.
                    first, last = {}, {}
                    for pos, i in enumerate(p):
                        first.setdefault(shard_of[i], pos)
                        last[shard_of[i]] = pos
                    for pos in range(len(p)):
                        opened = sum(1 for k in first
                                     if first[k] <= pos <= last[k])
                        self.assertLessEqual(opened, w)
        # Deterministic; another epoch, another order; labels follow.
        a = ranks(1, "pad", epoch=2)[0]
        self.assertEqual(a, ranks(1, "pad", epoch=2)[0])
        self.assertNotEqual(a, ranks(1, "pad", epoch=3)[0])
        self.assertNotEqual(a, list(range(n)))
        for b in self.loader(ix, batch_size=5, shuffle="shards"):
            self.assertEqual([int(x) for x in b.labels],
                             [shard_of[int(i)] for i in b.samples])

    def test_shard_order_resumes_exactly(self):
        ix, _ = self.shard_index([5, 1, 9, 3, 12, 7, 2, 8, 4, 6, 11])
        kw = dict(batch_size=4, shuffle="shards", seed=2, shard_window=2)
        ref = self.loader(ix, **kw)
        ref.set_epoch(1)
        want = [list(map(int, b.samples)) for b in ref]
        a = self.loader(ix, **kw)
        a.set_epoch(1)
        it = iter(a)
        got = [list(map(int, next(it).samples)) for _ in range(6)]
        state = a.state_dict()
        a.close()
        b = self.loader(ix, num_workers=1, **kw)
        b.load_state_dict(state)
        self.assertEqual(got + [list(map(int, x.samples)) for x in b], want)
        # The global order's state is another run's.
        g = self.loader(ix, batch_size=4, shuffle=True, seed=2)
        with self.assertRaises(wharf.WharfError) as cm:
            g.load_state_dict(state)
        self.assertIn("shard_window", str(cm.exception))

    def test_shuffle_values(self):
        with self.assertRaises(ValueError) as cm:
            self.loader(self.ix, shuffle="shard")
        self.assertIn('"shards"', str(cm.exception))
        with self.assertRaises(ValueError):
            self.loader(self.ix, shuffle=True, shard_window=2)
        with self.assertRaises(ValueError):
            self.loader(self.ix, shuffle="shards", shard_window=0)
        # One sample per file (a --dir index): each file is a shard.
        o = self.order(self.loader(self.ix, batch_size=4, shuffle="shards"))
        self.assertEqual(sorted(o), list(range(46)))

    def test_len_and_stats(self):
        l = self.loader(self.ix, batch_size=10)
        self.assertEqual(len(l), 5)
        l2 = self.loader(self.ix, batch_size=10, drop_last=True)
        self.assertEqual(len(l2), 4)
        n = sum(b.count for b in l)
        st = l.stats()
        self.assertEqual(n, 46)
        self.assertEqual(st["samples"], 46)
        self.assertEqual(st["bytes"], 46 * 8)
        self.assertEqual(st["batches"], 5)
        self.assertGreaterEqual(st["stall_share"], 0.0)
        self.assertLessEqual(st["stall_share"], 1.0)


class TestViews(Tmp):
    """DataLoader's lifetime rule: a batch lives while it is referenced."""

    def setUp(self):
        super().setUp()
        self.files = self.image_folder(classes=1, per_class=12, size=16)
        self.ix = wharf.Index.build(self.path("i.idx"), dir=self.path("data"))

    def bytes_of(self, sid):
        return self.files[self.ix.sample(int(sid))[0]]

    def assert_intact(self, data, ids):
        self.assertEqual(len(data), len(ids))
        for k, sid in enumerate(ids):
            self.assertEqual(bytes(data[k]), self.bytes_of(sid))

    def test_held_batch_stays_valid_while_others_pass(self):
        l = self.loader(self.ix, batch_size=2, num_workers=1, prefetch=1,
                        held_batches=2)
        held = l.next_batch()
        ids = list(map(int, held.samples))
        # A new for is a full pass (the next epoch): 6 batches through the
        # slots the held batch does not take.
        others = sum(1 for _ in l)
        self.assertEqual(others, 6)
        self.assert_intact(held.data, ids)
        self.assertEqual(l.stats()["copied_batches"], 0)

    def test_a_view_keeps_its_slot_after_release(self):
        l = self.loader(self.ix, batch_size=3, num_workers=1, prefetch=1,
                        decode=wharf.decode.raw(16))
        it = iter(l)
        b0 = next(it)
        x0, ids0 = b0.data[1:], list(map(int, b0.samples))[1:]
        b0.release()
        self.assertTrue(b0.released)
        # One worker slot: every batch goes through it.
        self.assertEqual(sum(1 for _ in it), 3)
        self.assert_intact(x0, ids0)
        self.assertEqual(l.stats()["held_batches"], 1)
        del x0
        l.release()
        self.assertEqual(l.stats()["held_batches"], 0)

    def test_batch_of_an_abandoned_loop_stays_valid(self):
        # One worker slot: had the dropped loop given b's slot back, the
        # worker would have filled it with batch 1 by now.
        l = self.loader(self.ix, batch_size=3, num_workers=1, prefetch=1)
        b = next(iter(l))
        time.sleep(0.2)
        self.assertEqual(list(map(int, b.samples)), [0, 1, 2])
        self.assert_intact(b.data, [0, 1, 2])
        rest = [int(s) for x in l for s in x.samples]  # the next epoch
        self.assertEqual(rest, list(range(12)))
        self.assertFalse(b.released)
        self.assert_intact(b.data, [0, 1, 2])

    def test_batch_kept_after_close_and_after_with(self):
        before = children()
        with wharf.Loader(self.ix, batch_size=2, num_workers=2,
                          decode=wharf.decode.raw(16), shm_dir=self.shm,
                          shuffle=True) as l:
            for b in l:
                last, ids = b.data, list(map(int, b.samples))
        kids = children() - before
        # Closed: the workers are gone, the kept batch is not.
        self.assertEqual([p for p in kids if running(p)], [])
        gc.collect()
        time.sleep(0.1)
        self.assert_intact(last, ids)
        self.assertEqual(float(last.astype(np.float32).mean()),
                         float(np.frombuffer(b"".join(
                             self.bytes_of(i) for i in ids),
                             np.uint8).astype(np.float32).mean()))
        self.assertNotEqual(mapped_under(self.shm), [])
        # The index closes too, at once: the batch does not need it.
        want = [self.bytes_of(i) for i in ids]
        self.ix.close()
        self.assertEqual([bytes(r) for r in last], want)
        del b, last
        gc.collect()
        self.assertEqual(mapped_under(self.shm), [])

    def test_kept_batches_equal_their_copies(self):
        # The habit: keep every batch (validation outputs) without a copy.
        shutil.rmtree(self.path("data"))
        files = self.image_folder(classes=2, per_class=60, size=24, seed=5)
        ix = wharf.Index.build(self.path("k.idx"), dir=self.path("data"))
        l = self.loader(ix, batch_size=2, shuffle=True, seed=2,
                        decode=wharf.decode.raw(24))
        kept, clones = [], []
        with self.assertWarns(RuntimeWarning) as cm:
            for b in l:
                kept.append(b.data)
                clones.append(b.data.copy())
        self.assertEqual(len(kept), 60)
        self.assertIn("held_batches", str(cm.warning))
        for k, c in zip(kept, clones):
            np.testing.assert_array_equal(k, c)
        self.assertEqual(l.stats()["copied_batches"], 58)
        self.assertEqual(sorted(bytes(r) for k in kept for r in k),
                         sorted(files.values()))

    def test_holder_of_more_batches_than_slots(self):
        # 1 worker x 1 slot + 2 for held ones: 3 slots; the loop keeps 6.
        l = self.loader(self.ix, batch_size=2, num_workers=1, prefetch=1,
                        held_batches=1, decode=wharf.decode.raw(16))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            kept = [(b.data, list(map(int, b.samples)), b.copied) for b in l]
        self.assertEqual(len([x for x in w if issubclass(
            x.category, RuntimeWarning)]), 1)
        self.assertEqual([c for _, _, c in kept],
                         [False, False] + [True] * 4)
        for data, ids, _ in kept:
            self.assert_intact(data, ids)
        self.assertEqual(l.stats()["copied_batches"], 4)

    def test_loop_that_drops_each_batch_copies_nothing(self):
        l = self.loader(self.ix, batch_size=2, num_workers=2)
        for epoch in range(3):
            for x, y in l:
                self.assertEqual(len(x), 2)
        self.assertEqual(l.stats()["copied_batches"], 0)

    def test_each_for_is_a_full_pass(self):
        l = self.loader(self.ix, batch_size=1, shuffle=True, seed=9)
        for k, b in enumerate(l):
            if k == 3:
                break
        self.assertEqual(l.epoch, 0)
        second = [int(s) for b in l for s in b.samples]
        self.assertEqual(l.epoch, 1)
        self.assertEqual(sorted(second), list(range(12)))
        # next(iter()) twice: two passes, as DataLoader does.
        next(iter(l))
        next(iter(l))
        self.assertEqual(l.epoch, 3)
        # set_epoch names the pass; load_state_dict resumes a cut one.
        l.set_epoch(7)
        it = iter(l)
        first = [int(s) for _ in range(4) for s in next(it).samples]
        st = l.state_dict()
        resumed = self.loader(self.ix, batch_size=1, shuffle=True, seed=9)
        resumed.load_state_dict(st)
        rest = [int(s) for b in resumed for s in b.samples]
        self.assertEqual(sorted(first + rest), list(range(12)))
        l.set_epoch(7)
        self.assertEqual(first + rest, [int(s) for b in l
                                        for s in b.samples])


class TestDataLoaderHabits(Tmp):
    """DataLoader's keywords: accepted with wharf's meaning, or refused
    with the reason and the wharf way."""

    def setUp(self):
        super().setUp()
        self.image_folder(classes=3, per_class=4, size=8)
        os.makedirs(self.path("data", "c3_empty"))
        self.ix = wharf.Index.build(self.path("i.idx"), dir=self.path("data"))

    def test_accepted(self):
        l = self.loader(self.ix, batch_size=5, persistent_workers=False,
                        prefetch_factor=3, drop_last=True, timeout=0,
                        multiprocessing_context="spawn", collate_fn=None,
                        sampler=None, worker_init_fn=None)
        self.assertEqual(l._opt.prefetch, 3)
        self.assertEqual(len(l), 2)
        kids0 = children()
        self.assertEqual(sum(b.count for b in l), 10)
        # Fresh workers each epoch, as persistent_workers=False says.
        self.assertEqual(sum(b.count for b in l), 10)
        kids1 = children()
        self.assertEqual(len(kids1), 2)
        self.assertEqual(kids0 & kids1, set())

    def test_refused_with_the_wharf_way(self):
        for kw, words in (({"sampler": [1, 2]}, "shuffle="),
                          ({"batch_sampler": [[0]]}, "batch_size="),
                          ({"collate_fn": lambda x: x}, "in your loop"),
                          ({"worker_init_fn": print}, "plug-in"),
                          ({"batch_size": None}, "batch_size=1"),
                          ({"pin_memory": True}, "wharf.torch.Loader")):
            with self.assertRaises(ValueError) as cm:
                wharf.Loader(self.ix, shm_dir=self.shm, **kw)
            self.assertIn(words, str(cm.exception), kw)
        with self.assertRaises(TypeError) as cm:
            wharf.Loader(self.ix, shm_dir=self.shm, bogus=1)
        self.assertIn("bogus", str(cm.exception))
        with self.assertRaises(ValueError):
            wharf.Loader(self.ix, prefetch=2, prefetch_factor=4)
        self.assertEqual(os.listdir(self.shm), [])

    def test_classes_from_class_folders(self):
        self.assertEqual(self.ix.classes, ["c0", "c1", "c2", "c3_empty"])
        self.assertEqual(self.ix.class_to_idx,
                         {"c0": 0, "c1": 1, "c2": 2, "c3_empty": 3})
        l = self.loader(self.ix)
        self.assertEqual(l.classes, self.ix.classes)
        for b in l:
            for k, sid in enumerate(b.samples):
                path = self.ix.sample(int(sid))[0]
                self.assertEqual(
                    self.ix.classes[int(b.labels[k])],
                    os.path.basename(os.path.dirname(path)))
        # A list index has no class names.
        lst = self.path("list.txt")
        with open(lst, "w") as f:
            f.write("data/c0/f000 0\n")
        self.assertIsNone(wharf.Index.build(self.path("l.idx"),
                                            list=lst).classes)

    def test_directory_where_an_index_goes(self):
        with self.assertRaises(wharf.WharfError) as cm:
            wharf.Loader(self.path("data"), shm_dir=self.shm)
        self.assertEqual(cm.exception.errno, errno.EISDIR)
        self.assertIn("wharf index build --dir", str(cm.exception))
        self.assertIn("wharf.Index.build", str(cm.exception))

    def test_version(self):
        self.assertEqual(wharf.__version__, "%d.%d.%d" % wharf.version())
        src = os.environ.get("WHARF_SRCDIR", os.path.join(
            os.path.dirname(__file__), "..", ".."))
        with open(os.path.join(src, "configure.ac")) as f:
            self.assertIn("[%s]" % wharf.__version__, f.read())


class TestErrors(Tmp):
    def test_messages_from_c(self):
        with self.assertRaises(wharf.WharfError) as cm:
            wharf.Index(self.path("missing.idx"))
        self.assertIn("missing.idx", str(cm.exception))
        self.image_folder(classes=1, per_class=2, size=4)
        ix = wharf.Index.build(self.path("i.idx"), dir=self.path("data"))
        for spec, word in (("array dtype=f33 shape=2", "dtype"),
                           ("tokens dtype=u16", "window"),
                           ("nosuch", "unknown decoder"),
                           ("raw bytes=0", "bytes="),
                           ("raw size", "key=value"),
                           ("plugin path=/nonexistent.so", "nonexistent")):
            with self.assertRaises(wharf.WharfError) as cm:
                self.loader(ix, decode=spec)
            self.assertIn(word, str(cm.exception))
        with self.assertRaises(ValueError):
            wharf.decode.tokens("float32")

    def test_unreadable_sample_is_named(self):
        self.image_folder(classes=1, per_class=6, size=4)
        ix = wharf.Index.build(self.path("i.idx"), dir=self.path("data"))
        os.unlink(self.path("data", "c0", "f004"))
        with self.assertRaises(wharf.WharfError) as cm:
            list(self.loader(ix, batch_size=2))
        self.assertIn("f004", str(cm.exception))

    @unittest.skipUnless(os.path.exists(TESTPLUGIN), "testplugin not built")
    def test_worker_crash_names_the_sample(self):
        files = self.image_folder(classes=1, per_class=10, size=8)
        ix = wharf.Index.build(self.path("i.idx"), dir=self.path("data"))
        ok = self.loader(ix, batch_size=2,
                         decode=wharf.decode.plugin(TESTPLUGIN))
        checked = 0
        for b in ok:  # the plug-in reverses bytes
            for k, sid in enumerate(b.samples):
                self.assertEqual(b.data[k].tobytes(),
                                 files[ix.sample(int(sid))[0]][::-1])
                checked += 1
        self.assertEqual(checked, len(files))
        l = self.loader(ix, batch_size=2, decode=wharf.decode.plugin(
            TESTPLUGIN, arg="crash=7"))
        got = []
        with self.assertRaises(wharf.WharfError) as cm:
            for b in l:
                got.extend(map(int, b.samples))
        msg = str(cm.exception)
        self.assertEqual(cm.exception.errno, errno.ECHILD)
        self.assertIn("signal %d" % signal.SIGKILL, msg)
        self.assertIn("7", msg)
        self.assertNotIn(7, got)
        # A failed loader refuses more work but closes cleanly.
        with self.assertRaises(wharf.WharfError):
            l.next_batch()
        l.close()
        self.assertEqual(os.listdir(self.shm), [])

    def test_library_not_found_is_explained(self):
        env = dict(os.environ, WHARF_LIBRARY=self.path("nope.so"))
        r = subprocess.run([sys.executable, "-c", "import wharf"], env=env,
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot load libwharf", r.stderr)
        self.assertIn("nope.so", r.stderr)


class TestDropped(Tmp):
    """A loader dropped without close() is freed with its last view."""

    def setUp(self):
        super().setUp()
        self.files = self.image_folder(classes=1, per_class=12, size=16)
        self.ix = wharf.Index.build(self.path("i.idx"), dir=self.path("data"))

    def take_and_drop(self):
        """Opens a loader with 3 workers, takes 2 batches and drops it, the
        loop abandoned.  Returns a weak reference to it, its workers' pids,
        and batch 1's data and sample ids."""
        before = children()
        l = wharf.Loader(self.ix, batch_size=2, num_workers=3,
                         decode=wharf.decode.raw(16), shm_dir=self.shm)
        ref = weakref.ref(l)
        self.addCleanup(lambda: ref() and ref().close())
        kids = children() - before
        self.assertEqual(len(kids), 3)
        it = iter(l)
        next(it)
        b = next(it)
        return ref, kids, b.data, list(map(int, b.samples))

    def assert_freed(self, ref, kids):
        gc.collect()
        self.assertIsNone(ref())
        self.assertEqual([p for p in kids if running(p)], [])
        self.assertEqual(mapped_under(self.shm), [])
        self.assertEqual(os.listdir(self.shm), [])

    def test_dropped_loader_is_freed(self):
        ref, kids, _, _ = self.take_and_drop()
        self.assert_freed(ref, kids)

    def test_view_kept_outside_outlives_the_loader(self):
        ref, kids, x, ids = self.take_and_drop()
        gc.collect()
        self.assertIsNone(ref())
        # The view keeps the ring, not the workers: nobody can ask the
        # dropped Loader for a batch, so its death stopped them (and let go
        # of every file they read), and the slot stays held.
        self.assertEqual(ids, [2, 3])
        self.assertEqual([p for p in kids if running(p)], [])
        for k, sid in enumerate(ids):
            self.assertEqual(x[k].tobytes(),
                             self.files[self.ix.sample(sid)[0]])
        self.assertNotEqual(mapped_under(self.shm), [])
        del x
        self.assert_freed(ref, kids)


# The child loads, takes some batches, prints its pid and its workers', then
# ends as `how` says.
CHILD = textwrap.dedent("""
    import os, sys, wharf
    ix = wharf.Index(sys.argv[1])
    l = wharf.Loader(ix, batch_size=2, num_workers=3, shm_dir=sys.argv[2])
    it = iter(l)
    next(it); next(it)
    kids = []
    for t in os.listdir("/proc/self/task"):
        with open("/proc/self/task/%s/children" % t) as f:
            kids += f.read().split()
    print(" ".join(kids), flush=True)
    how = sys.argv[3]
    if how == "raise":
        raise RuntimeError("mid-epoch")
    if how == "kill":
        os.kill(os.getpid(), 9)
    # "leak": exit with the loader open and a batch held
""")


class TestCleanup(Tmp):
    def run_child(self, how):
        self.image_folder(classes=1, per_class=40, size=64)
        ix = self.path("i.idx")
        wharf.Index.build(ix, dir=self.path("data")).close()
        r = subprocess.run([sys.executable, "-c", CHILD, ix, self.shm, how],
                           capture_output=True, text=True, timeout=120)
        kids = [int(p) for p in r.stdout.split()]
        self.assertEqual(len(kids), 3, r.stderr)
        # Workers notice the death of their parent (PR_SET_PDEATHSIG); give
        # them a bounded while to go.
        deadline = time.monotonic() + 20
        alive = kids
        while alive and time.monotonic() < deadline:
            alive = [p for p in kids if running(p)]
            time.sleep(0.05)
        self.assertEqual(alive, [], "workers left after %s" % how)
        self.assertEqual(os.listdir(self.shm), [])
        return r

    def test_exit_with_loader_open(self):
        self.assertEqual(self.run_child("leak").returncode, 0)

    def test_exception_mid_epoch(self):
        r = self.run_child("raise")
        self.assertEqual(r.returncode, 1)
        self.assertIn("mid-epoch", r.stderr)

    def test_killed_interpreter(self):
        self.assertEqual(self.run_child("kill").returncode, -9)


if __name__ == "__main__":
    unittest.main()
