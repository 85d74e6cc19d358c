// FUSE over io_uring (Linux 6.14+) for a libfuse 3.14 session.
//
// With FUSE_OVER_IO_URING negotiated in INIT, the kernel hands requests to
// entries the daemon registered on per-CPU queues (one queue per possible
// CPU; a request goes to the queue of the CPU its caller runs on) and takes
// each reply in the same io_uring call that fetches the entry's next
// request, instead of a read() and a writev() on /dev/fuse with a thread
// switch on either side. FORGET, INTERRUPT and notifications still go
// through /dev/fuse, so libfuse's own loop keeps running beside the ring.
//
// libfuse 3.14 predates the ring: each entry's request is laid out as
// libfuse reads one from /dev/fuse (header, operation header, payload, in
// one buffer, with no copy of the payload) and handed to
// fuse_session_process_buf; its reply comes back through the session's
// writev hook, where albumfs_ring_reply takes it into the entry.
//
// Each entry is served by a thread of its own, with an io_uring of its own
// (IORING_SETUP_DEFER_TASKRUN: the kernel copies a request into the
// entry only when that thread asks for its next one, so a handler's
// buffers stay its own until it returns, as with /dev/fuse). A handler
// that waits therefore holds one entry, never a whole queue.
#ifndef ALBUMFS_FUSE_RING_H
#define ALBUMFS_FUSE_RING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

typedef struct albumfs_ring albumfs_ring;

/// The number of queues the kernel makes: one per possible CPU.
unsigned albumfs_ring_queue_count(void);

/// Prepares `per_queue` entries on each queue, each with a thread, an
/// io_uring and a request buffer of `payload` bytes (at least the
/// connection's max_write and max_pages pages). Nothing is registered with
/// the kernel yet. NULL with errno when any of it cannot be made; nothing
/// is left behind then.
albumfs_ring *albumfs_ring_create(void *session, int device, unsigned per_queue, size_t payload);

/// After the INIT reply that asked for FUSE_OVER_IO_URING reached the
/// kernel: every entry registers and serves.
void albumfs_ring_start(albumfs_ring *ring);

/// If the reply in `iov` answers a request the ring serves, hands it to
/// the kernel through the ring and returns its length; else returns -1 and
/// does nothing (the caller writes it to /dev/fuse).
ssize_t albumfs_ring_reply(albumfs_ring *ring, const struct iovec *iov, int count);

/// Where the reply to the request the calling thread serves can be built
/// with no copy (its entry's payload buffer, `size` bytes), or NULL when
/// the thread serves none. The request's own payload is there too: only
/// for a request that has none (READ).
void *albumfs_ring_reply_buffer(size_t *size);

/// The first error (an errno) with which the kernel ended one of the
/// ring's entries before the connection ended; 0: none.
int albumfs_ring_entry_error(const albumfs_ring *ring);

/// Requests served through the ring so far.
uint64_t albumfs_ring_served(const albumfs_ring *ring);

/// Ends every entry's thread (each finishes the request it serves, whose
/// reply must still reach `albumfs_ring_reply`). Call after the session's
/// loop has ended, before fuse_session_destroy; then `albumfs_ring_free`.
void albumfs_ring_stop(albumfs_ring *ring);

/// Frees a stopped ring.
void albumfs_ring_free(albumfs_ring *ring);

#endif
