"""W3: browsing the big album and the roll, warm (ls -l, find, du)."""
import os

from .harness import log, q


def run(bench):
    log("W3 browse (warm)")
    roll_size = bench.album_size + bench.photos + 1
    for where, count in (("Albums/Big", bench.album_size), ("Camera Roll", roll_size)):
        dirs = {side: os.path.join(root, where) for side, root in bench.sides.items()}
        what = f"album of {count}" if where.startswith("Albums") else f"roll of {count}"

        def warm(command):
            return lambda side: bench.sh(command[side], capture=True)

        def expect_count(side, out):
            if out.strip() != str(count):
                bench.problem(f"W3: find in {dirs[side]} counted {out.strip()}, expected {count}")

        for name, template, check in (
                ("ls -l", "ls -l {} > /dev/null", None),
                ("find -type f | wc -l", "find {} -type f | wc -l", expect_count),
                ("du -s", "du -s {}", None)):
            commands = {side: template.format(q(d)) for side, d in dirs.items()}
            bench.measure(f"W3 warm {name}, {what}", commands, before=warm(commands), after=check, bar="≤ 1.5")
