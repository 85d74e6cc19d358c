// FUSE passthrough (kernel 6.9+, protocol 7.40) and FUSE_HANDLE_KILLPRIV_V2
// (5.11+, 7.33) on libfuse 3.14.
//
// With passthrough the kernel serves read, write and mmap of an open file
// straight from a "backing" file the daemon names, instead of sending each
// READ and WRITE through /dev/fuse. libfuse learned it in 3.16; Debian 12 has
// 3.14 and the 6.1 uapi headers, so the few ABI pieces needed are spelled out
// here from the kernel's include/uapi/linux/fuse.h, and the two replies that
// carry a backing id are built here: libfuse's fill_open with the id added,
// and for create libfuse's own fill_entry in front of it.
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>
#include <linux/fuse.h>

// libfuse 3.17 negotiates passthrough itself (FUSE_CAP_PASSTHROUGH,
// fuse_passthrough_open, fuse_file_info.backing_id). Patching its INIT reply
// here as well would ask twice and fight its own replies.
#if FUSE_VERSION >= FUSE_MAKE_VERSION(3, 17)
#error "libfuse >= 3.17 has its own passthrough API: switch Passthrough.swift and DeviceChannel.swift to it (fuse_passthrough_open, FUSE_CAP_PASSTHROUGH) and drop the hand-built ABI in kernel_features.h"
#endif

// FUSE_PASSTHROUGH is bit 37 of the 64-bit INIT flags: bit 5 of flags2.
#define ALBUMFS_FUSE_PASSTHROUGH_FLAGS2 (1u << 5)
// FUSE_DIRECT_IO_ALLOW_MMAP (7.39, Linux 6.6; bit 36: bit 4 of flags2):
// shared mmap of a FOPEN_DIRECT_IO handle works, through the page cache,
// and the kernel keeps that cache coherent with the handle's direct writes.
#define ALBUMFS_FUSE_DIRECT_IO_ALLOW_MMAP_FLAGS2 (1u << 4)
#define ALBUMFS_FOPEN_PASSTHROUGH (1u << 7)
// A backing file of ours sits on a plain file system (depth 0), so the FUSE
// mount is one level above it.
#define ALBUMFS_PASSTHROUGH_STACK_DEPTH 1u

struct albumfs_fuse_backing_map {
    int32_t fd;
    uint32_t flags;
    uint64_t padding;
};

// Where the 7.40 fields go, written by offset: the 6.1 header (7.38) names
// them unused[0] and padding, a 6.9+ header max_stack_depth and backing_id.
// Checked against whichever header this is built with, so that a header
// that moves or renames them fails the build instead of silently no longer
// asking for passthrough.
#define ALBUMFS_INIT_OUT_MAX_STACK_DEPTH_OFFSET 36
#define ALBUMFS_OPEN_OUT_BACKING_ID_OFFSET 12
_Static_assert(sizeof(struct fuse_init_out) == 64, "fuse_init_out is not the 64 bytes libfuse 3.14 sends");
_Static_assert(offsetof(struct fuse_init_out, flags) == 12, "fuse_init_out.flags moved");
_Static_assert(offsetof(struct fuse_init_out, flags2) == 32, "fuse_init_out.flags2 moved");
_Static_assert(sizeof(struct fuse_open_out) == 16, "fuse_open_out is not 16 bytes");
_Static_assert(offsetof(struct fuse_open_out, open_flags) == 8, "fuse_open_out.open_flags moved");
_Static_assert(sizeof(struct albumfs_fuse_backing_map) == 16, "fuse_backing_map is 16 bytes");
#if FUSE_KERNEL_MINOR_VERSION >= 40
_Static_assert(offsetof(struct fuse_init_out, max_stack_depth) == ALBUMFS_INIT_OUT_MAX_STACK_DEPTH_OFFSET, "max_stack_depth moved");
_Static_assert(offsetof(struct fuse_open_out, backing_id) == ALBUMFS_OPEN_OUT_BACKING_ID_OFFSET, "backing_id moved");
_Static_assert(sizeof(struct fuse_backing_map) == sizeof(struct albumfs_fuse_backing_map), "fuse_backing_map changed");
_Static_assert(FUSE_DEV_IOC_BACKING_OPEN == _IOW(229, 1, struct albumfs_fuse_backing_map), "FUSE_DEV_IOC_BACKING_OPEN changed");
_Static_assert(FUSE_DEV_IOC_BACKING_CLOSE == _IOW(229, 2, uint32_t), "FUSE_DEV_IOC_BACKING_CLOSE changed");
_Static_assert(FUSE_PASSTHROUGH == (1ULL << 37), "FUSE_PASSTHROUGH changed");
_Static_assert(FUSE_DIRECT_IO_ALLOW_MMAP == (1ULL << 36), "FUSE_DIRECT_IO_ALLOW_MMAP changed");
_Static_assert(FOPEN_PASSTHROUGH == (1u << 7), "FOPEN_PASSTHROUGH changed");
#else
_Static_assert(offsetof(struct fuse_init_out, unused) == ALBUMFS_INIT_OUT_MAX_STACK_DEPTH_OFFSET, "unused[0] moved");
_Static_assert(offsetof(struct fuse_open_out, padding) == ALBUMFS_OPEN_OUT_BACKING_ID_OFFSET, "padding moved");
#endif

/// Registers `fd`'s file as a backing file; returns its id, or -1 with errno.
static inline int albumfs_backing_open(int device, int fd) {
    struct albumfs_fuse_backing_map map = { .fd = fd, .flags = 0, .padding = 0 };
    return ioctl(device, _IOW(229, 1, struct albumfs_fuse_backing_map), &map);
}

static inline int albumfs_backing_close(int device, int backing_id) {
    uint32_t id = (uint32_t) backing_id;
    return ioctl(device, _IOW(229, 2, uint32_t), &id);
}

/// If `request` is INIT, stores the kernel's 64-bit INIT flags in `flags`
/// and returns its unique id; else returns 0.
static inline uint64_t albumfs_init_request(const void *request, size_t length, uint64_t *flags) {
    const struct fuse_in_header *header = request;
    if (length < sizeof(*header) + sizeof(struct fuse_init_in) || header->opcode != FUSE_INIT) return 0;
    const struct fuse_init_in *init = (const void *) (header + 1);
    *flags = init->flags;
    if (init->flags & FUSE_INIT_EXT) *flags |= (uint64_t) init->flags2 << 32;
    return header->unique;
}

/// The unique id a reply answers (0 for a notification or a short buffer).
static inline uint64_t albumfs_reply_unique(const struct iovec *iov, int count) {
    if (count < 1 || iov[0].iov_len < sizeof(struct fuse_out_header)) return 0;
    return ((const struct fuse_out_header *) iov[0].iov_base)->unique;
}

#define ALBUMFS_ASKED_PASSTHROUGH 1
#define ALBUMFS_ASKED_KILLPRIV_V2 2
#define ALBUMFS_ASKED_DIRECT_IO_ALLOW_MMAP 4

/// Rewrites libfuse's INIT reply in `reply` (a copy of iov[1]) to ask for
/// what the kernel `offered` of FUSE_HANDLE_KILLPRIV_V2 and, if
/// `want_passthrough`, FUSE_PASSTHROUGH, and FUSE_DIRECT_IO_ALLOW_MMAP.
/// Returns what it asked for.
static inline int albumfs_init_reply_patch(void *reply, size_t length, uint64_t offered, int want_passthrough) {
    // libfuse 3.14 sends the full 64-byte fuse_init_out; max_stack_depth is
    // the first word after flags2 (see the offsets above).
    if (length < sizeof(struct fuse_init_out)) return 0;
    struct fuse_init_out *out = reply;
    int asked = 0;
    if (offered & FUSE_HANDLE_KILLPRIV_V2) {
        // Lets the kernel mark an inode "no suid bits, no security.capability"
        // (S_NOSEC) after one check, instead of a GETXATTR round trip per write.
        out->flags |= FUSE_HANDLE_KILLPRIV_V2;
        asked |= ALBUMFS_ASKED_KILLPRIV_V2;
    }
    if (want_passthrough && (offered >> 32) & ALBUMFS_FUSE_PASSTHROUGH_FLAGS2 &&
        (out->flags & FUSE_INIT_EXT) && !(out->flags & FUSE_WRITEBACK_CACHE)) {
        out->flags2 |= ALBUMFS_FUSE_PASSTHROUGH_FLAGS2;
        uint32_t depth = ALBUMFS_PASSTHROUGH_STACK_DEPTH;
        memcpy((char *) out + ALBUMFS_INIT_OUT_MAX_STACK_DEPTH_OFFSET, &depth, sizeof(depth));
        asked |= ALBUMFS_ASKED_PASSTHROUGH;
    }
    if ((offered >> 32) & ALBUMFS_FUSE_DIRECT_IO_ALLOW_MMAP_FLAGS2 && (out->flags & FUSE_INIT_EXT)) {
        out->flags2 |= ALBUMFS_FUSE_DIRECT_IO_ALLOW_MMAP_FLAGS2;
        asked |= ALBUMFS_ASKED_DIRECT_IO_ALLOW_MMAP;
    }
    return asked;
}

// FUSE_OVER_IO_URING (7.42, Linux 6.14, when the fuse module's enable_uring
// is on): bit 41 of the INIT flags, bit 9 of flags2. See FuseRing.
#define ALBUMFS_FUSE_OVER_IO_URING_FLAGS2 (1u << 9)
_Static_assert(offsetof(struct fuse_init_out, max_write) == 20, "fuse_init_out.max_write moved");
_Static_assert(offsetof(struct fuse_init_out, max_pages) == 28, "fuse_init_out.max_pages moved");

/// The bytes a ring entry's payload buffer needs for the connection libfuse's
/// INIT reply sets up (the kernel refuses a smaller one), or 0 when the
/// kernel did not offer FUSE over io_uring.
static inline size_t albumfs_init_reply_ring_payload(const void *reply, size_t length, uint64_t offered) {
    if (length < sizeof(struct fuse_init_out) || !((offered >> 32) & ALBUMFS_FUSE_OVER_IO_URING_FLAGS2)) return 0;
    const struct fuse_init_out *out = reply;
    if (!(out->flags & FUSE_INIT_EXT)) return 0;
    size_t payload = out->max_write > 8192 ? out->max_write : 8192;
    size_t pages = (out->flags & FUSE_MAX_PAGES) ? (size_t) out->max_pages * (size_t) sysconf(_SC_PAGESIZE) : 0;
    return pages > payload ? pages : payload;
}

static inline void albumfs_init_reply_ask_ring(void *reply) {
    ((struct fuse_init_out *) reply)->flags2 |= ALBUMFS_FUSE_OVER_IO_URING_FLAGS2;
}

static inline void albumfs_fill_open_out(struct fuse_open_out *out, const struct fuse_file_info *fi, int backing_id) {
    memset(out, 0, sizeof(*out));
    out->fh = fi->fh;
    // The kernel fails the open (EIO) if a passthrough reply carries any
    // flag outside FOPEN_PASSTHROUGH_MASK: keep_cache, for one, has no page
    // cache of ours to keep.
    if (fi->direct_io) out->open_flags |= FOPEN_DIRECT_IO;
    if (fi->noflush) out->open_flags |= FOPEN_NOFLUSH;
    out->open_flags |= ALBUMFS_FOPEN_PASSTHROUGH;
    uint32_t id = (uint32_t) backing_id;
    memcpy((char *) out + ALBUMFS_OPEN_OUT_BACKING_ID_OFFSET, &id, sizeof(id));
}

/// fuse_reply_open, with the handle served from backing file `backing_id`.
static inline int albumfs_reply_open_backed(fuse_req_t req, const struct fuse_file_info *fi, int backing_id) {
    struct fuse_open_out out;
    albumfs_fill_open_out(&out, fi, backing_id);
    struct iovec iov = { .iov_base = &out, .iov_len = sizeof(out) };
    return fuse_reply_iov(req, &iov, 1);
}

/// fuse_reply_create, with the handle served from backing file `backing_id`.
static inline int albumfs_reply_create_backed(fuse_req_t req, const struct fuse_entry_param *e,
                                              const struct fuse_file_info *fi, int backing_id) {
    // libfuse's own fill_entry (timeouts, attributes) is reachable through
    // fuse_add_direntry_plus: its record starts with the fuse_entry_out.
    struct fuse_direntplus record;
    fuse_add_direntry_plus(req, (char *) &record, sizeof(record), "", e, 0);
    struct {
        struct fuse_entry_out entry;
        struct fuse_open_out open;
    } __attribute__((packed)) out;
    out.entry = record.entry_out;
    albumfs_fill_open_out(&out.open, fi, backing_id);
    struct iovec iov = { .iov_base = &out, .iov_len = sizeof(out) };
    return fuse_reply_iov(req, &iov, 1);
}
