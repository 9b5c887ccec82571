#!/usr/bin/env python3
"""rsverbs' own instructions per message, by source file, from two callgrind runs.

    tests/bench/cgfiles.py SMALL.cg LARGE.cg [MESSAGES]

SMALL.cg and LARGE.cg are callgrind outputs of the same program with
different message counts (ci/guest/msgcost.sh keeps them in its output
directory, e.g. rsverbs.500.0.cg and rsverbs.1500.0.cg). MESSAGES is the
difference of the counts (default 1000). Every instruction that callgrind
attributes to a function of rsverbs (inlined code included) is counted under
the source file it comes from: rsverbs' own files, the standard library's
(std: ...) and other crates' (crate: ...). Prints one line per file, largest
first, then the total. docs/benchmarks.md, session 36.
"""
import re
import subprocess
import sys

LINE = re.compile(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(\S.*)")
FILE_FN = re.compile(r"(.*?\.(?:rs|c|h|S)|\?\?\?|<[^>]*>):(.*)")


def per_line(cg):
    """(source file, function) -> instructions, exclusive, from one run."""
    out = subprocess.run(
        ["callgrind_annotate", "--inclusive=no", "--threshold=100", "--auto=no", cg],
        capture_output=True, text=True, check=True).stdout
    counts = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if not m or m.group(2).startswith("=>") or "PROGRAM TOTALS" in line:
            continue
        name = re.sub(r" \[.*\]$", "", m.group(2).strip())
        fm = FILE_FN.match(name)
        key = (fm.group(1), fm.group(2)) if fm else (name, "")
        counts[key] = counts.get(key, 0) + int(m.group(1).replace(",", ""))
    return counts


def group(path):
    """A short name for a source file: rsverbs' own path, std: or crate:."""
    if "/library/" in path:
        return "std: " + path.split("/library/")[-1].split("/src/", 1)[-1]
    if "/registry/src/" in path:
        return "crate: " + path.split("/registry/src/")[-1].split("/")[1]
    m = re.search(r"/(src|capi|include)/(?:\.\./)?(.*)$", path)
    if m:
        return ("capi/" + m.group(2)) if "/../capi/" in path else (m.group(1) + "/" + m.group(2))
    return path


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    small, large = per_line(sys.argv[1]), per_line(sys.argv[2])
    n = float(sys.argv[3]) if len(sys.argv) == 4 else 1000.0
    by_file = {}
    for key in set(small) | set(large):
        if "rsverbs" not in key[1]:
            continue
        v = (large.get(key, 0) - small.get(key, 0)) / n
        g = group(key[0])
        by_file[g] = by_file.get(g, 0.0) + v
    for g, v in sorted(by_file.items(), key=lambda kv: -kv[1]):
        if abs(v) >= 1:
            print(f"{v:8.1f}  {g}")
    print(f"{sum(by_file.values()):8.1f}  total (rsverbs' own)")


if __name__ == "__main__":
    main()
