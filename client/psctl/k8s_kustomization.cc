#include "client/psctl/k8s_kustomization.h"

#include "absl/strings/str_cat.h"
#include "client/psctl/image_reference.h"
#include "common/rpc/job_tokens.h"
#include "common/task.h"

namespace psflow {

absl::StatusOr<std::string> RenderK8sKustomization(
    const K8sRenderOptions& options, const std::string& manifests_file) {
  if (absl::Status checked = CheckK8sRenderOptions(options); !checked.ok()) {
    return checked;
  }
  absl::StatusOr<ImageReference> image =
      ParseImageReference(options.image, "--image");
  if (!image.ok()) return image.status();
  std::string out =
      absl::StrCat("# psflow job \"", options.name,
                   "\": `kubectl apply -k <this directory>` (rendered by\n"
                   "# `psctl k8s render --out_dir`, with ",
                   manifests_file, ").\n");
  if (options.secure) {
    absl::StrAppend(
        &out,
        "# The two Secrets are built from the files `psctl certs gen` and\n"
        "# `psctl tokens gen` write here (the commands are in ",
        manifests_file,
        "'s header).\n"
        "# Their names stay fixed, without kustomize's content hash: the "
        "Jobs name\n"
        "# them, and a Job's pod template cannot change, so a renamed Secret "
        "would\n# make the next apply fail.\n");
  }
  absl::StrAppend(&out,
                  "apiVersion: kustomize.config.k8s.io/v1beta1\n"
                  "kind: Kustomization\nresources:\n- ",
                  manifests_file, "\n");
  if (options.secure) {
    const std::string tls_secret = options.name + "-tls";
    const std::string token_secret = options.name + "-tokens";
    absl::StrAppend(&out,
                    "generatorOptions:\n  disableNameSuffixHash: true\n"
                    "secretGenerator:\n- name: ",
                    tls_secret, "\n  namespace: ", options.ns,
                    "\n  files:\n  - ", tls_secret, "/ca.crt\n");
    // What `psctl certs gen` puts in its secret.yaml: the CA's certificate
    // and every task's pair (not the CA's key, not psctl's pair).
    for (const TaskId& task : K8sJobTasks(options)) {
      absl::StrAppend(&out, "  - ", tls_secret, "/", task.ToString(),
                      ".crt\n  - ", tls_secret, "/", task.ToString(), ".key\n");
    }
    // What `psctl tokens gen` puts in its secret.yaml: the digests and
    // every calling role's token but the operators' (admin.token).
    absl::StrAppend(&out, "- name: ", token_secret,
                    "\n  namespace: ", options.ns, "\n  files:\n  - ",
                    token_secret, "/", kTokenDigestsFile, "\n");
    for (RpcRole role : kCallingRoles) {
      if (role == RpcRole::kAdmin) continue;
      absl::StrAppend(&out, "  - ", token_secret, "/", TokenFileName(role),
                      "\n");
    }
  }
  // Quoted, so that a tag such as 1.2 stays a string; the reference's
  // characters never need escaping (ParseImageReference).
  absl::StrAppend(&out,
                  "# The image every pod runs: point it at a registry here, "
                  "e.g. with\n"
                  "# `kustomize edit set image ",
                  image->name, "=registry.example/psflow:1.2`.\n",
                  "images:\n- name: ", image->name,
                  "\n  newName: ", image->name, "\n");
  if (!image->tag.empty()) {
    absl::StrAppend(&out, "  newTag: '", image->tag, "'\n");
  }
  if (!image->digest.empty()) {
    absl::StrAppend(&out, "  digest: '", image->digest, "'\n");
  }
  return out;
}

}  // namespace psflow
