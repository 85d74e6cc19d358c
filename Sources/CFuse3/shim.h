// The one place FUSE_USE_VERSION is set. 312, not 35: the 3.12+ headers compare
// against FUSE_MAKE_VERSION(3,12), and with an older value fuse_session_loop_mt
// becomes a macro Swift cannot see.
#define FUSE_USE_VERSION 312
#include <stddef.h>   // fuse_opt.h uses NULL without including it
#include <fuse_lowlevel.h>
#include <fuse_opt.h>

// FUSE_ARGS_INIT is a macro Swift cannot import.
static inline struct fuse_args albumfs_fuse_args_init(int argc, char **argv) {
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    return args;
}
#include "kernel_features.h"
