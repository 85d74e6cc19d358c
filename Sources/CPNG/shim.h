// libpng's simplified API (png_image): PNG to RGB and RGB to PNG in memory.
#include <png.h>
