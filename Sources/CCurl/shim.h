// libcurl's easy interface. curl_easy_setopt and curl_easy_getinfo are
// variadic, which Swift cannot call: one small typed wrapper per kind of
// argument.
#include <curl/curl.h>

static inline CURLcode albumfs_curl_set_long(CURL *curl, CURLoption option, long value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode albumfs_curl_set_offset(CURL *curl, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode albumfs_curl_set_pointer(CURL *curl, CURLoption option, void *value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode albumfs_curl_set_string(CURL *curl, CURLoption option, const char *value) {
    return curl_easy_setopt(curl, option, value);
}
typedef size_t (*albumfs_curl_data_callback)(char *data, size_t size, size_t count, void *context);
static inline CURLcode albumfs_curl_set_callback(CURL *curl, CURLoption option, albumfs_curl_data_callback value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode albumfs_curl_response_code(CURL *curl, long *code) {
    return curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, code);
}
