#include "client/psctl/job_certificates.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/host_port.h"
#include "common/rpc/credential_files.h"

namespace psflow {

absl::StatusOr<JobCertificates> MakeJobCertificates(const ClusterSpec& cluster,
                                                    const std::string& job,
                                                    absl::Duration validity) {
  JobCertificates out;
  absl::StatusOr<PemPair> ca = MakeCertificateAuthority(job, validity);
  if (!ca.ok()) return ca.status();
  out.ca = *std::move(ca);
  for (const auto& [task, address] : cluster.Tasks()) {
    absl::StatusOr<HostPort> host_port = ParseHostPort(address);
    if (!host_port.ok()) return host_port.status();
    absl::StatusOr<PemPair> pair = MakeCertificate(out.ca, job, task.ToString(),
                                                   {host_port->host}, validity);
    if (!pair.ok()) return pair.status();
    out.tasks[task.ToString()] = *std::move(pair);
  }
  // Operators' tools only dial: no host to name.
  absl::StatusOr<PemPair> tool =
      MakeCertificate(out.ca, job, "psctl", {}, validity);
  if (!tool.ok()) return tool.status();
  out.tasks["psctl"] = *std::move(tool);
  return out;
}

std::string JobCertificatesSecret(const JobCertificates& certificates,
                                  const SecretOptions& secret) {
  std::string yaml = absl::StrCat(
      "# The job's TLS files (psctl certs gen), mounted read-only as every\n"
      "# task's --tls_dir. The CA's key is not in it.\n"
      "apiVersion: v1\nkind: Secret\nmetadata:\n  name: ",
      secret.name, "\n  namespace: ", secret.namespace_name,
      "\ntype: Opaque\ndata:\n  ca.crt: ",
      absl::Base64Escape(certificates.ca.certificate), "\n");
  for (const auto& [name, pair] : certificates.tasks) {
    if (name == "psctl") continue;  // operators keep theirs
    absl::StrAppend(&yaml, "  ", name,
                    ".crt: ", absl::Base64Escape(pair.certificate), "\n  ",
                    name, ".key: ", absl::Base64Escape(pair.private_key), "\n");
  }
  return yaml;
}

absl::Status WriteJobCertificates(const JobCertificates& certificates,
                                  const std::string& dir,
                                  const SecretOptions& secret) {
  // The CA's and every task's key go in it: private (0700) when new.
  if (absl::Status made = MakePrivateDirectory(dir); !made.ok()) return made;
  auto write = [&](const std::string& name, const std::string& data,
                   mode_t mode) {
    return WriteFileWithMode(absl::StrCat(dir, "/", name), data, mode);
  };
  absl::Status status = write("ca.crt", certificates.ca.certificate, 0644);
  status.Update(write("ca.key", certificates.ca.private_key, 0600));
  for (const auto& [name, pair] : certificates.tasks) {
    status.Update(write(name + ".crt", pair.certificate, 0644));
    status.Update(write(name + ".key", pair.private_key, 0600));
  }
  status.Update(
      write("secret.yaml", JobCertificatesSecret(certificates, secret), 0600));
  return status;
}

}  // namespace psflow
