#!/usr/bin/env python3
"""How much of an object's code is the same function compiled again for another device.

Usage: bench/text_by_device.py OBJECT [--top N]

Reads the object's function symbols (`nm -S -C`), and folds names that differ only in
  device      locus::cpu / locus::gpu<N>                                 -> D
  list        a device list (data_parallel<P, D, ...>, dist::group_adapter<K::group<D, ...>, D, ...>) -> one D
  replica     std::integral_constant<unsigned long, I> (a replica index) -> I
  kind        the communicator kind (dist::in_process, automatic, mpi, nccl) -> K
and prints the text of all functions, the text left if every folded group were compiled once
(its largest member), and the share that is duplicated, cumulatively for each folding.
With --top N it also lists the N groups with the most duplicated text.
"""
import re
import subprocess
import sys
from collections import defaultdict

DEVICE = re.compile(r"locus::(?:cpu|gpu<\d+>)")
LIST = re.compile(r"D(?:, D)+")
REPLICA = re.compile(r"std::integral_constant<unsigned long, \d+ul?>")
KIND = re.compile(r"locus::dist::(?:in_process|automatic|mpi|nccl)")


def functions(obj):
    out = subprocess.run(["nm", "-S", "-C", "--size-sort", obj], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split(" ", 3)
        if len(parts) < 4 or parts[2] not in "tTwW":
            continue
        yield parts[3], int(parts[1], 16)


def folded(symbols, steps):
    groups = defaultdict(list)
    for name, size in symbols:
        key = name
        for step in steps:
            key = step(key)
        groups[key].append(size)
    return groups


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    top = 0
    if "--top" in args:
        i = args.index("--top")
        top = int(args[i + 1])
        del args[i:i + 2]
    symbols = list(functions(args[0]))
    total = sum(size for _, size in symbols)
    steps = [
        ("device", lambda s: DEVICE.sub("D", s)),
        ("+ device list", lambda s: LIST.sub("D", s)),
        ("+ replica index", lambda s: REPLICA.sub("I", s)),
        ("+ communicator kind", lambda s: KIND.sub("K", s)),
    ]
    print(f"| folded by | text KB | once KB | duplicated |")
    print(f"| --- | ---: | ---: | ---: |")
    for k in range(1, len(steps) + 1):
        groups = folded(symbols, [f for _, f in steps[:k]])
        once = sum(max(v) for v in groups.values())
        print(f"| {steps[k - 1][0]} | {total / 1000:.1f} | {once / 1000:.1f} | {100 * (total - once) / total:.0f}% |")
    if top:
        groups = folded(symbols, [f for _, f in steps])
        ranked = sorted(groups.items(), key=lambda kv: sum(kv[1]) - max(kv[1]), reverse=True)[:top]
        print()
        print("| duplicated KB | copies | function (folded) |")
        print("| ---: | ---: | --- |")
        for name, sizes in ranked:
            print(f"| {(sum(sizes) - max(sizes)) / 1000:.1f} | {len(sizes)} | `{name[:160]}` |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
