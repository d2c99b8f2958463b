// Early-return helpers for absl::Status and absl::StatusOr.
//
// Abseil 20220623 has no status macros; these match the names and behaviour
// of the ones in later abseil/tensorstore releases so they can be swapped
// out. Both work in any function returning absl::Status or absl::StatusOr.
#ifndef PSFLOW_COMMON_STATUS_MACROS_H_
#define PSFLOW_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Evaluates `expr` (an absl::Status) and returns it from the enclosing
// function when it is not OK.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::absl::Status psflow_status_macro_value = (expr); \
    if (!psflow_status_macro_value.ok()) {             \
      return psflow_status_macro_value;                \
    }                                                  \
  } while (false)

#define PSFLOW_STATUS_MACROS_CONCAT_INNER(x, y) x##y
#define PSFLOW_STATUS_MACROS_CONCAT(x, y) \
  PSFLOW_STATUS_MACROS_CONCAT_INNER(x, y)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status from
// the enclosing function, otherwise moves the value into `lhs`, which may be
// a declaration (`ASSIGN_OR_RETURN(auto x, F());`) or an existing variable.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  PSFLOW_ASSIGN_OR_RETURN_IMPL(      \
      PSFLOW_STATUS_MACROS_CONCAT(psflow_statusor_, __LINE__), lhs, rexpr)

#define PSFLOW_ASSIGN_OR_RETURN_IMPL(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) {                                    \
    return std::move(statusor).status();                   \
  }                                                        \
  lhs = std::move(statusor).value()

#endif  // PSFLOW_COMMON_STATUS_MACROS_H_
