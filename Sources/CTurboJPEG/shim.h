// libjpeg-turbo's TurboJPEG API: JPEG decoding at 1/2, 1/4 or 1/8 scale (the
// DCT does the reduction), for thumbnails.
#include <turbojpeg.h>
