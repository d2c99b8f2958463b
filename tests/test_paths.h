// Paths for multi-process tests: binaries from the runfiles and fresh
// files under the test's temporary directory.
#ifndef PSFLOW_TESTS_TEST_PATHS_H_
#define PSFLOW_TESTS_TEST_PATHS_H_

#include <string>

namespace psflow::testing {

// Path of a binary from the test's runfiles, e.g. "ps/ps_server".
std::string RunfilePath(const std::string& workspace_relative);

// A fresh file path under the test's temporary directory.
std::string TempPath(const std::string& name);

}  // namespace psflow::testing

#endif  // PSFLOW_TESTS_TEST_PATHS_H_
