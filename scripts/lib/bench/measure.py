"""Measuring: each row runs its commands on the plain tree and on the mount, interleaved, for
the rounds asked; the table of medians and ratios, and the same results as JSON (--json)."""
import json
import math
import os

from .harness import BenchError, log, median


def finite(value):
    """A number JSON can hold: NaN (the median of no rounds) and infinities become null."""
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


class Measurements:
    """The measuring half of a Bench (core.Bench): rows, floors, notes and problems, and the
    report of them."""

    def measure(self, label, commands, kind="seconds", bar=None, before=None, after=None, rounds=None):
        """Runs commands['plain'] and commands['albumfs'] alternately, `rounds` times.
        before(side)/after(side, output) run untimed around each. kind 'seconds'
        times the command; kind 'iops' takes the command's 3rd output field.
        commands['floor'], if there, runs on the plain tree between the two (its
        hooks get side 'plain'); its times go to self.floors[label]. commands['peer'],
        if there, runs on the peer's mount (passthrough_ll, peer.py) before albumfs's
        (its hooks get side 'peer'); its times go to self.peers[label]."""
        values = {side: [] for side in commands}
        for r in range(rounds or self.rounds):
            with self.watchdog.phase(f"{label}, round {r + 1}", 4 * self.timeout):
                for side in [side for side in ("plain", "floor", "peer", "albumfs") if side in commands]:
                    tree = "plain" if side == "floor" else side
                    self.check_side(tree)
                    if before:
                        before(tree)
                    self.check_side(tree)
                    seconds, out = self.sh(commands[side], capture=True)
                    values[side].append(float(out.split()[2]) if kind == "iops" else seconds)
                    if after:
                        after(tree, out)
            digits = 0 if kind == "iops" else 3
            floor = f", floor {values['floor'][-1]:.3f}" if "floor" in values else ""
            floor += f", passthrough_ll {values['peer'][-1]:.3f}" if "peer" in values else ""
            log(f"  {label} round {r + 1}: plain {values['plain'][-1]:.{digits}f}{floor}, "
                f"albumfs {values['albumfs'][-1]:.{digits}f}")
        self.rows.append((label, values["plain"], values["albumfs"], kind, bar))
        if "floor" in values:
            self.floors.setdefault(label, []).extend(values["floor"])
        if "peer" in values:
            self.peers.setdefault(label, []).extend(values["peer"])
        return values

    def measure_round_into(self, label, commands, bar, before=None, after=None):
        """One round of `measure`, accumulated into the row named `label`."""
        existing = next((row for row in self.rows if row[0] == label), None)
        values = self.measure(label, commands, bar=bar, before=before, after=after, rounds=1)
        if existing:
            self.rows.pop()
            existing[1].extend(values["plain"])
            existing[2].extend(values["albumfs"])

    def report(self, scale_only):
        mode = "quick" if self.quick else "full"
        print()
        print(f"albumfs bench ({mode}, {self.rounds} round{'s' if self.rounds != 1 else ''}, interleaved "
              f"plain/albumfs; {self.work} on the same disk; {os.cpu_count()} CPUs; {self.elapsed:.0f} s)")
        print(f"binary: {self.built} ({self.version}), copied to {self.binary} for the run")
        if not scale_only:
            self.print_table(self.rows)
            if self.rss_line:
                print(self.rss_line)
        if self.scale_lines:
            print()
            print("scale:")
            for line in self.scale_lines:
                print("  " + line)
            self.print_table(self.scale_rows)
        for note in self.notes:
            print("note: " + note)
        if self.problems:
            print()
            for problem in self.problems:
                print("PROBLEM: " + problem)

    def print_table(self, rows):
        width = max(len(row[0]) for row in rows) if rows else 20
        print()
        print(f"{'workload':<{width}}  {'plain':>9}  {'albumfs':>9}  {'ratio':>6}  {'bar':>6}  rounds plain | albumfs")
        for label, plain, albumfs, kind, bar in rows:
            p, a = median(plain), median(albumfs)
            ratio = a / p if p else float("nan")
            # seconds; iops (IOPS), mibps (MiB/s) and mib (MiB) print without a unit (the label says it)
            unit = "s" if kind == "seconds" else ""
            digits = {"iops": 0, "mibps": 1, "mib": 1}.get(kind, 3)
            rounds = " ".join(f"{v:.{digits}f}" for v in plain) + " | " + " ".join(f"{v:.{digits}f}" for v in albumfs)
            print(f"{label:<{width}}  {p:>8.{digits}f}{unit or ' '}  {a:>8.{digits}f}{unit or ' '}  "
                  f"{ratio:>6.2f}  {bar or '':>6}  {rounds}")
        print("(medians; ratio = albumfs/plain — for IOPS, albumfs IOPS / plain IOPS"
              + ("; W8: plain is the column the row names (a peer: rclone, curl, a bound)" if any(
                  row[0].startswith("W8") for row in rows) else "") + ")")
        for label, plain, albumfs, _, _ in rows:
            if label in self.floors:
                floor = self.floors[label]
                print(f"floor of \"{label}\": the same cp --reflink=never into the plain dir (read/write, as cp "
                      f"copies into any FUSE mount) {median(floor):.3f} s = {median(floor) / median(plain):.2f} × plain; "
                      f"albumfs {median(albumfs) / median(floor):.2f} × floor; rounds "
                      + " ".join(f"{v:.3f}" for v in floor))
        for label, plain, albumfs, _, _ in rows:
            if label in self.peers:
                peer = self.peers[label]
                print(f"passthrough_ll (libfuse 3.14) for \"{label}\": {median(peer):.3f} s = "
                      f"{median(peer) / median(plain):.2f} × plain; albumfs {median(albumfs) / median(peer):.2f} × "
                      f"passthrough_ll; rounds " + " ".join(f"{v:.3f}" for v in peer))

    def results(self, scale_only):
        """The run's results, for --json: what the table says, every round's value, and the notes."""
        def rows(table):
            out = []
            for label, plain, albumfs, kind, bar in table:
                p, a = median(plain), median(albumfs)
                row = {"label": label, "kind": kind, "bar": bar, "plain": plain, "albumfs": albumfs,
                       "plain_median": finite(p), "albumfs_median": finite(a), "ratio": finite(a / p) if p else None}
                if label in self.floors:
                    row["floor"] = self.floors[label]
                if label in self.peers:
                    row["peer"] = self.peers[label]
                out.append(row)
            return out
        return {"mode": "quick" if self.quick else "full", "rounds": self.rounds, "work": self.work,
                "cpus": os.cpu_count(), "seconds": self.elapsed, "binary": self.built,
                "version": self.version, "data_path": self.args.data_path,
                "rows": [] if scale_only else rows(self.rows),
                "peak_rss": None if scale_only else self.rss_line,
                "scale": {"lines": self.scale_lines, "rows": rows(self.scale_rows)},
                "notes": self.notes, "problems": self.problems}

    def write_json(self, path, scale_only):
        try:
            with open(path, "w") as f:
                json.dump(self.results(scale_only), f, indent=1, allow_nan=False, default=str)
                f.write("\n")
        except OSError as error:
            raise BenchError(f"--json: cannot write {path}: {error}")
        log(f"results written to {path}")
