// libzstd: the metadata snapshots a store keeps in its bucket are compressed with it.
#include <zstd.h>
