"""Samples inside a container: Index.build(samples=...) through the C
builder, and list= files with offsets, on a TFRecord file the test writes.

Run by tests/test-python.sh (make check).
"""

import os
import shutil
import struct
import tempfile
import unittest

import numpy as np

import wharf


def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def masked_crc32c(data):
    """TFRecord's checksum: CRC-32C, rotated right by 15, plus a constant."""
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    c ^= 0xFFFFFFFF
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def write_tfrecord(path, records):
    with open(path, "wb") as f:
        for r in records:
            head = struct.pack("<Q", len(r))
            f.write(head + struct.pack("<I", masked_crc32c(head)))
            f.write(r + struct.pack("<I", masked_crc32c(r)))


def tfrecord_samples(path, label=-1):
    """(path, offset, length, label) of each record's data: the short
    script that libwharf(3) shows, checking each length's CRC."""
    with open(path, "rb") as f:
        pos = 0
        while True:
            head = f.read(12)
            if not head:
                return
            length, crc = struct.unpack("<QI", head)
            if len(head) < 12 or crc != masked_crc32c(head[:8]):
                raise ValueError("%s: bad record at %d" % (path, pos))
            yield path, pos + 12, length, label
            pos += 12 + length + 4
            f.seek(pos)


class TestIndexBuilder(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="wharf-py-")
        self.shm = os.path.join(self.dir, "shm")
        os.mkdir(self.shm)
        self.addCleanup(shutil.rmtree, self.dir, True)
        rng = np.random.default_rng(7)
        self.records = [rng.integers(0, 256, int(n), dtype=np.uint8)
                        .tobytes() for n in rng.integers(1, 3000, 40)]
        self.tfr = os.path.join(self.dir, "train.tfrecord")
        write_tfrecord(self.tfr, self.records)

    def load_all(self, ix):
        """{sample id: (bytes, label)} over one epoch of a Loader."""
        got = {}
        with wharf.Loader(ix, batch_size=6, num_workers=2, shuffle=True,
                          shm_dir=self.shm) as l:
            for b in l:
                for k, sid in enumerate(b.samples):
                    got[int(sid)] = (b.data[k].tobytes(), int(b.labels[k]))
        return got

    def test_tfrecord_with_samples(self):
        n = len(self.records)
        labels = [i % 5 for i in range(n)]
        samples = ((p, o, ln, labels[i]) for i, (p, o, ln, _) in
                   enumerate(tfrecord_samples(self.tfr)))
        ix = wharf.Index.build(os.path.join(self.dir, "t.idx"),
                               samples=samples, verify=True)
        self.addCleanup(ix.close)
        self.assertEqual(len(ix), n)
        self.assertEqual(ix.num_files, 1)  # consecutive samples share it
        got = self.load_all(ix)
        self.assertEqual(sorted(got), list(range(n)))
        for i in range(n):
            self.assertEqual(got[i], (self.records[i], labels[i]))

    def test_tfrecord_with_a_list(self):
        lst = os.path.join(self.dir, "t.list")
        with open(lst, "w") as f:
            f.write("#wharf-list offsets\n")
            for p, o, ln, _ in tfrecord_samples(self.tfr):
                f.write("%s %d %d 1\n" % (os.path.basename(p), o, ln))
        ix = wharf.Index.build(os.path.join(self.dir, "l.idx"), list=lst)
        self.addCleanup(ix.close)
        got = self.load_all(ix)
        self.assertEqual([got[i] for i in range(len(self.records))],
                         [(r, 1) for r in self.records])

    def test_relative_paths_and_refusals(self):
        rel = [(os.path.basename(self.tfr), o, ln, None)
               for _, o, ln, _ in tfrecord_samples(self.tfr)][:3]
        ix = wharf.Index.build(os.path.join(self.dir, "r.idx"),
                               samples=rel, root=self.dir)
        self.addCleanup(ix.close)
        self.assertEqual(ix.sample(2)[0], self.tfr)
        self.assertEqual(ix.sample(2)[1:], rel[2][1:])  # as it was given
        # What Index.sample() gives, given back, builds the same index.
        again = wharf.Index.build(os.path.join(self.dir, "a.idx"),
                                  samples=(ix.sample(i) for i in range(3)))
        self.addCleanup(again.close)
        self.assertEqual([again.sample(i) for i in range(3)],
                         [ix.sample(i) for i in range(3)])
        out = os.path.join(self.dir, "bad.idx")
        with self.assertRaisesRegex(wharf.WharfError, "sample 1: empty"):
            wharf.Index.build(out, samples=[("a", 0, 1, -1),
                                            ("", 0, 1, -1)])
        with self.assertRaisesRegex(ValueError, ">= 0"):
            wharf.Index.build(out, samples=[("a", -1, 1, -1)])
        self.assertFalse(os.path.exists(out))  # nothing left behind
        lst = os.path.join(self.dir, "bad.list")
        with open(lst, "w") as f:
            f.write("#wharf-list offsets\ntrain.tfrecord 0 1\n"
                    "train.tfrecord 0 999999\n")
        with self.assertRaisesRegex(wharf.WharfError, "bad.list:3"):
            wharf.Index.build(out, list=lst)
        with self.assertRaisesRegex(ValueError, "exactly one"):
            wharf.Index.build(out, list=lst, samples=[])


if __name__ == "__main__":
    unittest.main()
