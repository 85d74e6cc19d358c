// libmagic: the MIME type of a file from its first bytes (magic_buffer).
// A magic_t is not thread-safe: AlbumMedia keeps a guarded pool of them.
#include <magic.h>
