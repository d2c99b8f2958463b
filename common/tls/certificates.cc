#include "common/tls/certificates.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <ctime>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/civil_time.h"
#include "absl/time/clock.h"

namespace psflow {
namespace {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Store = std::unique_ptr<X509_STORE, Deleter<X509_STORE, X509_STORE_free>>;
using StoreContext =
    std::unique_ptr<X509_STORE_CTX,
                    Deleter<X509_STORE_CTX, X509_STORE_CTX_free>>;
using Names =
    std::unique_ptr<GENERAL_NAMES, Deleter<GENERAL_NAMES, GENERAL_NAMES_free>>;

// OpenSSL's queued errors, as one line.
std::string OpenSslErrors() {
  std::vector<std::string> errors;
  while (unsigned long code = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(code, text, sizeof(text));
    errors.push_back(text);
  }
  return errors.empty() ? "no detail from OpenSSL"
                        : absl::StrJoin(errors, "; ");
}

absl::Status Failed(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", OpenSslErrors()));
}

bool IsIpAddress(const std::string& host) {
  unsigned char buffer[16];
  return inet_pton(AF_INET, host.c_str(), buffer) == 1 ||
         inet_pton(AF_INET6, host.c_str(), buffer) == 1;
}

std::string BioContents(BIO* bio) {
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  return std::string(data, size);
}

// The certificate and its key, PEM (the key as PKCS#8).
absl::StatusOr<PemPair> ToPemPair(X509* cert, EVP_PKEY* key) {
  Bio cert_bio(BIO_new(BIO_s_mem()));
  if (!cert_bio || PEM_write_bio_X509(cert_bio.get(), cert) != 1) {
    return Failed("cannot encode the certificate");
  }
  Bio key_bio(BIO_new(BIO_s_mem()));
  if (!key_bio || PEM_write_bio_PrivateKey(key_bio.get(), key, nullptr, nullptr,
                                           0, nullptr, nullptr) != 1) {
    return Failed("cannot encode the private key");
  }
  return PemPair{BioContents(cert_bio.get()), BioContents(key_bio.get())};
}

absl::StatusOr<Cert> ReadCertificate(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a PEM certificate (", OpenSslErrors(), ")"));
  }
  return cert;
}

// OpenSSL's default asks the terminal for an encrypted key's passphrase:
// a task would hang at start-up on a prompt nobody sees.
int NoPassphrase(char*, int, int, void*) { return -1; }

absl::StatusOr<Key> ReadKey(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Key key(PEM_read_bio_PrivateKey(bio.get(), nullptr, &NoPassphrase, nullptr));
  if (!key && pem.find("ENCRYPTED") != std::string::npos) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        "an encrypted private key (it needs a passphrase, which a task "
        "cannot ask for); write it unencrypted, mode 0600: openssl pkey "
        "-in <key> -out <new key>");
  }
  if (!key) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a PEM private key (", OpenSslErrors(), ")"));
  }
  return key;
}

absl::Status AddExtension(X509* cert, X509* issuer, int nid,
                          const std::string& value) {
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* extension =
      X509V3_EXT_conf_nid(nullptr, &context, nid, value.c_str());
  if (extension == nullptr) {
    return Failed(absl::StrCat("cannot make the extension ", OBJ_nid2sn(nid),
                               " = ", value));
  }
  const int added = X509_add_ext(cert, extension, -1);
  X509_EXTENSION_free(extension);
  if (added != 1) return Failed("cannot add an extension");
  return absl::OkStatus();
}

// A certificate for `key` named `common_name`, valid from 5 minutes ago
// (clocks of a cluster differ) for `validity`, not yet signed.
absl::StatusOr<Cert> NewCertificate(EVP_PKEY* key, const std::string& job,
                                    const std::string& common_name,
                                    absl::Duration validity) {
  Cert cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) {
    return Failed("cannot create a certificate");
  }
  std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>> serial(BN_new());
  if (!serial ||
      BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) ==
          nullptr) {
    return Failed("cannot draw a serial number");
  }
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), -300) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()),
                      absl::ToInt64Seconds(validity)) == nullptr) {
    return Failed("cannot set the validity");
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  const std::string organization = absl::StrCat("psflow job ", job);
  if (X509_NAME_add_entry_by_txt(
          name, "O", MBSTRING_UTF8,
          reinterpret_cast<const unsigned char*>(organization.c_str()), -1, -1,
          0) != 1 ||
      X509_NAME_add_entry_by_txt(
          name, "CN", MBSTRING_UTF8,
          reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
          0) != 1) {
    return Failed("cannot name the certificate's subject");
  }
  if (X509_set_pubkey(cert.get(), key) != 1)
    return Failed("cannot set the key");
  return cert;
}

}  // namespace

absl::StatusOr<PemPair> MakeCertificateAuthority(const std::string& job,
                                                 absl::Duration validity) {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return Failed("cannot generate the CA's key");
  absl::StatusOr<Cert> cert = NewCertificate(
      key.get(), job, absl::StrCat("psflow CA for ", job), validity);
  if (!cert.ok()) return cert.status();
  X509* x = cert->get();
  if (X509_set_issuer_name(x, X509_get_subject_name(x)) != 1) {
    return Failed("cannot set the issuer");
  }
  for (auto [nid, value] :
       {std::pair{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
        std::pair{NID_key_usage, "critical,keyCertSign,cRLSign"},
        std::pair{NID_subject_key_identifier, "hash"}}) {
    if (absl::Status s = AddExtension(x, x, nid, value); !s.ok()) return s;
  }
  if (X509_sign(x, key.get(), EVP_sha256()) == 0) {
    return Failed("cannot sign the CA certificate");
  }
  return ToPemPair(x, key.get());
}

absl::StatusOr<PemPair> MakeCertificate(const PemPair& ca,
                                        const std::string& job,
                                        const std::string& common_name,
                                        const std::vector<std::string>& hosts,
                                        absl::Duration validity) {
  absl::StatusOr<Cert> ca_cert = ReadCertificate(ca.certificate);
  if (!ca_cert.ok()) return ca_cert.status();
  absl::StatusOr<Key> ca_key = ReadKey(ca.private_key);
  if (!ca_key.ok()) return ca_key.status();
  Key key(EVP_EC_gen("P-256"));
  if (!key) return Failed("cannot generate a key");
  absl::StatusOr<Cert> cert =
      NewCertificate(key.get(), job, common_name, validity);
  if (!cert.ok()) return cert.status();
  X509* x = cert->get();
  if (X509_set_issuer_name(x, X509_get_subject_name(ca_cert->get())) != 1) {
    return Failed("cannot set the issuer");
  }
  std::vector<std::string> names;
  for (const std::string& host : hosts) {
    if (host.empty() || host.find_first_of(", \t\n") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", host, "\" is not a host name or IP address"));
    }
    names.push_back(absl::StrCat(IsIpAddress(host) ? "IP:" : "DNS:", host));
  }
  std::vector<std::pair<int, std::string>> extensions = {
      {NID_basic_constraints, "critical,CA:FALSE"},
      {NID_key_usage, "critical,digitalSignature,keyAgreement"},
      {NID_ext_key_usage, "serverAuth,clientAuth"},
      {NID_authority_key_identifier, "keyid"}};
  if (!names.empty()) {
    extensions.emplace_back(NID_subject_alt_name, absl::StrJoin(names, ","));
  }
  for (const auto& [nid, value] : extensions) {
    if (absl::Status s = AddExtension(x, ca_cert->get(), nid, value); !s.ok()) {
      return s;
    }
  }
  if (X509_sign(x, ca_key->get(), EVP_sha256()) == 0) {
    return Failed("cannot sign the certificate");
  }
  return ToPemPair(x, key.get());
}

absl::StatusOr<CertificateInfo> DescribeCertificate(const std::string& pem) {
  absl::StatusOr<Cert> cert = ReadCertificate(pem);
  if (!cert.ok()) return cert.status();
  CertificateInfo info;
  char name[256] = {};
  if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert->get()),
                                NID_commonName, name, sizeof(name)) > 0) {
    info.common_name = name;
  }
  Names names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert->get(), NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names.get(), i);
    if (n->type == GEN_DNS) {
      const ASN1_STRING* s = n->d.dNSName;
      info.hosts.emplace_back(
          reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
          ASN1_STRING_length(s));
    } else if (n->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* s = n->d.iPAddress;
      char text[INET6_ADDRSTRLEN] = {};
      const int length = ASN1_STRING_length(s);
      if ((length == 4 || length == 16) &&
          inet_ntop(length == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(s),
                    text, sizeof(text)) != nullptr) {
        info.hosts.push_back(text);
      }
    }
  }
  std::tm tm = {};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert->get()), &tm) == 1) {
    info.not_after = absl::FromCivil(
        absl::CivilSecond(tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                          tm.tm_hour, tm.tm_min, tm.tm_sec),
        absl::UTCTimeZone());
  }
  return info;
}

int CountCertificates(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  int count = 0;
  // _AUX, as gRPC reads its roots: it also takes "TRUSTED CERTIFICATE"
  // blocks, which PEM_read_bio_X509 skips.
  while (Cert(PEM_read_bio_X509_AUX(bio.get(), nullptr, nullptr, nullptr))) {
    ++count;
  }
  ERR_clear_error();  // the end of the text
  return count;
}

absl::Status CheckCertificate(const std::string& ca_pem, const PemPair& pair) {
  // gRPC trusts every certificate in the CA file; the check below reads
  // only the first. A job trusts its own CA alone: another CA's
  // certificates named "chief-0" or "psctl" would command the job.
  if (const int cas = CountCertificates(ca_pem); cas > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the CA file holds ", cas,
        " certificates; a job trusts exactly one CA, its own (psctl certs "
        "gen), since any certificate another CA signed with a task's name "
        "would act as that task: keep only the job's CA in it"));
  }
  absl::StatusOr<Cert> ca = ReadCertificate(ca_pem);
  if (!ca.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the CA certificate: ", ca.status().message()));
  }
  absl::StatusOr<Cert> cert = ReadCertificate(pair.certificate);
  if (!cert.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the certificate: ", cert.status().message()));
  }
  absl::StatusOr<Key> key = ReadKey(pair.private_key);
  if (!key.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the key: ", key.status().message()));
  }
  if (X509_check_private_key(cert->get(), key->get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        "the key does not belong to the certificate");
  }
  Store store(X509_STORE_new());
  StoreContext context(X509_STORE_CTX_new());
  if (!store || !context || X509_STORE_add_cert(store.get(), ca->get()) != 1 ||
      X509_STORE_CTX_init(context.get(), store.get(), cert->get(), nullptr) !=
          1) {
    return Failed("cannot set up the certificate check");
  }
  if (X509_verify_cert(context.get()) != 1) {
    const int error = X509_STORE_CTX_get_error(context.get());
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("the certificate does not verify against the CA: ",
                     X509_verify_cert_error_string(error)));
  }
  return absl::OkStatus();
}

absl::Status CheckCertificateIdentity(const std::string& certificate_pem,
                                      const std::string& name,
                                      const std::string& host) {
  absl::StatusOr<Cert> cert = ReadCertificate(certificate_pem);
  if (!cert.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the certificate: ", cert.status().message()));
  }
  char common_name[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert->get()), NID_commonName,
                            common_name, sizeof(common_name));
  ERR_clear_error();
  if (name != common_name) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the certificate is ", common_name[0] != '\0' ? "" : "not ", "named ",
        common_name[0] != '\0' ? absl::StrCat("\"", common_name, "\"")
                               : "(no CN)",
        ", not \"", name,
        "\": peers take a task for the one its certificate names, so each "
        "task needs its own (psctl certs gen makes ",
        name, ".crt and ", name, ".key)"));
  }
  if (host.empty()) return absl::OkStatus();
  const int matched =
      IsIpAddress(host)
          ? X509_check_ip_asc(cert->get(), host.c_str(), 0)
          // As gRPC matches: a wildcard only as a whole leftmost label.
          // and never the subject's CN in place of a DNS name.
          : X509_check_host(cert->get(), host.c_str(), host.size(),
                            X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS |
                                X509_CHECK_FLAG_NEVER_CHECK_SUBJECT,
                            nullptr);
  ERR_clear_error();
  if (matched != 1) {
    absl::StatusOr<CertificateInfo> info = DescribeCertificate(certificate_pem);
    const std::string hosts = info.ok() && !info->hosts.empty()
                                  ? absl::StrJoin(info->hosts, ", ")
                                  : "none";
    return absl::InvalidArgumentError(absl::StrCat(
        "the certificate of ", name, " does not cover ", host,
        ", its address in TF_CONFIG, where its peers reach it (its "
        "subjectAltNames: ",
        hosts,
        "): every TLS connection to it would fail; make the job's "
        "certificates again from this TF_CONFIG (psctl certs gen "
        "--tf_config=...)"));
  }
  return absl::OkStatus();
}

}  // namespace psflow
