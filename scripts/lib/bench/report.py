"""The Markdown table of docs/PERFORMANCE.md's current results, made from a bench run's JSON
(`scripts/bench --json FILE`, measure.py's results()): the machine, the commit and the date of
the run, then one line per row with its medians, its ratio and its bar (✗ where the median
misses the bar), the daemon's peak RSS, the scale rows, and the run's notes and problems.

  python3 scripts/lib/bench/report.py RESULTS.json [--machine TEXT] [--commit REV] [--date DATE]
                                      [--update FILE [--block NAME]]

It prints the Markdown; with --update it replaces the text between FILE's lines
`<!-- bench-report:begin NAME -->` and `<!-- bench-report:end NAME -->` (NAME: --block,
default main) with it, and changes nothing else (never for a --quick run's JSON). The JSON has no date and no machine: the
date is the JSON file's modification date unless --date says otherwise (the bench writes the
file as its run ends), the machine is the JSON's CPU count plus --machine's text. The commit
is the one the bench built (`scripts/bench` without ALBUMFS_BIN); --commit names it for a
binary given in ALBUMFS_BIN. Only the standard library: it runs as a script or as
`python3 -m bench.report` with scripts/lib on PYTHONPATH."""
import argparse
import datetime
import json
import os
import re
import sys

DEFAULT_BLOCK = "main"


class ReportError(Exception):
    pass


def load(path):
    try:
        with open(path) as f:
            results = json.load(f)
    except (OSError, ValueError) as error:
        raise ReportError(f"cannot read {path}: {error}")
    if not isinstance(results, dict) or "rows" not in results:
        raise ReportError(f"{path} is not the JSON of `scripts/bench --json`")
    return results


def commit_of(results, commit=None):
    """--commit, else the checkout the bench built ("built from checkout REV, albumfs X")."""
    if commit:
        return commit
    match = re.match(r"built from checkout (\S+),", results.get("version") or "")
    if match and match.group(1) != "unknown":
        return match.group(1)
    return "unknown (a binary given in ALBUMFS_BIN: name its commit with --commit)"


def date_of(path, date=None):
    if date:
        return date
    return datetime.date.fromtimestamp(os.stat(path).st_mtime).isoformat()


def cell(text):
    """Table cell text: `|` would end the cell, a newline the row."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def number(value, kind):
    if value is None:
        return ""
    if kind == "iops":
        return f"{value:,.0f}"
    if kind == "mibps":
        return f"{value:,.1f} MiB/s"
    if kind == "mib":
        return f"{value:,.1f} MiB"
    return f"{value:.3f} s" if value < 10 else f"{value:.2f} s"


BAR = re.compile(r"^\s*(≤|≥|<|>)\s*([0-9][0-9.,]*)\s*(s|MiB)?\s*$")


def meets(bar, ratio, albumfs, unit_value=None):
    """Whether a row meets its bar: a bar without a unit holds the ratio, one in s the albumfs
    median, one in MiB `unit_value`. None when it cannot tell (no bar, no value, another form)."""
    match = BAR.match(bar or "")
    if not match:
        return None
    op, limit, unit = match.group(1), float(match.group(2).replace(",", "")), match.group(3)
    value = {None: ratio, "s": albumfs, "MiB": unit_value}[unit]
    if value is None:
        return None
    return {"≤": value <= limit, "≥": value >= limit, "<": value < limit, ">": value > limit}[op]


def bar_cell(bar, met, judge):
    if not bar:
        return ""
    return cell(bar) + (" ✗" if judge and met is False else "")


def table_rows(rows, with_floor, judge, with_peer=False):
    lines = []
    for row in rows:
        kind, ratio, albumfs = row.get("kind"), row.get("ratio"), row.get("albumfs_median")
        cells = [cell(row["label"]), number(row.get("plain_median"), kind), number(albumfs, kind),
                 "" if ratio is None else f"{ratio:.2f}",
                 bar_cell(row.get("bar"), meets(row.get("bar"), ratio, albumfs), judge)]
        if with_floor:
            floor, plain = row.get("floor"), row.get("plain_median")
            cells.append(f"{median(floor) / plain:.2f}" if floor and plain else "")
        if with_peer:
            peer = row.get("peer")
            cells.append(f"{albumfs / median(peer):.2f}" if peer and albumfs else "")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


PEAK = re.compile(r"^daemon peak RSS \(VmHWM\) over (\S+): ([0-9.]+) MiB \(bar ([^)]*)\)")


def peak_row(line, with_floor, judge, with_peer=False):
    """The bench's peak RSS line as a row: its value, its bar."""
    match = PEAK.match(line or "")
    if not match:
        return []
    over, mib, bar = match.group(1), float(match.group(2)), match.group(3)
    cells = [cell(f"daemon peak RSS (VmHWM) over {over}"), "", f"{mib:.1f} MiB", "",
             bar_cell(bar, meets(bar, None, None, mib), judge)]
    cells += [""] * (with_floor + with_peer)
    return ["| " + " | ".join(cells) + " |"]


def who_ran(notes):
    for note in notes:
        match = re.match(r"mount and timed commands run as (.*?),", note)
        if match:
            return match.group(1)
    return None


def markdown(results, *, date, machine=None, commit=None):
    """The Markdown of one run: a line naming the run, the table, the lines under it."""
    rows = list(results.get("rows") or [])
    scale = results.get("scale") or {}
    scale_rows = list(scale.get("rows") or [])
    with_floor = any(row.get("floor") for row in rows + scale_rows)
    with_peer = any(row.get("peer") for row in rows)
    rounds = results.get("rounds")
    mode = results.get("mode", "full")
    judge = mode != "quick"   # as the bench: a quick run judges no time
    run = [f"{mode} run", f"{rounds} round{'' if rounds == 1 else 's'}",
           f"data path {results.get('data_path', 'passthrough')}"]
    who = who_ran(results.get("notes") or [])
    if who:
        run.append(f"as {who}")
    if results.get("seconds") is not None:
        run.append(f"{results['seconds']:.0f} s")
    where = f"{results.get('cpus')} CPUs" + (f", {machine}" if machine else "")
    out = [f"Commit {commit_of(results, commit)}, {date}, on {where}: `scripts/bench` "
           f"({', '.join(run)}). Medians; ratio = albumfs / plain (W5: albumfs IOPS / plain IOPS)"
           + ("; ✗: the median misses its bar" if judge else "")
           + ". Generated by `scripts/lib/bench/report.py` from the run's `--json`."]
    if not judge:
        out.append("")
        out.append("A quick run (CI's small sizes, one round) checks correctness and judges no time: "
                   "its times are not measurements.")
    out.append("")
    header = (["workload", "plain", "albumfs", "ratio", "bar"] + (["floor"] if with_floor else [])
              + (["÷ passthrough_ll"] if with_peer else []))
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "---|" * len(header))
    out += table_rows(rows, with_floor, judge, with_peer)
    out += peak_row(results.get("peak_rss"), with_floor, judge, with_peer)
    out += table_rows(scale_rows, with_floor, judge, with_peer)
    below = []
    if with_floor:
        below.append("floor: the same `cp --reflink=never` into the plain directory (read and write, as `cp` "
                     "copies into any FUSE mount), as a multiple of plain")
    if with_peer:
        below.append("÷ passthrough_ll: albumfs's median over that of libfuse 3.14's passthrough_ll (compiled "
                     "from libfuse3-dev's example at bench time, mounted by the same user over a plain "
                     "directory with -o cache=always, the daemon path) in the same rounds; ≤ 1 is at or "
                     "below it")
    below += [f"scale: {line}" for line in scale.get("lines") or []]
    below += [f"note: {note}" for note in results.get("notes") or []]
    below += [f"**PROBLEM**: {problem}" for problem in results.get("problems") or []]
    if below:
        out.append("")
        out += [f"- {line}".replace("\n", " ") for line in below]
    return "\n".join(out) + "\n"


def markers(block):
    return f"<!-- bench-report:begin {block} -->", f"<!-- bench-report:end {block} -->"


def update(text, block, generated):
    """`text` with the lines between its begin and end markers of `block` replaced."""
    begin, end = markers(block)
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == begin]
    ends = [i for i, line in enumerate(lines) if line.strip() == end]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise ReportError(f"want exactly one {begin} followed by one {end}; "
                          f"found {len(starts)} and {len(ends)}")
    return "".join(lines[:starts[0] + 1]) + generated + "".join(lines[ends[0]:])


def main(argv=None):
    parser = argparse.ArgumentParser(prog="scripts/lib/bench/report.py",
                                     description="the Markdown table of a `scripts/bench --json` file")
    parser.add_argument("json", metavar="RESULTS.json")
    parser.add_argument("--machine", help="what the JSON does not say of the machine (its CPU count it does)")
    parser.add_argument("--commit", help="the commit of the binary (default: the checkout the bench built)")
    parser.add_argument("--date", help="the date of the run (default: the JSON file's modification date)")
    parser.add_argument("--update", metavar="FILE", help="replace FILE's block between its bench-report markers")
    parser.add_argument("--block", default=DEFAULT_BLOCK, help=f"the block --update replaces (default {DEFAULT_BLOCK})")
    args = parser.parse_args(argv)
    try:
        results = load(args.json)
        generated = markdown(results, date=date_of(args.json, args.date), machine=args.machine,
                             commit=args.commit)
        if args.update:
            if results.get("mode") == "quick":
                raise ReportError("--update: a --quick run's times are not measurements (print it without --update)")
            with open(args.update) as f:
                text = f.read()
            new = update(text, args.block, generated)
            with open(args.update, "w") as f:
                f.write(new)
        else:
            sys.stdout.write(generated)
    except (ReportError, OSError) as error:
        print(f"report: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
