// For tests: reads a TensorBoard event file back, checking every record's
// framing and both CRCs (gtest failures when they are wrong).
#ifndef PSFLOW_COMMON_METRICS_EVENT_FILE_TEST_UTIL_H_
#define PSFLOW_COMMON_METRICS_EVENT_FILE_TEST_UTIL_H_

#include <set>
#include <string>
#include <vector>

#include "proto/tensorboard.pb.h"

namespace psflow::testing {

std::vector<tensorflow::Event> ReadEvents(const std::string& path);

// The scalar tags of every event file in `dir`.
std::set<std::string> ScalarTagsIn(const std::string& dir);

}  // namespace psflow::testing

#endif  // PSFLOW_COMMON_METRICS_EVENT_FILE_TEST_UTIL_H_
