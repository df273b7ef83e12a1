#!/usr/bin/python3
"""Train a small convolutional network on a folder of JPEG images.

    examples/train_jpeg.py DIR [--epochs 3] [--workers 2] [--size 224]

DIR has one subdirectory per class, as torchvision's ImageFolder wants (a
wharf mount will do: wharf mount SOURCE MNT, then MNT/train).  libwharf's
C workers decode each JPEG and apply torchvision's training augmentation
(RandomResizedCrop, RandomHorizontalFlip, ToTensor, Normalize) straight
into the shared-memory batch: wharf.decode.jpeg(size, dtype="float32",
mean, std) gives float32 (batch, 3, size, size) tensors, no Python per
sample.  The last epoch is followed by an evaluation pass with the eval
transform (crop="center": Resize(size / 0.875), CenterCrop(size)).  Each
epoch prints samples/s and the data-stall share.

Needs the wharf package with a libwharf built with libjpeg-turbo: `pip
install .` from the source tree, or PYTHONPATH=<source>/python after
./quickstart build (README).
"""

import argparse
import os
import tempfile
import time

import torch

import wharf
import wharf.torch

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def model_for(classes):
    def block(i, o):
        return [torch.nn.Conv2d(i, o, 3, stride=2, padding=1),
                torch.nn.BatchNorm2d(o), torch.nn.ReLU()]
    return torch.nn.Sequential(
        *block(3, 16), *block(16, 32), *block(32, 64),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(64, classes))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", help="one subdirectory of JPEGs per class")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--max-batches", type=int, default=0,
                    help="stop each epoch after this many batches")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available()
                    else "cpu")
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="wharf-jpeg-")
    index = wharf.Index.build(os.path.join(tmp, "train.idx"), dir=args.dir)
    classes = max(index.num_labels, 1)
    print("index: %d files, %d classes" % (len(index), classes))
    model = model_for(classes).to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    train = wharf.decode.jpeg(args.size, dtype="float32", mean=MEAN,
                              std=STD)
    # A damaged file is left out of its batch (and counted), not fatal.
    with wharf.torch.Loader(index, batch_size=args.batch_size,
                            shuffle=True, seed=0, skip_bad=True,
                            num_workers=args.workers, decode=train,
                            device=args.device) as loader:
        for epoch in range(args.epochs):
            loader.set_epoch(epoch)
            before = loader.stats()
            t0 = time.monotonic()
            n, total = 0, 0.0
            for b, (x, y) in enumerate(loader):
                if args.max_batches and b >= args.max_batches:
                    break
                loss = loss_fn(model(x), y.to(torch.int64))
                opt.zero_grad()
                loss.backward()
                opt.step()
                n += y.shape[0]
                total += loss.item() * y.shape[0]
            dt = time.monotonic() - t0
            after = loader.stats()
            stall = (after["wait_s"] - before["wait_s"]) / dt if dt else 0
            print("epoch %d: %d samples, loss %.4f, %.0f samples/s, "
                  "data stall %.1f%%, %d bad files skipped" %
                  (epoch, n, total / max(n, 1), n / dt, 100 * stall,
                   after["skipped"] - before["skipped"]))
    evaluate = wharf.decode.jpeg(args.size, crop="center", dtype="float32",
                                 mean=MEAN, std=STD)
    model.eval()
    right = seen = 0
    with torch.no_grad(), wharf.torch.Loader(
            index, batch_size=args.batch_size, num_workers=args.workers,
            skip_bad=True, decode=evaluate, device=args.device) as loader:
        for b, (x, y) in enumerate(loader):
            if args.max_batches and b >= args.max_batches:
                break
            right += int((model(x).argmax(1) == y.to(torch.int64)).sum())
            seen += y.shape[0]
    print("eval (center crop, training files): %d/%d right" % (right, seen))
    index.close()
    os.unlink(os.path.join(tmp, "train.idx"))
    os.rmdir(tmp)


if __name__ == "__main__":
    main()
