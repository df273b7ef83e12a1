#!/usr/bin/python3
"""Train a small classifier on an ImageFolder-style tree read by wharf.

    examples/train_imagefolder.py DIR [--epochs 3] [--workers 2]

DIR has one subdirectory per class (a wharf mount of the README demo's
data will do: MOUNT/train).  Files of any size are cut or zero-padded to
--bytes bytes by the C workers (wharf.decode.raw(size)), so the model sees
fixed-size uint8 vectors; it is a two-layer network over those bytes, which
is enough to show the loader feeding a real training step.  Each epoch
prints samples/s and the data-stall share (time the loop waited for data
over the epoch's time), from the loader's own counters.

Needs the wharf package: `pip install .` from the source tree, or
PYTHONPATH=<source>/python after ./quickstart build (README).
"""

import argparse
import os
import tempfile
import time

import torch

import wharf
import wharf.torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", help="one subdirectory per class")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--bytes", type=int, default=4096,
                    help="bytes of each file the model sees (4096)")
    ap.add_argument("--index", help="index file (default: a temporary one)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available()
                    else "cpu")
    args = ap.parse_args()

    index_path = args.index or os.path.join(
        tempfile.mkdtemp(prefix="wharf-train-"), "train.idx")
    t0 = time.monotonic()
    index = wharf.Index.build(index_path, dir=args.dir)
    classes = max(index.num_labels, 1)
    print("index: %d files, %d classes (%.1f s)" %
          (len(index), classes, time.monotonic() - t0))

    model = torch.nn.Sequential(
        torch.nn.Linear(args.bytes, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, classes)).to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    with wharf.torch.Loader(index, batch_size=args.batch_size,
                            shuffle=True, seed=0,
                            num_workers=args.workers,
                            decode=wharf.decode.raw(args.bytes),
                            device=args.device) as loader:
        for epoch in range(args.epochs):
            loader.set_epoch(epoch)
            before = loader.stats()
            t0 = time.monotonic()
            n, total = 0, 0.0
            for x, y in loader:
                x = x.to(args.device, torch.float32) / 255.0
                y = y.to(args.device, torch.int64)
                loss = loss_fn(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                n += y.shape[0]
                total += loss.item() * y.shape[0]
            dt = time.monotonic() - t0
            after = loader.stats()
            stall = (after["wait_s"] - before["wait_s"]) / dt if dt else 0
            print("epoch %d: %d samples, loss %.4f, %.0f samples/s, "
                  "data stall %.1f%%" % (epoch, n, total / max(n, 1),
                                         n / dt, 100 * stall))
    index.close()
    if not args.index:
        os.unlink(index_path)
        os.rmdir(os.path.dirname(index_path))


if __name__ == "__main__":
    main()
