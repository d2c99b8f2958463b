#include "common/rpc/transport_security.h"

#include <functional>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/rpc/credential_files.h"
#include "common/status_macros.h"
#include "common/tls/certificates.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_certificate_verifier.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace psflow {
namespace {

constexpr int64_t kMaxPemBytes = 1 << 20;

absl::StatusOr<std::string> ReadPemFile(const std::string& path,
                                        const std::string& what,
                                        CredentialKind kind) {
  absl::StatusOr<std::string> text = ReadFileToString(path, kMaxPemBytes);
  if (!text.ok()) {
    return absl::Status(
        text.status().code(),
        absl::StrCat("cannot read the ", what, " ", path, " (",
                     text.status().message(), "; a PEM file is at most ",
                     kMaxPemBytes,
                     " bytes); psctl certs gen makes a job's certificates; "
                     "see docs/operations.md, \"Security\""));
  }
  RETURN_IF_ERROR(CheckCredentialFile(path, kind, absl::StrCat("the ", what)));
  // A public file is readable by anyone and copied into every pod: a key
  // appended to it (a `cat` too many) would give it away.
  if (kind == CredentialKind::kPublic &&
      text->find("PRIVATE KEY-----") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", what, " ", path,
        " holds a private key too, which anyone who can read that file "
        "(a public one, shared with every task) could use to act as its "
        "owner: remove the key from it, keep each key in its own file "
        "(mode 0600), and make new credentials (psctl certs gen) if the "
        "file was shared"));
  }
  return text;
}

// After the handshake (the chain already verified against the job's CA):
// the server's certificate must name `expected` and cover the host
// dialed, as CheckCertificateIdentity checks a task's own at start.
class PeerIdentityVerifier final
    : public grpc::experimental::ExternalCertificateVerifier {
 public:
  explicit PeerIdentityVerifier(std::string expected)
      : expected_(std::move(expected)) {}

  bool Verify(grpc::experimental::TlsCustomVerificationCheckRequest* request,
              std::function<void(grpc::Status)>,
              grpc::Status* sync_status) override {
    const grpc::string_ref target = request->target_name();
    // The host alone: gRPC strips the port and IPv6 brackets.
    const std::string host(target.data(), target.size());
    const grpc::string_ref peer = request->peer_cert();
    const std::string pem(peer.data(), peer.size());
    absl::StatusOr<CertificateInfo> info = DescribeCertificate(pem);
    absl::Status checked;
    if (!info.ok()) {
      checked = info.status();
    } else if (host.empty()) {
      checked = absl::UnauthenticatedError(absl::StrCat(
          "no host name to check ", expected_, "'s certificate against"));
    } else if (info->common_name != expected_) {
      checked = absl::UnauthenticatedError(absl::StrCat(
          "the server at ", host, " presents the certificate of ",
          info->common_name.empty() ? "no task" : info->common_name,
          ", not of ", expected_, ": another task answers at ", expected_,
          "'s address (a TF_CONFIG with a wrong port, or a task that took "
          "the port)"));
    } else {
      checked = CheckCertificateIdentity(pem, expected_, host);
    }
    *sync_status = checked.ok()
                       ? grpc::Status::OK
                       : grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                      std::string(checked.message()));
    return true;  // decided synchronously
  }

  void Cancel(grpc::experimental::TlsCustomVerificationCheckRequest*) override {
  }

 private:
  const std::string expected_;
};

std::shared_ptr<grpc::ChannelCredentials> PeerCheckingCredentials(
    const TransportSecurity& security, const std::string& expected_peer) {
  auto certificates =
      std::make_shared<grpc::experimental::StaticDataCertificateProvider>(
          security.ca_pem, std::vector<grpc::experimental::IdentityKeyCertPair>{
                               {security.key_pem, security.certificate_pem}});
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(certificates);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  options.set_certificate_verifier(
      grpc::experimental::ExternalCertificateVerifier::Create<
          PeerIdentityVerifier>(expected_peer));
  // The verifier checks the host; psflow's calls name no other.
  options.set_check_call_host(false);
  return grpc::experimental::TlsCredentials(options);
}

}  // namespace

absl::StatusOr<TransportSecurity> MutualTls(std::string ca_pem,
                                            std::string certificate_pem,
                                            std::string key_pem,
                                            std::string source) {
  if (absl::Status checked =
          CheckCertificate(ca_pem, PemPair{certificate_pem, key_pem});
      !checked.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS credentials from ", source, ": ", checked.message()));
  }
  TransportSecurity security;
  security.mode = TransportSecurity::Mode::kMutualTls;
  security.ca_pem = std::move(ca_pem);
  security.certificate_pem = std::move(certificate_pem);
  security.key_pem = std::move(key_pem);
  security.source = std::move(source);
  return security;
}

absl::StatusOr<TransportSecurity> LoadMutualTls(const std::string& ca_path,
                                                const std::string& cert_path,
                                                const std::string& key_path) {
  absl::StatusOr<std::string> ca =
      ReadPemFile(ca_path, "CA certificate", CredentialKind::kPublic);
  if (!ca.ok()) return ca.status();
  absl::StatusOr<std::string> cert =
      ReadPemFile(cert_path, "certificate", CredentialKind::kPublic);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key =
      ReadPemFile(key_path, "private key", CredentialKind::kSecret);
  if (!key.ok()) return key.status();
  return MutualTls(*std::move(ca), *std::move(cert), *std::move(key),
                   absl::StrCat(cert_path, " (CA ", ca_path, ")"));
}

std::string TransportSecurityName(const TransportSecurity& security) {
  switch (security.mode) {
    case TransportSecurity::Mode::kInsecure:
      return "insecure";
    case TransportSecurity::Mode::kMutualTls:
      return "mtls";
  }
  return "unknown";
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(
    const TransportSecurity& security) {
  switch (security.mode) {
    case TransportSecurity::Mode::kInsecure:
      return grpc::InsecureServerCredentials();
    case TransportSecurity::Mode::kMutualTls: {
      grpc::SslServerCredentialsOptions options(
          GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
      options.pem_root_certs = security.ca_pem;
      options.pem_key_cert_pairs.push_back(
          {security.key_pem, security.certificate_pem});
      return grpc::SslServerCredentials(options);
    }
  }
  return nullptr;
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(
    const TransportSecurity& security, const std::string& expected_peer) {
  switch (security.mode) {
    case TransportSecurity::Mode::kInsecure:
      return grpc::InsecureChannelCredentials();
    case TransportSecurity::Mode::kMutualTls: {
      if (!expected_peer.empty()) {
        return PeerCheckingCredentials(security, expected_peer);
      }
      grpc::SslCredentialsOptions options;
      options.pem_root_certs = security.ca_pem;
      options.pem_private_key = security.key_pem;
      options.pem_cert_chain = security.certificate_pem;
      return grpc::SslCredentials(options);
    }
  }
  return nullptr;
}

std::string NewChiefIncarnation() {
  absl::BitGen bits;
  return absl::StrFormat("%016x", absl::Uniform<uint64_t>(bits));
}

}  // namespace psflow
