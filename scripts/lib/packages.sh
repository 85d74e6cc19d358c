# Debian packages albumfs needs to build, mount and test, and how to get them.
# Sourced by scripts/run and scripts/test.

ALBUMFS_PACKAGES=(libfuse3-dev liburing-dev fuse3 libsqlite3-dev libsystemd-dev libmagic-dev libexif-dev libheif-dev libturbojpeg0-dev libpng-dev libssl-dev libcurl4-openssl-dev libzstd-dev pkg-config rsync attr psmisc util-linux)
# For the tests: the media tools that make the test photos and videos (ImageMagick, exiftool, heif-enc, ffmpeg/ffprobe); GIO's gio tool and GVfs's trash backend (the trash), vim (side files), samba and smbclient (the share), man-db and systemd (the installed man page and units), Nautilus under Xvfb (xdpyinfo from x11-utils: the thumbnails).
# For the tests of originals kept in S3 (scripts/lib/radosgw, Tests/integration/objectstore.py): a
# one-node Ceph (monitor, OSD, RADOS Gateway, the ceph and radosgw-admin CLIs) as a real S3 server on
# loopback, and s3cmd as an independent S3 client. Installed without recommends, which would add
# ceph-mgr, ceph-mds, ceph-fuse and some 45 more packages that nothing starts.
ALBUMFS_OBJECT_STORE_PACKAGES=(ceph-mon ceph-osd ceph-common radosgw s3cmd)
# For the bench's W8 only (scripts/bench --remote, or --only W8), never the tests: the object store
# above, and rclone (`rclone mount --vfs-cache-mode full`, `rclone copy`), the peer W8 measures
# albumfs against on the same radosgw.
ALBUMFS_BENCH_REMOTE_PACKAGES=(rclone curl "${ALBUMFS_OBJECT_STORE_PACKAGES[@]}")
ALBUMFS_TEST_PACKAGES=(imagemagick libimage-exiftool-perl libheif-examples ffmpeg libglib2.0-bin gvfs gvfs-daemons dbus vim samba smbclient man-db systemd nautilus xvfb x11-utils "${ALBUMFS_OBJECT_STORE_PACKAGES[@]}")

# Installs whatever is missing when root; otherwise prints the one command to run.
# ensure_packages [EXTRA…]: ALBUMFS_PACKAGES and the extra ones.
ensure_packages() {
    local missing=()
    for package in "${ALBUMFS_PACKAGES[@]}" "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
    done
    ((${#missing[@]} == 0)) && return 0
    if [[ $(id -u) -ne 0 ]]; then
        echo "albumfs needs: ${missing[*]}" >&2
        echo "run: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
        return 1
    fi
    echo "installing ${missing[*]}" >&2
    apt-get update -qq
    local lean=() rest=()
    for package in "${missing[@]}"; do
        if [[ " ${ALBUMFS_OBJECT_STORE_PACKAGES[*]} " == *" $package "* ]]; then lean+=("$package"); else rest+=("$package"); fi
    done
    ((${#rest[@]} == 0)) || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${rest[@]}" >/dev/null
    ((${#lean[@]} == 0)) || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${lean[@]}" >/dev/null
}

ensure_swift() {
    if ! command -v swift >/dev/null 2>&1; then
        [[ -x /opt/swift/usr/bin/swift ]] && export PATH="/opt/swift/usr/bin:$PATH"
    fi
    command -v swift >/dev/null 2>&1 || { echo "swift is not installed (expected at /opt/swift)" >&2; return 1; }
}
