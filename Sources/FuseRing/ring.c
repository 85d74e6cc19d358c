// FUSE over io_uring for a libfuse 3.14 session: see include/FuseRing.h.
#define _GNU_SOURCE
#define FUSE_USE_VERSION 312
#include "FuseRing.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

// The ring's ABI (protocol 7.42, include/uapi/linux/fuse.h), which Debian
// 12's 6.1 headers predate.
struct ring_ent_in_out {
    uint64_t flags;
    uint64_t commit_id;   // the request's unique: echoed in the commit
    uint32_t payload_sz;  // payload bytes, either way
    uint32_t padding;
    uint64_t reserved;
};
struct ring_req_header {
    char in_out[128];     // fuse_in_header on fetch, fuse_out_header on commit
    char op_in[128];      // the operation's own header (its first argument)
    struct ring_ent_in_out ent;
};
struct ring_cmd_req {     // in the SQE128's command area
    uint64_t flags;
    uint64_t commit_id;
    uint16_t qid;
    uint8_t padding[6];
};
enum { CMD_REGISTER = 1, CMD_COMMIT_AND_FETCH = 2 };
_Static_assert(sizeof(struct ring_ent_in_out) == 32, "fuse_uring_ent_in_out is 32 bytes");
_Static_assert(sizeof(struct ring_cmd_req) == 24, "fuse_uring_cmd_req is 24 bytes");

// Room before the payload for the request's headers, so that libfuse sees
// header, operation header and payload in one buffer.
#define SLACK 256
#define STOP_DATA UINT64_MAX

struct entry {
    struct albumfs_ring *ring;
    unsigned qid;
    pthread_t thread;
    int started;
    struct io_uring uring;
    int has_uring;
    struct ring_req_header header;
    char *buffer;            // SLACK bytes, then the payload
    struct iovec iov[2];
    pthread_mutex_t lock;
    pthread_cond_t replied_cond;
    _Atomic uint64_t unique; // the request being served, 0: none
    int replied;             // its reply is in the entry (under lock)
    int committed;           // and was handed to the kernel
};

struct albumfs_ring {
    struct fuse_session *session;
    int device;
    int stop_event;
    size_t payload;
    unsigned count;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned prepared, failed;
    int error;               // why a thread could not prepare
    int go;                  // 0: wait, 1: register and serve, -1: give up
    _Atomic uint64_t served;
    _Atomic int entry_error; // the first error that ended an entry early (0: none)
    struct entry entries[];
};

static __thread struct entry *serving;

unsigned albumfs_ring_queue_count(void) {
    // The kernel makes num_possible_cpus() queues: "0-1", "0", "0-3,5"...
    FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
    unsigned highest = 0;
    if (f) {
        char text[256];
        if (fgets(text, sizeof text, f)) {
            for (char *p = text; *p; p++) {
                if (*p >= '0' && *p <= '9') {
                    unsigned n = (unsigned) strtoul(p, &p, 10);
                    if (n > highest) highest = n;
                    p--;
                }
            }
        }
        fclose(f);
    } else {
        long n = sysconf(_SC_NPROCESSORS_CONF);
        highest = n > 0 ? (unsigned) n - 1 : 0;
    }
    return highest + 1;
}

static void prepare_command(struct entry *e, int command) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&e->uring);
    // An SQE128 is two io_uring_sqe long; an entry has one command in flight at most.
    memset(sqe, 0, 2 * sizeof(*sqe));
    sqe->opcode = IORING_OP_URING_CMD;
    // /dev/fuse as the ring's own registered file: libfuse closes its
    // descriptor at unmount, while an entry may still commit a reply.
    sqe->fd = 0;
    sqe->flags = IOSQE_FIXED_FILE;
    sqe->cmd_op = (uint32_t) command;
    io_uring_sqe_set_data64(sqe, (uint64_t) command);
    struct ring_cmd_req *request = (struct ring_cmd_req *) sqe->cmd;
    request->qid = (uint16_t) e->qid;
    if (command == CMD_REGISTER) {
        sqe->addr = (uint64_t) (uintptr_t) e->iov;
        sqe->len = 2;
    } else {
        request->commit_id = e->header.ent.commit_id;
    }
}

/// Queues the entry's reply and the fetch of its next request; the thread's
/// next wait submits them in the same call (io_uring_submit_and_wait).
static void commit(struct entry *e) {
    prepare_command(e, CMD_COMMIT_AND_FETCH);
}

/// Lays the request out as libfuse reads one from /dev/fuse and serves it.
static void serve_request(struct entry *e) {
    struct fuse_in_header in;
    memcpy(&in, e->header.in_out, sizeof in);
    uint32_t payload = e->header.ent.payload_sz;
    // The operation's header is what the length leaves after the two others.
    size_t operation = in.len >= sizeof in + payload ? in.len - sizeof in - payload : SIZE_MAX;
    pthread_mutex_lock(&e->lock);
    atomic_store(&e->unique, in.unique);
    e->replied = e->committed = 0;
    pthread_mutex_unlock(&e->lock);
    if (operation > sizeof e->header.op_in || payload > e->ring->payload) {
        struct fuse_out_header out = { .len = sizeof out, .error = -EIO, .unique = in.unique };
        struct iovec iov = { .iov_base = &out, .iov_len = sizeof out };
        serving = e;
        albumfs_ring_reply(e->ring, &iov, 1);
    } else {
        char *payload_start = e->buffer + SLACK;
        char *start = payload_start - operation - sizeof in;
        memcpy(start, &in, sizeof in);
        memcpy(start + sizeof in, e->header.op_in, operation);
        struct fuse_buf buf = { .size = in.len, .flags = 0, .mem = start };
        serving = e;
        fuse_session_process_buf(e->ring->session, &buf);
    }
    serving = NULL;
    // A reply may come from another thread: wait for it, then commit here
    // (the ring is this thread's alone: IORING_SETUP_SINGLE_ISSUER).
    pthread_mutex_lock(&e->lock);
    while (!e->replied) pthread_cond_wait(&e->replied_cond, &e->lock);
    int committed = e->committed;
    atomic_store(&e->unique, 0);
    pthread_mutex_unlock(&e->lock);
    if (!committed) commit(e);
    atomic_fetch_add_explicit(&e->ring->served, 1, memory_order_relaxed);
}

static int make_uring(struct entry *e) {
    struct io_uring_params params;
    memset(&params, 0, sizeof params);
    params.flags = IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    int rc = io_uring_queue_init_params(4, &e->uring, &params);
    if (rc < 0) return rc;
    e->has_uring = 1;
    rc = io_uring_register_files(&e->uring, &e->ring->device, 1);
    if (rc < 0) return rc;
    // The stop signal: a poll of the ring's eventfd.
    struct io_uring_sqe *sqe = io_uring_get_sqe(&e->uring);
    io_uring_prep_poll_add(sqe, e->ring->stop_event, POLLIN);
    io_uring_sqe_set_data64(sqe, STOP_DATA);
    return 0;
}

static void *serve(void *argument) {
    struct entry *e = argument;
    struct albumfs_ring *ring = e->ring;
    // A queue's requests come from callers on its CPU: serve them there.
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    CPU_SET(e->qid, &cpus);
    pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus);
    int rc = make_uring(e);
    pthread_mutex_lock(&ring->lock);
    if (rc < 0) { ring->failed++; ring->error = -rc; }
    else ring->prepared++;
    pthread_cond_broadcast(&ring->cond);
    while (ring->go == 0) pthread_cond_wait(&ring->cond, &ring->lock);
    int go = ring->go;
    pthread_mutex_unlock(&ring->lock);
    if (go < 0 || rc < 0) return NULL;

    prepare_command(e, CMD_REGISTER);
    for (;;) {
        // One call: the reply (or the registration) goes, the next request comes.
        rc = io_uring_submit_and_wait(&e->uring, 1);
        if (rc == -EINTR) continue;
        if (rc < 0) break;
        struct io_uring_cqe *cqe;
        if (io_uring_peek_cqe(&e->uring, &cqe) != 0) continue;
        uint64_t data = io_uring_cqe_get_data64(cqe);
        int result = cqe->res;
        io_uring_cqe_seen(&e->uring, cqe);
        if (data == STOP_DATA) break;
        // -ENOTCONN: the connection ended. Anything else: the kernel took
        // none of this entry (its other entries go on).
        if (result < 0) {
            int none = 0;
            if (result != -ENOTCONN && result != -ECANCELED)
                atomic_compare_exchange_strong(&ring->entry_error, &none, -result);
            break;
        }
        serve_request(e);
    }
    return NULL;
}

static void destroy(albumfs_ring *ring) {
    for (unsigned i = 0; i < ring->count; i++) {
        struct entry *e = &ring->entries[i];
        if (e->started) pthread_join(e->thread, NULL);
        if (e->has_uring) io_uring_queue_exit(&e->uring);
        free(e->buffer);
        pthread_mutex_destroy(&e->lock);
        pthread_cond_destroy(&e->replied_cond);
    }
    if (ring->stop_event >= 0) close(ring->stop_event);
    pthread_mutex_destroy(&ring->lock);
    pthread_cond_destroy(&ring->cond);
    free(ring);
}

albumfs_ring *albumfs_ring_create(void *session, int device, unsigned per_queue, size_t payload) {
    unsigned queues = albumfs_ring_queue_count();
    unsigned count = queues * per_queue;
    albumfs_ring *ring = calloc(1, sizeof(*ring) + count * sizeof(struct entry));
    if (!ring) return NULL;
    ring->session = session;
    ring->device = device;
    ring->payload = payload;
    ring->count = count;
    pthread_mutex_init(&ring->lock, NULL);
    pthread_cond_init(&ring->cond, NULL);
    ring->stop_event = eventfd(0, EFD_CLOEXEC);
    int error = ring->stop_event < 0 ? errno : 0;
    for (unsigned i = 0; i < count; i++) {
        struct entry *e = &ring->entries[i];
        e->ring = ring;
        e->qid = i / per_queue;
        pthread_mutex_init(&e->lock, NULL);
        pthread_cond_init(&e->replied_cond, NULL);
    }
    for (unsigned i = 0; i < count && !error; i++) {
        struct entry *e = &ring->entries[i];
        if (posix_memalign((void **) &e->buffer, 4096, SLACK + payload) != 0) { error = ENOMEM; break; }
        e->iov[0] = (struct iovec) { .iov_base = &e->header, .iov_len = sizeof e->header };
        e->iov[1] = (struct iovec) { .iov_base = e->buffer + SLACK, .iov_len = payload };
        // The ring's threads take no signals: the session's handlers run elsewhere.
        sigset_t all, previous;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &previous);
        int rc = pthread_create(&e->thread, NULL, serve, e);
        pthread_sigmask(SIG_SETMASK, &previous, NULL);
        if (rc != 0) { error = rc; break; }
        e->started = 1;
    }
    unsigned started = 0;
    for (unsigned i = 0; i < count; i++) started += (unsigned) ring->entries[i].started;
    pthread_mutex_lock(&ring->lock);
    while (ring->prepared + ring->failed < started) pthread_cond_wait(&ring->cond, &ring->lock);
    if (ring->failed && !error) error = ring->error;
    if (error) {
        ring->go = -1;
        pthread_cond_broadcast(&ring->cond);
    }
    pthread_mutex_unlock(&ring->lock);
    if (error) {
        destroy(ring);
        errno = error;
        return NULL;
    }
    return ring;
}

void albumfs_ring_start(albumfs_ring *ring) {
    pthread_mutex_lock(&ring->lock);
    ring->go = 1;
    pthread_cond_broadcast(&ring->cond);
    pthread_mutex_unlock(&ring->lock);
}

static struct entry *entry_serving(albumfs_ring *ring, uint64_t unique) {
    if (serving && serving->ring == ring && atomic_load(&serving->unique) == unique) return serving;
    for (unsigned i = 0; i < ring->count; i++)
        if (atomic_load(&ring->entries[i].unique) == unique) return &ring->entries[i];
    return NULL;
}

ssize_t albumfs_ring_reply(albumfs_ring *ring, const struct iovec *iov, int count) {
    if (!ring || count < 1 || iov[0].iov_len < sizeof(struct fuse_out_header)) return -1;
    struct fuse_out_header out;
    memcpy(&out, iov[0].iov_base, sizeof out);
    if (out.unique == 0) return -1;  // a notification: /dev/fuse only
    struct entry *e = entry_serving(ring, out.unique);
    if (!e) return -1;
    char *payload = e->buffer + SLACK;
    size_t total = 0;
    for (int i = 1; i < count; i++) total += iov[i].iov_len;
    if (total > ring->payload) {
        out.error = -EIO;
        total = 0;
    } else {
        size_t at = 0;
        for (int i = 1; i < count; i++) {
            if (iov[i].iov_base != payload + at) memmove(payload + at, iov[i].iov_base, iov[i].iov_len);
            at += iov[i].iov_len;
        }
    }
    out.len = (uint32_t) (sizeof out + total);
    memcpy(e->header.in_out, &out, sizeof out);
    e->header.ent.payload_sz = (uint32_t) total;
    int own = e == serving;
    if (own) commit(e);
    pthread_mutex_lock(&e->lock);
    e->replied = 1;
    e->committed = own;
    pthread_cond_signal(&e->replied_cond);
    pthread_mutex_unlock(&e->lock);
    return (ssize_t) out.len;
}

void *albumfs_ring_reply_buffer(size_t *size) {
    if (!serving) return NULL;
    *size = serving->ring->payload;
    return serving->buffer + SLACK;
}

int albumfs_ring_entry_error(const albumfs_ring *ring) {
    return atomic_load(&ring->entry_error);
}

uint64_t albumfs_ring_served(const albumfs_ring *ring) {
    return atomic_load_explicit(&ring->served, memory_order_relaxed);
}

void albumfs_ring_stop(albumfs_ring *ring) {
    pthread_mutex_lock(&ring->lock);
    if (ring->go == 0) {  // never started: the kernel did not take the INIT reply
        ring->go = -1;
        pthread_cond_broadcast(&ring->cond);
    }
    pthread_mutex_unlock(&ring->lock);
    uint64_t one = 1;
    // Cannot fail: a counter of 1 never overflows.
    (void) !write(ring->stop_event, &one, sizeof one);
    for (unsigned i = 0; i < ring->count; i++) {
        struct entry *e = &ring->entries[i];
        if (e->started) pthread_join(e->thread, NULL);
        e->started = 0;
    }
}

void albumfs_ring_free(albumfs_ring *ring) {
    destroy(ring);
}
