// liburing, for FUSE over io_uring (FuseRing).
#include <liburing.h>
