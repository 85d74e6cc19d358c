// libcurl's easy interface. curl_easy_setopt and curl_easy_getinfo are
// variadic, which Swift cannot call: one small typed wrapper per kind of
// argument.
#include <curl/curl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

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

// The connection's socket, kept where `where` points as curl makes it
// (CURLOPT_SOCKOPTFUNCTION; CURLINFO_ACTIVESOCKET is not set while a
// transfer runs): for albumfs_acknowledge_now.
static int albumfs_curl_remember_socket(void *where, curl_socket_t socket, curlsocktype purpose) {
    (void)purpose;
    *(curl_socket_t *)where = socket;
    return CURL_SOCKOPT_OK;
}
static inline CURLcode albumfs_curl_track_socket(CURL *curl, curl_socket_t *where) {
    curl_easy_setopt(curl, CURLOPT_SOCKOPTFUNCTION, albumfs_curl_remember_socket);
    return curl_easy_setopt(curl, CURLOPT_SOCKOPTDATA, where);
}

// Acknowledges at once what the connection has received (TCP_QUICKACK):
// a server that sends a response's headers and body as two writes with
// Nagle's algorithm on (radosgw's beast frontend without tcp_nodelay=1)
// holds the body back until the headers are acknowledged, and Linux delays
// that acknowledgement by 40 ms on a connection in request-response use.
static inline void albumfs_acknowledge_now(curl_socket_t socket) {
    if (socket != CURL_SOCKET_BAD) {
        int one = 1;
        (void)setsockopt(socket, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
    }
}
