#include "common/tls/openssl_lifetime.h"

#include <openssl/crypto.h>

namespace psflow {

bool KeepOpenSslUntilProcessExit() {
  // Only the first initialization decides whether OpenSSL registers its
  // exit handler; later ones (gRPC's OPENSSL_init_ssl) leave that alone.
  static const bool initialized =
      OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr) == 1;
  return initialized;
}

namespace {

// Before main(), so before any thread or gRPC call touches OpenSSL.
[[maybe_unused]] const bool kOpenSslKeptUntilExit =
    KeepOpenSslUntilProcessExit();

}  // namespace
}  // namespace psflow
