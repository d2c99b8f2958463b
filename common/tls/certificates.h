// A job's certificates for mutual TLS, made with OpenSSL's libcrypto: one
// certificate authority per job, and one certificate per task (and one for
// operators' tools), each naming the task in its subject (CN "worker-1",
// O "psflow job <job>") and its host in subjectAltName (an IP address or a
// DNS name, so gRPC's hostname check passes for the TF_CONFIG address).
// Every certificate serves as both server and client (extendedKeyUsage
// serverAuth + clientAuth). Keys are ECDSA P-256.
//
// `psctl certs gen` writes them; tests make throwaway ones. Thread-safe.
#ifndef PSFLOW_COMMON_TLS_CERTIFICATES_H_
#define PSFLOW_COMMON_TLS_CERTIFICATES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace psflow {

struct PemPair {
  std::string certificate;  // PEM
  std::string private_key;  // PEM (PKCS#8)
};

// A new self-signed CA (CN "psflow CA for <job>", basicConstraints CA).
absl::StatusOr<PemPair> MakeCertificateAuthority(const std::string& job,
                                                 absl::Duration validity);

// A certificate signed by `ca` for `common_name` with `hosts` as
// subjectAltNames (each an IP address or a DNS name; none is allowed).
absl::StatusOr<PemPair> MakeCertificate(const PemPair& ca,
                                        const std::string& job,
                                        const std::string& common_name,
                                        const std::vector<std::string>& hosts,
                                        absl::Duration validity);

// What a certificate says about its holder, read from PEM.
struct CertificateInfo {
  std::string common_name;
  std::vector<std::string> hosts;  // subjectAltNames: IPs and DNS names
  absl::Time not_after;
};
absl::StatusOr<CertificateInfo> DescribeCertificate(const std::string& pem);

// OK when `pair`'s key belongs to its certificate and the certificate is
// signed by `ca_pem` and valid now; otherwise why not (for clear start-up
// errors instead of gRPC's handshake failures).
// The CA file must hold one certificate: gRPC would trust each of them.
absl::Status CheckCertificate(const std::string& ca_pem, const PemPair& pair);

// OK when the certificate names `name` (its CN: "ps-0", "psctl") and, for
// a non-empty `host` (an IP address or DNS name), covers it in its
// subjectAltNames as a TLS client checks it: the name the task's peers
// dial. Otherwise InvalidArgument naming both and the fix.
absl::Status CheckCertificateIdentity(const std::string& certificate_pem,
                                      const std::string& name,
                                      const std::string& host);

}  // namespace psflow

#endif  // PSFLOW_COMMON_TLS_CERTIFICATES_H_
