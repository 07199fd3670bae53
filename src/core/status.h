#pragma once
// Kiln's own shorthand for failed Statuses, one per Code (the public kiln/status.h defines the
// Status and Code an app sees; these factories stay out of the app's namespace).

#include <string>
#include <utility>

#include "kiln/status.h"

namespace kiln {

inline Status ok_status() { return Status(); }
inline Status invalid_argument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
inline Status out_of_range(std::string m) { return Status(Code::kOutOfRange, std::move(m)); }
inline Status not_found(std::string m) { return Status(Code::kNotFound, std::move(m)); }
inline Status data_loss(std::string m) { return Status(Code::kDataLoss, std::move(m)); }
inline Status unimplemented(std::string m) { return Status(Code::kUnimplemented, std::move(m)); }
inline Status failed_precondition(std::string m) { return Status(Code::kFailedPrecondition, std::move(m)); }
inline Status resource_exhausted(std::string m) { return Status(Code::kResourceExhausted, std::move(m)); }
inline Status internal_error(std::string m) { return Status(Code::kInternal, std::move(m)); }
inline Status io_error(std::string m) { return Status(Code::kIoError, std::move(m)); }

}  // namespace kiln
