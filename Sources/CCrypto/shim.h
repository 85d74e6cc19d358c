// libcrypto (OpenSSL): SHA-256 through the EVP digest interface.
#include <openssl/evp.h>
