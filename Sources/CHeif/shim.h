// libheif: the primary image's size and its Exif block, read through a
// heif_reader over pread (the file is never loaded whole).
#include <libheif/heif.h>
