#!/usr/bin/env python3
"""The PyTorch side of the CUDA loop benchmark (tests/gpu/run).

Reads the same record files as `cuda-bench loop` (--record-byte samples, one
epoch, shuffled, batches of --batch) with torch.utils.data.DataLoader,
pin_memory=True and .to(device, non_blocking=True), runs a spin kernel of
--compute-us per batch, and prints steps/s and the stall share the same way:
from the first batch on, (wall - compute) / wall.

Without torch or a CUDA device it prints SKIP and exits 77, unless nvidia-smi
lists a GPU: then torch's CUDA is missing or broken (a driver too old for the
CUDA torch was built with, say), and it says so and exits 1.
"""
import argparse
import os
import subprocess
import sys
import time


def listed_gpus():
    """The GPUs nvidia-smi lists ([] without nvidia-smi)."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                             text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [ln for ln in out.splitlines() if ln.startswith("GPU ")]


def unavailable(why):
    """SKIP (77) where no GPU is; a failure (1) where nvidia-smi lists
    one."""
    gpus = listed_gpus()
    if not gpus:
        print(f"SKIP: torch: {why}")
        return 77
    print(f"FAIL: torch: {why}, but nvidia-smi lists {gpus[0]}: "
          "install a torch built for a CUDA this driver supports, or "
          "update the driver", file=sys.stderr)
    return 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--record", type=int, default=602112)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--compute-us", type=int, default=10000)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    try:
        import torch
        import torch.utils.data as tud
    except ImportError as e:
        return unavailable(str(e))
    if not torch.cuda.is_available():
        try:  # the reason, where torch gives one (CUDA's error)
            torch.cuda.init()
            why = "no CUDA device"
        except Exception as e:  # noqa: BLE001 - any reason is worth saying
            why = "CUDA: %s" % " ".join(str(e).split())
        return unavailable(why)

    class Records(tud.Dataset):
        def __init__(self, files, record):
            self.files = files
            self.record = record
            self.per = [os.path.getsize(f) // record for f in files]
            self.starts = []
            n = 0
            for p in self.per:
                self.starts.append(n)
                n += p
            self.n = n
            self.fds = None

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            if self.fds is None:  # per worker, after the fork
                self.fds = [os.open(f, os.O_RDONLY) for f in self.files]
            f = 0
            while f + 1 < len(self.starts) and self.starts[f + 1] <= i:
                f += 1
            k = i - self.starts[f]
            buf = os.pread(self.fds[f], self.record, k * self.record)
            return torch.frombuffer(bytearray(buf), dtype=torch.uint8)

    dev = torch.device("cuda")
    # torch.cuda._sleep spins for a number of cycles: calibrate to time.
    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    cyc = 50_000_000
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
        enable_timing=True)
    s.record()
    torch.cuda._sleep(cyc)
    e.record()
    e.synchronize()
    cycles_per_us = cyc / (s.elapsed_time(e) * 1000.0)
    spin = int(a.compute_us * cycles_per_us)

    dl = tud.DataLoader(Records(a.files, a.record), batch_size=a.batch,
                        shuffle=True, num_workers=a.workers,
                        prefetch_factor=a.prefetch, pin_memory=True)
    steps = 0
    t_open = time.monotonic()
    t0 = None
    for x in dl:
        x = x.to(dev, non_blocking=True)
        if steps == 0:
            t0 = time.monotonic()
            first = t0 - t_open
        torch.cuda._sleep(spin)
        del x
        steps += 1
    torch.cuda.synchronize()
    wall = time.monotonic() - t0
    compute = steps * a.compute_us / 1e6
    print(f"torch_compute_us {a.compute_us}")
    print(f"torch_steps {steps}")
    print(f"torch_first_batch_s {first:.3f}")
    print(f"torch_wall_s {wall:.3f}")
    print(f"torch_stall_share {max(0.0, (wall - compute) / wall):.3f}")
    print(f"torch_samples_per_s {steps * a.batch / wall:.0f}")
    print(f"torch_steps_per_s {steps / wall:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
