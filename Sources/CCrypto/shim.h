// libcrypto (OpenSSL): SHA-256 through the EVP digest interface, and
// HMAC-SHA256 (the object store's request signatures).
#include <openssl/evp.h>
#include <openssl/hmac.h>
