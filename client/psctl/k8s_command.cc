#include "client/psctl/k8s_command.h"

#include <ostream>
#include <string>
#include <vector>

#include "client/psctl/k8s_render.h"

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
            "                 [--cpu=2] [--memory=4Gi] [--secure=false]",
            "Kubernetes manifests (Indexed Jobs, headless Services, a volume\n"
            "claim, a NetworkPolicy) for a job of that size, on standard\n"
            "output: non-root, read-only pods, with mutual TLS and job tokens\n"
            "from two Secrets (the output's header says how to make them).") {
    FlagSet& flags = mutable_flags();
    flags.AddString("image", &options_.image, "the psflow container image");
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
                    "storage class of the claim (ReadWriteMany); default: "
                    "the cluster's default");
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
    out << *yaml;
    return kExitOk;
  }

 private:
  K8sRenderOptions options_;
  std::string job_ = "configs/fashion_mnist_mlp.json";
};

}  // namespace

std::unique_ptr<Subcommand> NewK8sRenderCommand() {
  return std::make_unique<K8sRenderCommand>();
}

}  // namespace psflow
