#!/usr/bin/env python3
"""Times `compare`'s queries under two builds of `select_replay`, query by query.

On a shared 2-core machine a run drifts by 10% from the one before, and the second of two runs
is the faster; a p50 over all queries of one run against one of the other mostly measures that.
This runs the builds in the order A B B A, `--repeats` times, takes each query's median over
the runs of a build (`select_replay --each` prints a query's median over its rounds), and
prints the quantiles of the per-query ratios B / A and the ratio of their sums, then the same
sum for A against itself, the noise floor of the run:

    tools/compare/ab_select.py /tmp/select_replay_a target/release/select_replay \\
        --dir D --turns 1000000 --samples 50

`--dir`, `--turns` and `--samples` are `select_replay`'s (the index a `compare --keep` run left).
"""

import argparse
import statistics
import subprocess
import sys


def run(binary, args, samples):
    command = [binary, "--dir", args.dir, "--turns", str(args.turns), "--samples", str(samples),
               "--rounds", str(args.rounds), "--each"]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    # `--each` prints "<median> ms <query>" a query, then the p50 over all of them.
    times = [float(words[0]) for words in (line.split(" ", 2) for line in out.splitlines())
             if len(words) == 3 and words[1] == "ms"]
    if len(times) != samples:
        sys.exit(f"{binary} timed {len(times)} queries, not {samples}")
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="select_replay of the baseline build")
    parser.add_argument("b", help="select_replay of the build measured")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    runs = {args.a: [], args.b: []}
    for _ in range(args.repeats):
        for binary in (args.a, args.b, args.b, args.a):
            runs[binary].append(run(binary, args, args.samples))
    medians = {b: [statistics.median(q) for q in zip(*r)] for b, r in runs.items()}
    a, b = medians[args.a], medians[args.b]
    if len(a) != len(b) or not a:
        sys.exit("the builds timed different queries")
    ratios = sorted(y / x for x, y in zip(a, b))

    def at(q):
        return ratios[int((len(ratios) - 1) * q)]

    print(f"B/A per query over {len(ratios)} queries: p10 {at(0.1):.2f}, p25 {at(0.25):.2f}, "
          f"p50 {at(0.5):.2f}, p75 {at(0.75):.2f}, p90 {at(0.9):.2f}; sums {sum(b) / sum(a):.3f}")
    print(f"median of the per-query medians, ms: A {statistics.median(a):.3f}, B {statistics.median(b):.3f}")
    # The noise floor: A against itself, its run at the start of each A B B A over its run at
    # the end. A B/A sum no further from 1 than this is not a difference between the builds.
    first = [statistics.median(q) for q in zip(*runs[args.a][0::2])]
    last = [statistics.median(q) for q in zip(*runs[args.a][1::2])]
    print(f"A against itself (last run of each A B B A over the first): sums {sum(last) / sum(first):.3f}")


if __name__ == "__main__":
    main()
