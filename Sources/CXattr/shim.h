// getxattr(2) and friends, which Swift's Glibc module does not bring in.
#include <sys/xattr.h>
