// OpenSSL's state lives until the process ends, for every thread.
//
// By default OpenSSL 3 frees its global state in an atexit() handler. Any
// thread still running then (gRPC's event-engine threads, which finish TLS
// handshakes and exit on their own schedule) either crashes on the freed
// state when it next calls OpenSSL (a segfault at the end of a job that
// succeeded) or, when it exits afterwards, orphans its per-thread random
// generators, which LeakSanitizer reports as leaked (the sanitizer-job
// flake of grpc/grpc#38539). Linking this library initializes OpenSSL
// without that handler, before main() and before gRPC's own
// initialization; the kernel reclaims the memory at exit as it does every
// other allocation a process holds.
#ifndef PSFLOW_COMMON_TLS_OPENSSL_LIFETIME_H_
#define PSFLOW_COMMON_TLS_OPENSSL_LIFETIME_H_

namespace psflow {

// Idempotent; runs from a static initializer of this library, so callers
// need not call it. Returns false if OpenSSL refused to initialize (it
// then fails again, with its own error, on first use).
bool KeepOpenSslUntilProcessExit();

}  // namespace psflow

#endif  // PSFLOW_COMMON_TLS_OPENSSL_LIFETIME_H_
