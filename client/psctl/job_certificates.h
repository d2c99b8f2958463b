// A job's TLS files, as `psctl certs gen` writes them and every role reads
// them (--tls_dir; common/rpc/security_flags.h):
//
//   ca.crt                 the job's CA certificate (every task needs it)
//   ca.key                 the CA's key: keep it off the cluster; only
//                          `psctl certs gen` needs it, to add certificates
//   <task>.crt, <task>.key one pair per task of the cluster ("worker-1"),
//                          naming the task (CN) and the host of its
//                          TF_CONFIG address (subjectAltName)
//   psctl.crt, psctl.key   for operators' tools (psctl status, ckpt restore)
//   secret.yaml            a Kubernetes Secret with ca.crt and every task's
//                          pair (not ca.key), to mount as the tasks' --tls_dir
//
// Keys are written with mode 0600.
#ifndef PSFLOW_CLIENT_PSCTL_JOB_CERTIFICATES_H_
#define PSFLOW_CLIENT_PSCTL_JOB_CERTIFICATES_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/cluster_spec.h"
#include "common/tls/certificates.h"

namespace psflow {

struct JobCertificates {
  PemPair ca;
  // "ps-0", "worker-1", ..., "psctl" -> its pair.
  std::map<std::string, PemPair> tasks;
};

// A new CA, a pair for every task of `cluster` and one for psctl.
absl::StatusOr<JobCertificates> MakeJobCertificates(const ClusterSpec& cluster,
                                                    const std::string& job,
                                                    absl::Duration validity);

struct SecretOptions {
  std::string name;  // the Secret's name
  std::string namespace_name = "default";
};

// Writes the files above into `dir` (created if needed).
absl::Status WriteJobCertificates(const JobCertificates& certificates,
                                  const std::string& dir,
                                  const SecretOptions& secret);

// The Kubernetes Secret manifest (YAML) with ca.crt and every task's pair.
std::string JobCertificatesSecret(const JobCertificates& certificates,
                                  const SecretOptions& secret);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_JOB_CERTIFICATES_H_
