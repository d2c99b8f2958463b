#include "client/psctl/k8s_command.h"

#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/psctl/k8s_kustomization.h"
#include "client/psctl/k8s_render.h"
#include "common/file_util.h"

namespace psflow {
namespace {

class K8sRenderCommand : public Subcommand {
 public:
  K8sRenderCommand()
      : Subcommand(
            "k8s render", {},
            "psctl k8s render --image=IMAGE [--name=psflow] [--ps=N] "
            "[--workers=M]\n"
            "                 [--evaluator] [--gpus_per_worker=K] "
            "[--job=<file in image>]\n"
            "                 [--k8s_namespace=NS] [--storage=10Gi] "
            "[--storage_class=C]\n"
            "                 [--storage_access_mode=ReadWriteOnce] "
            "[--image_pull_policy=IfNotPresent]\n"
            "                 [--cpu=2] [--memory=4Gi] [--secure=false] "
            "[--out_dir=DIR]",
            "Kubernetes manifests (Indexed Jobs, headless Services, a volume\n"
            "claim, a NetworkPolicy) for a job of that size, on standard\n"
            "output: non-root, read-only pods, with mutual TLS and job tokens\n"
            "from two Secrets (the output's header says how to make them).\n"
            "With --out_dir, DIR/<name>.yaml and DIR/kustomization.yaml\n"
            "instead, for `kubectl apply -k DIR`.") {
    FlagSet& flags = mutable_flags();
    flags.AddString("image", &options_.image, "the psflow container image");
    flags.AddString("image_pull_policy", &options_.image_pull_policy,
                    "Always, IfNotPresent (an image already on the node, "
                    "e.g. `kind load`ed, is used) or Never");
    flags.AddString("name", &options_.name, "prefix of object names");
    flags.AddString("k8s_namespace", &options_.ns, "namespace");
    flags.AddInt("ps", &options_.num_ps, "parameter servers");
    flags.AddInt("workers", &options_.num_workers, "workers");
    flags.AddBool("evaluator", &options_.evaluator, "run an evaluator");
    flags.AddInt("gpus_per_worker", &options_.gpus_per_worker,
                 "nvidia.com/gpu per worker (then --device=cuda)");
    flags.AddString("storage", &options_.storage,
                    "size of the checkpoint/log volume claim");
    flags.AddString("storage_class", &options_.storage_class,
                    "storage class of the claim; default: the cluster's "
                    "default");
    flags.AddString("storage_access_mode", &options_.storage_access_mode,
                    "ReadWriteOnce (any class; the chief, parameter servers "
                    "and evaluator then share a node) or ReadWriteMany (a "
                    "class such as NFS; pods spread)");
    flags.AddString("cpu", &options_.cpu, "CPU request and limit of every pod");
    flags.AddString("memory", &options_.memory,
                    "memory request and limit of every pod");
    flags.AddBool("secure", &options_.secure,
                  "mutual TLS and job tokens from the Secrets <name>-tls and "
                  "<name>-tokens (--secure=false: an open job, for a private "
                  "test cluster only)");
    flags.AddString("job", &job_,
                    "the job config; a relative path names a file in the "
                    "image, under /opt/psflow/");
    flags.AddString("out_dir", &out_dir_,
                    "write <name>.yaml and kustomization.yaml into this "
                    "directory (created if missing) instead of printing the "
                    "manifests");
  }

  int Run(const std::vector<std::string>& arguments, std::ostream& out,
          std::ostream& err) override {
    K8sRenderOptions options = options_;
    // A relative --job names a config inside the image's bundle.
    options.job_config =
        !job_.empty() && job_[0] == '/' ? job_ : "/opt/psflow/" + job_;
    absl::StatusOr<std::string> yaml = RenderK8sManifests(options);
    if (!yaml.ok()) {
      err << "psctl k8s render: " << yaml.status().message() << "\n";
      return kExitUsage;
    }
    if (out_dir_.empty()) {
      out << *yaml;
      return kExitOk;
    }
    const std::string manifests_file = options.name + ".yaml";
    absl::StatusOr<std::string> kustomization =
        RenderK8sKustomization(options, manifests_file);
    if (!kustomization.ok()) {
      err << "psctl k8s render: " << kustomization.status().message() << "\n";
      return kExitUsage;
    }
    absl::Status written = MakeDirectories(out_dir_);
    if (written.ok()) {
      written = WriteFileAtomically(absl::StrCat(out_dir_, "/", manifests_file),
                                    *yaml);
    }
    if (written.ok()) {
      written = WriteFileAtomically(
          absl::StrCat(out_dir_, "/kustomization.yaml"), *kustomization);
    }
    if (!written.ok()) {
      err << "psctl k8s render: " << written.message() << "\n";
      return kExitFailed;
    }
    out << "wrote " << out_dir_ << "/" << manifests_file << " and " << out_dir_
        << "/kustomization.yaml; make the credentials there (the commands "
           "are in the manifests' header), then kubectl apply -k "
        << out_dir_ << "\n";
    return kExitOk;
  }

 private:
  K8sRenderOptions options_;
  std::string job_ = "configs/fashion_mnist_mlp.json";
  std::string out_dir_;
};

}  // namespace

std::unique_ptr<Subcommand> NewK8sRenderCommand() {
  return std::make_unique<K8sRenderCommand>();
}

}  // namespace psflow
