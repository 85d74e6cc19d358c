"""The correctness checks of `scripts/bench --quick` (its `bench.problem(...)` calls in
scripts/lib/bench/) as tests, at a small size. Only the checks no other test makes are here;
the others are already tests elsewhere:

- W1, the copies come back byte-identical: test_rsync_cp.py::test_cp_r_into_album_creates_nested_albums,
  test_roll_and_albums.py::test_cp_into_roll_creates_one_asset, test_large_file.py.
- W1, Albums/Import empty after its photos were deleted from the roll:
  test_roll_and_albums.py::test_rm_roll_entry_deletes_everywhere_and_frees_content,
  test_visibility.py::test_names_a_purge_or_a_delete_changes_elsewhere_are_gone_when_it_returns.
- W4, the rsync copy out of an album is the photos: test_rsync_cp.py::test_rsync_out_of_album_reproduces_source.
- W6, a restored photo is back in its albums:
  test_recently_deleted.py::test_rm_moves_to_recently_deleted_and_mv_restores_with_albums.
- W6, Recently Deleted after Empty Trash: test_kernel_cache.py::test_empty_trash_sends_no_lookup_per_item,
  test_concurrency.py::test_empty_trash_restores_deletes_and_listings_at_once.
- W7, By Date holds files without a capture date once read: test_attributes_xattr.py::test_hard_link_view.
- fsck of the store after a workload: test_persistence_fsck.py::test_fsck_clean_after_workload.
"""

from __future__ import annotations

import os

from albumfs_testlib import ALBUMFS, REPO_ROOT, fsck, ino, names, nlink, payload, run, write

# Several READDIRPLUS pages (the kernel asks for about 25 entries a page), in seconds.
ALBUM = 400
PHOTOS = 20


def find_files(directory) -> int:
    """`find DIR -type f | wc -l`, as the bench counts: regular files by readdir's d_type."""
    out = run(["find", directory, "-type", "f"], text=True).stdout
    return len(out.splitlines())


def test_an_album_made_file_by_file_is_listed_whole_in_the_album_and_the_roll(mount, tmp_path):
    """The bench's big album and W3 (SEMANTICS.md § What each operation does: a create in
    `Albums/A` is one transaction, a new asset, its roll entry and its entry in A; § Assets and
    entries: the roll holds exactly one entry per live asset). ALBUM files created one by one
    with O_CREAT|O_EXCL in Albums/Big, PHOTOS copied in with `cp -r` to Albums/Import and one file
    into the roll: the album lists ALBUM entries and the roll ALBUM + PHOTOS + 1, by listdir and by
    `find -type f`, the second time (from the kernel's caches) as the first."""
    big = mount.albums / "Big"
    big.mkdir()
    made = []
    for i in range(ALBUM):
        name = f"P{i:06d}.jpg"
        fd = os.open(big / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, payload(4096, name))
        finally:
            os.close(fd)
        made.append(name)
    src = tmp_path / "photos"
    src.mkdir()
    for i in range(PHOTOS):
        write(src / f"IMG_{i:04d}.JPG", payload(8192, i))
    run(["cp", "-r", src, mount.albums / "Import"])
    write(mount.roll / "big.MOV", payload(100_000, "big"))

    roll_size = ALBUM + PHOTOS + 1
    for listing in ("first", "warm"):
        assert names(big) == made, f"{listing} listing of Albums/Big"
        assert len(names(mount.roll)) == roll_size, f"{listing} listing of the roll"
        assert find_files(big) == ALBUM, f"{listing} find in Albums/Big"
        assert find_files(mount.roll) == roll_size, f"{listing} find in the roll"
    assert len(names(mount.albums / "Import")) == PHOTOS
    assert set(made) <= set(names(mount.roll))
    assert ino(big / made[-1]) == ino(mount.roll / made[-1]) and nlink(big / made[-1]) == 2


def test_a_no_change_rsync_out_of_an_album_itemizes_nothing(mount, tmp_path):
    """W4 (SEMANTICS.md § Attributes: `rsync -a` round-trips mode and times, so that a second run
    transfers nothing): photos copied into an album with `cp -r`, the album backed up with
    `rsync -a` to a plain directory from a fresh kernel cache (a remount, as the bench drops the
    caches), and again: a third run with `-n -i` lists no change at all, neither a file's nor a
    directory's (data, size, mode, times, owner)."""
    src = tmp_path / "photos"
    src.mkdir()
    for i in range(100):
        write(src / f"IMG_{i:04d}.JPG", payload(16_384 + i, f"w4-{i}"))
    album = mount.albums / "Import"
    run(["cp", "-r", src, album])
    mount.remount()
    out = tmp_path / "out"
    for _ in range(2):
        run(["rsync", "-a", f"{album}/", f"{out}/"])
    changes = run(["rsync", "-a", "-n", "-i", f"{album}/", f"{out}/"], text=True).stdout
    assert changes.strip() == "", f"{len(changes.splitlines())} changes after two runs:\n{changes[:2000]}"
    assert len(os.listdir(out)) == 100


def test_a_generated_store_is_consistent_and_lists_its_album_whole(mount_factory):
    """The bench's scale test (SEMANTICS.md § Durability and safety: fsck; § Assets and entries):
    a store of 2,000 assets with an album of 300 made by `scripts/make-store` (albumfs's hidden
    make-store command) passes fsck ("consistent"); mounted, its album lists the 300 first roll
    names, each the roll's asset, and the roll lists 2,000."""
    assets, album_size = 2_000, 300
    m = mount_factory("scale", start=False)   # an empty store, made with `albumfs init`
    run([REPO_ROOT / "scripts" / "make-store", m.store, "--assets", str(assets), "--album-size", str(album_size)],
        env={**os.environ, "ALBUMFS_BIN": os.fspath(ALBUMFS)})
    p = fsck(m.store)
    assert p.returncode == 0 and "consistent" in p.stdout, f"fsck: exit {p.returncode}\n{p.stdout}{p.stderr}"
    m.start()
    big = m.albums / "Big"
    listed = names(big)
    assert listed == [f"IMG_{i:07d}.JPG" for i in range(album_size)]
    assert len(run(["ls", big], text=True).stdout.splitlines()) == album_size
    assert len(names(m.roll)) == assets
    for name in (listed[0], listed[-1]):
        assert ino(big / name) == ino(m.roll / name) and nlink(m.roll / name) == 2
