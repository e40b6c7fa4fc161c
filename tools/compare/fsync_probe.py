#!/usr/bin/env python3
"""The fsync floor of this disk, for reading `compare`'s durable-add figures against.

Times N writes of B bytes, each followed by fdatasync, to a file in DIR: appended (the file
grows, as a journal's end does) and overwritten in place (a preallocated file, as SQLite's
WAL is reused after a checkpoint). Runs the two modes alternately, twice each, so that drift
between runs shows. Python's standard library only.

    python3 tools/compare/fsync_probe.py --dir /tmp --count 400 --bytes 900
"""
import argparse
import os
import tempfile
import time


def probe(directory, mode, count, size):
    fd, path = tempfile.mkstemp(prefix="fsync-probe-", dir=directory)
    try:
        if mode == "overwrite":
            os.write(fd, b"\0" * (count * size))
            os.fsync(fd)
        payload = os.urandom(size)
        times = []
        for i in range(count):
            started = time.perf_counter()
            if mode == "append":
                os.write(fd, payload)
            else:
                os.pwrite(fd, payload, i * size)
            os.fdatasync(fd)
            times.append(time.perf_counter() - started)
    finally:
        os.close(fd)
        os.unlink(path)
    times.sort()
    return times[count // 2] * 1e3, times[min(count - 1, count * 99 // 100)] * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="a directory on the disk to measure")
    parser.add_argument("--count", type=int, default=400, help="writes per run")
    parser.add_argument("--bytes", type=int, default=900, help="bytes per write (a turn's frame)")
    args = parser.parse_args()
    if args.count < 1 or args.bytes < 1:
        parser.error("--count and --bytes must be at least 1")
    for mode in ["append", "overwrite", "append", "overwrite"]:
        p50, p99 = probe(args.dir, mode, args.count, args.bytes)
        print(f"{mode:9} write + fdatasync of {args.bytes} B: p50 {p50:.3f} ms, p99 {p99:.3f} ms")


if __name__ == "__main__":
    main()
