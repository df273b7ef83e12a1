"""Checks a mount's metrics (test-metrics runs this with /usr/bin/python3).

    metrics-check.py same MOUNT FILE   .wharf/metrics and --metrics-file FILE
                                       parse with prometheus_client's parser
                                       and say what .wharf/stats says
    metrics-check.py whole FILE SECONDS  reads FILE in a loop while the mount
                                       rewrites it: every read parses whole

Each metric's HELP line ends with the stats member it is, "(origin.requests)",
so every metric is compared with its JSON number, none left out.  Exit 0, or
1 with the differences on stderr; 77 when the parser is not installed.
"""
import json
import os
import re
import sys
import time

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("SKIP: python3-prometheus-client is not installed "
          "(apt-get install python3-prometheus-client)")
    sys.exit(77)

problems = []


def fail(msg):
    problems.append(msg)


def read(path):
    with open(path) as f:
        return f.read()


def families(text, where):
    """The families of text, after checking the lines the parser forgives:
    HELP and TYPE before each family, units and _total in the names."""
    helps = set(re.findall(r"^# HELP (\S+) ", text, re.M))
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    if not helps or helps != set(types):
        fail(f"{where}: HELP {sorted(helps ^ set(types))} without TYPE "
             "or the other way")
    for name, kind in types.items():
        if not name.startswith("wharf_"):
            fail(f"{where}: {name} is not named wharf_*")
        if (kind == "counter") != name.endswith("_total"):
            fail(f"{where}: {name} is a {kind}: _total is for counters")
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    if len(fams) < 40:
        fail(f"{where}: only {len(fams)} metrics")
    return fams


def stats_value(stats, path, labels):
    """The JSON number that a HELP's "(a.b)" names, for a sample's labels
    (a host's from "concurrency"); bools are 0 or 1."""
    obj = stats
    parts = path.split(".")
    if parts[0] == "concurrency":
        hosts = [h for h in stats["concurrency"]
                 if h["host"] == labels.get("host")]
        if len(hosts) != 1:
            return None
        obj, parts = hosts[0], parts[1:]
    for p in parts:
        if not isinstance(obj, dict) or p not in obj:
            return None
        obj = obj[p]
    return float(obj) if isinstance(obj, (int, float, bool)) else None


# Metrics in other units than their JSON member, and how close they are
# (the JSON rounds to 3 digits).
SCALE = {"wharf_origin_latency_seconds": (1e3, 1e-3),
         "wharf_origin_throughput_bytes_per_second": (1e-6, 1e-3)}
# Each histogram's count, as a path in .wharf/stats.
HISTOGRAM_COUNT = {"wharf_origin_ttfb_seconds": "origin.ttfb_ms.count",
                   "wharf_read_latency_seconds": "reads.latency_count"}
# Moving while nobody reads: the clock.
MOVING = {"wharf_uptime_seconds"}


def compare(fams, stats, text, where, settled):
    """settled: text was written after the last change of every counter,
    but maybe before a host's controller last published its gauges (an
    in-flight count, say), which only the .wharf files taken together
    agree on."""
    help_of = dict(re.findall(r"^# HELP (\S+) .*\(([\w.]+)\)\.$", text,
                              re.M))
    mp = stats["mountpoint"]
    checked = 0
    for name, fam in fams.items():
        for s in fam.samples:
            if s.labels.get("mountpoint") != mp:
                fail(f"{where}: {s.name} has no mountpoint=\"{mp}\" label")
        if fam.type == "histogram":
            count = [s.value for s in fam.samples
                     if s.name.endswith("_count")]
            if name not in HISTOGRAM_COUNT:
                fail(f"{where}: histogram {name} has no stats count")
                continue
            want = stats_value(stats, HISTOGRAM_COUNT[name], {})
            if count != [want]:
                fail(f"{where}: {name}_count {count}, stats say {want}")
            buckets = [s.value for s in fam.samples
                       if s.name.endswith("_bucket")]
            if buckets != sorted(buckets) or buckets[-1] != want:
                fail(f"{where}: {name} buckets {buckets} do not add up")
            checked += 1
            continue
        if name == "wharf_build_info":
            if not fam.samples[0].labels.get("version"):
                fail(f"{where}: build_info has no version label")
            checked += 1
            continue
        if name == "wharf_mount_info":
            lab = fam.samples[0].labels
            if (lab.get("source"), lab.get("cache_dir")) != (
                    stats["source"], stats["cache_dir"]):
                fail(f"{where}: mount_info {lab}")
            continue
        raw = name + "_total" if fam.type == "counter" else name
        path = help_of.get(raw)
        if not path:
            fail(f"{where}: {raw}'s HELP names no stats member")
            continue
        if not settled and path.startswith("concurrency.") and \
                fam.type == "gauge":
            continue
        for s in fam.samples:
            want = stats_value(stats, path, s.labels)
            if want is None:
                fail(f"{where}: {raw}: stats have no {path}")
                continue
            scale, tol = SCALE.get(name, (1, 0))
            got = s.value * scale
            if name in MOVING:
                tol = 30
            if abs(got - want) > tol + 1e-9:
                fail(f"{where}: {raw}{s.labels} is {s.value}, stats "
                     f"say {path} = {want}")
            checked += 1
    if checked < 40:
        fail(f"{where}: only {checked} metrics compared")
    return checked


def same(mount, path):
    stats = json.loads(read(os.path.join(mount, ".wharf/stats")))
    for where, text, settled in (
            (".wharf/metrics", read(os.path.join(mount, ".wharf/metrics")),
             True),
            (path, read(path), False)):
        n = compare(families(text, where), stats, text, where, settled)
        print(f"{where}: {n} samples agree with .wharf/stats")
    if stats["reads"]["count"] == 0 or stats["origin"]["requests"] == 0:
        fail("no reads or requests counted: the test read nothing")
    if stats["reads"]["latency_count"] < stats["reads"]["count"]:
        fail(f"{stats['reads']['latency_count']} reads timed, fewer than "
             f"the {stats['reads']['count']} served")


def whole(path, seconds):
    """Reads and parses path until `seconds` pass; the rewrites seen (its
    inode changed between two reads) must be several, or this proved
    nothing."""
    changes, last, reads, first = 0, None, 0, None
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            with open(path) as f:
                ino = os.fstat(f.fileno()).st_ino
                changes += last is not None and ino != last
                last = ino
                text = f.read()
        except FileNotFoundError:
            fail(f"{path} was missing for a moment")
            break
        reads += 1
        try:
            names = set(families(text, f"{path} (read {reads})"))
        except ValueError as e:
            fail(f"{path}: read {reads} does not parse: {e}")
            break
        # A file cut short lacks its last families, or its last newline.
        first = first or names
        if names != first or not text.endswith("\n"):
            fail(f"{path}: read {reads} is cut short "
                 f"(lacks {sorted(first - names)})")
            break
    print(f"{path}: {reads} reads across {changes} rewrites")
    if changes < 2:
        fail(f"{path}: {changes} rewrites seen in {seconds} s: was it "
             "rewritten?")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "same":
        same(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "whole":
        whole(sys.argv[2], float(sys.argv[3]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for p in problems[:30]:
        print("FAIL:", p, file=sys.stderr)
    return 1 if problems else 0


sys.exit(main())
