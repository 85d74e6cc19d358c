// libexif: EXIF from a JPEG APP1 block, a HEIF Exif item, a PNG eXIf chunk or
// the first bytes of a TIFF-based raw file.
#include <libexif/exif-data.h>
#include <libexif/exif-utils.h>
#include <libexif/exif-tag.h>
#include <libexif/exif-entry.h>
#include <libexif/exif-content.h>
