// `psctl ckpt ...`: list, inspect, verify and export checkpoints
// (docs/checkpoint-format.md). Each returns the process exit status
// (0 success, 1 failure or damage) and writes its report to `out`, errors
// to `err`.
#ifndef PSFLOW_CLIENT_PSCTL_CKPT_COMMANDS_H_
#define PSFLOW_CLIENT_PSCTL_CKPT_COMMANDS_H_

#include <ostream>
#include <string>

namespace psflow {

// The checkpoints of a directory, oldest first: step, size, age, whether
// the state file lists it, which is newest; and crash leftovers.
int CkptList(const std::string& dir, std::ostream& out, std::ostream& err);

// Every tensor's name, slot, dtype, shape and size; with `tensor`, only
// that one (name or name@slot) and, with `values`, its values.
int CkptInspect(const std::string& path, const std::string& tensor, bool values,
                std::ostream& out, std::ostream& err);

// Reads every slice and checks its CRC-32C; exits 1 naming each damaged
// tensor and file.
int CkptVerify(const std::string& path, std::ostream& out, std::ostream& err);

// Writes the checkpoint as safetensors or npz.
int CkptExport(const std::string& path, const std::string& format,
               const std::string& out_path, bool include_slots,
               std::ostream& out, std::ostream& err);

// Asks the chief of the running job described by `tf_config` to pause
// training, restore `path` onto the parameter servers and resume.
int CkptRestore(const std::string& path, const std::string& tf_config_flag,
                std::ostream& out, std::ostream& err);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_CKPT_COMMANDS_H_
