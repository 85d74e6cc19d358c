"""albumfs against a plain directory on the same disk. Run through scripts/bench
(`python3 -m bench` with scripts/lib on PYTHONPATH), which builds the release
binary and passes it in $ALBUMFS_BIN.

Each workload runs the same shell command on a plain tree and on an albumfs
mount of the same shape, interleaved (plain, albumfs, plain, albumfs, ...),
for --rounds rounds; the table gives the medians and the ratio albumfs/plain
(for W5: albumfs IOPS / plain IOPS). Cold runs follow
`sync; echo 3 > /proc/sys/vm/drop_caches`; warm runs follow one untimed run of
the same command.

Layout of the work dir ($ALBUMFS_BENCH_DIR, default /var/tmp/albumfs-bench):
  src/photos/IMG_0000.JPG ...  the photos to import (1 MiB random bytes each)
  src/big.MOV                  the big file (2 GiB random bytes)
  plain/Albums/Big/            the big album (4 KiB random files)
  plain/Albums/Import/         W1's copy of src/photos
  plain/Camera Roll/           hard links of everything in plain/Albums, and big.MOV
  store/, mnt/                 the albumfs store and its mount, same tree
  out-plain/, out-albumfs/     W4's rsync targets

The package:
  harness.py      logging, the shell-command runner, the watchdog, the bench's Mount
                  (albumfs_mount's supervisor, shared with the integration tests)
  privilege.py    --as-user: the child that runs the bench as that user, root's cache dropper
  measure.py      interleaved rounds, the table, the JSON results (--json)
  core.py         the Bench: settings, the work dir and its data, the run, the clean-up
  w1_import.py … w7_views.py, scale.py   one workload each: run(bench)
  w8_remote.py    W8 (--remote, opt-in): albumfs with a remote against rclone mount and curl on a
                  radosgw it starts; each row's plain column is the peer its label names
  cli.py          the command line
"""
