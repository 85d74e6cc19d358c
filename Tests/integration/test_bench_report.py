"""scripts/lib/bench/report.py: the Markdown table of docs/PERFORMANCE.md's current results,
made from `scripts/bench --json` (no mount). The input is data/bench-quick.json, rows of a real
`scripts/bench --quick --json` run (2026-12-02, a binary given in ALBUMFS_BIN), and a full run
built from it here."""

from __future__ import annotations

import copy
import json
import os
import re

from albumfs_testlib import REPO_ROOT

from bench import report   # scripts/lib is on sys.path (albumfs_testlib puts it there)

QUICK = REPO_ROOT / "Tests" / "integration" / "data" / "bench-quick.json"
DOC = REPO_ROOT / "docs" / "PERFORMANCE.md"
HEADER = ["workload", "plain", "albumfs", "ratio", "bar"]


def quick() -> dict:
    return json.loads(QUICK.read_text())


def full() -> dict:
    """The quick run as a full run would write it: its commit, three rounds, a floor, scale rows,
    a problem."""
    results = copy.deepcopy(quick())
    results.update(mode="full", rounds=3, version="built from checkout c544c86, albumfs 0.1.0",
                   problems=["W4: the rsync copy out of albumfs differs from the originals"])
    w1 = results["rows"][0]
    w1["floor"] = [0.30, 0.33, 0.27]
    results["scale"] = {"lines": ["store of 1000 assets, album Albums/Big of 100 (made by scripts/make-store in 0.1 s)"],
                        "rows": [{"label": "scale: warm ls, album of 100 (store of 1000)", "kind": "seconds",
                                  "bar": "≤ 1.5", "plain": [0.002], "albumfs": [0.004], "plain_median": 0.002,
                                  "albumfs_median": 0.004, "ratio": 2.0}]}
    return results


def cells(line: str) -> list[str]:
    """A Markdown table line's cells (an escaped \\| stays in its cell)."""
    assert line.startswith("| ") and line.endswith(" |"), line
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line[1:-1])]


def table(text: str) -> dict[str, list[str]]:
    """label -> the other cells, for every row of the one table in text; checks its header."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    header, rule, rows = lines[0], lines[1], lines[2:]
    width = len(cells(header))
    assert cells(header)[:5] == HEADER and rule == "|" + "---|" * width
    out = {}
    for line in rows:
        row = cells(line)
        assert len(row) == width, f"{len(row)} cells, want {width}: {line}"
        out[row[0]] = row[1:]
    return out


def test_a_quick_run_gives_each_rows_medians_ratio_and_bar_and_judges_no_time():
    """Every row of the JSON in its order, with its medians, its ratio to 2 places and its bar
    (a `|` in a label escaped); the peak RSS; the machine (CPUs), the commit (unknown for a
    binary given in ALBUMFS_BIN) and the date; no ✗, since a quick run judges no time."""
    text = report.markdown(quick(), date="2026-12-02", machine="the test VM")
    first = text.splitlines()[0]
    assert first.startswith("Commit unknown (a binary given in ALBUMFS_BIN"), first
    assert "2026-12-02, on 2 CPUs, the test VM" in first and "quick run, 1 round" in first
    assert "judges no time" in text
    rows = table(text)
    assert list(rows) == [row["label"] for row in quick()["rows"]] + ["daemon peak RSS (VmHWM) over W1–W4"]
    assert rows["W1 import: cp -r 200 × 1 MiB into an album + sync"] == ["0.297 s", "0.638 s", "2.15", "≤ 1.5"]
    assert rows["W3 warm find -type f | wc -l, album of 5000"] == ["0.020 s", "0.018 s", "0.94", "≤ 1.5"]
    w5 = next(label for label in rows if label.startswith("W5"))
    assert rows[w5] == ["105,049", "81,050", "0.77", "≥ 0.8"]
    w6 = next(label for label in rows if label.startswith("W6 rm + restore"))
    assert rows[w6] == ["0.091 s", "2.420 s", "26.69", ""]
    assert rows["daemon peak RSS (VmHWM) over W1–W4"] == ["", "27.1 MiB", "", "≤ 100 MiB"]
    assert "✗" not in text
    assert "- note: mount of the new, empty bench store: 0.125 s" in text.splitlines()


def test_a_full_run_marks_missed_bars_and_shows_its_commit_floor_scale_and_problems():
    """A full run: the commit the bench built, ✗ on each median that misses its bar (a ratio, a
    time in s, the peak RSS in MiB) and on no other, the floor as a multiple of plain, the scale
    rows and lines, and the problems."""
    results = full()
    results["peak_rss"] = results["peak_rss"].replace("27.1 MiB (bar", "120.5 MiB (bar")
    text = report.markdown(results, date="2026-12-01")
    assert text.startswith("Commit c544c86, 2026-12-01, on 2 CPUs: `scripts/bench` (full run, 3 rounds, "
                           "data path passthrough, as uid 0 (root), 42 s)")
    rows = table(text)
    missed = sorted(label for label, row in rows.items() if row[3].endswith("✗"))
    assert missed == ["W1 import: cp -r 200 × 1 MiB into an album + sync",
                      "W5 random 4 KiB reads of the 64 MiB file, 2 s, 1 thread (cold start): IOPS",
                      "daemon peak RSS (VmHWM) over W1–W4",
                      "scale: warm ls, album of 100 (store of 1000)"]
    assert rows["W6 Empty Trash of 5000 photos deleted with rm (unlink in the trash's files/)"][3] == "< 10 s"
    assert rows["W1 import: cp -r 200 × 1 MiB into an album + sync"][4] == "1.01"   # 0.30 / 0.2975
    assert rows["W3 warm find -type f | wc -l, album of 5000"][4] == ""
    lines = text.splitlines()
    assert "- scale: store of 1000 assets, album Albums/Big of 100 (made by scripts/make-store in 0.1 s)" in lines
    assert "- **PROBLEM**: W4: the rsync copy out of albumfs differs from the originals" in lines


def test_update_replaces_only_the_block_of_performance_md(tmp_path, capsys):
    """The documented command (`--update docs/PERFORMANCE.md`) on a copy of the doc: the text
    between its `bench-report` markers becomes the generated table of a full run, nothing else
    changes, a second run changes nothing more; the date defaults to the JSON file's. A quick
    run's JSON, or a file without the markers, leaves the file as it was (exit 2)."""
    doc = tmp_path / "PERFORMANCE.md"
    original = DOC.read_text()
    doc.write_text(original)
    results = tmp_path / "bench.json"
    results.write_text(QUICK.read_text())
    assert report.main([os.fspath(results), "--update", os.fspath(doc)]) == 2
    assert doc.read_text() == original
    assert "--quick" in capsys.readouterr().err
    results.write_text(json.dumps(full()))
    os.utime(results, (1_764_633_600, 1_764_633_600))   # 2025-12-02 00:00 UTC: that day or the one before
    assert report.main([os.fspath(results), "--update", os.fspath(doc), "--machine", "the VM above"]) == 0
    begin, end = report.markers("main")
    before, rest = original.split(begin + "\n")
    _, after = rest.split(end)
    updated = doc.read_text()
    assert updated.startswith(before + begin + "\n") and updated.endswith(end + after)
    block = updated[len(before + begin + "\n"):-len(end + after)]
    date = re.match(r"Commit c544c86, (\d{4}-\d\d-\d\d),", block).group(1)
    assert date in ("2025-12-01", "2025-12-02")
    assert block == report.markdown(full(), date=date, machine="the VM above")
    assert block.startswith("Commit c544c86, ") and "| W1 import: cp -r 200 × 1 MiB" in block
    assert report.main([os.fspath(results), "--update", os.fspath(doc), "--machine", "the VM above"]) == 0
    assert doc.read_text() == updated

    bare = tmp_path / "bare.md"
    bare.write_text("# no markers\n")
    assert report.main([os.fspath(results), "--update", os.fspath(bare)]) == 2
    assert bare.read_text() == "# no markers\n"
    assert "bench-report:begin main" in capsys.readouterr().err
