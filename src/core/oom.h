#pragma once
// Allocation failure at the runtime's API boundary. Program::load and Method::create allocate
// (the Method's tables, the delegate's operators); when the library is built with exceptions
// (the default), an allocation that fails anywhere inside them unwinds to the boundary, every
// object made so far is released on the way, and the call returns kResourceExhausted with the
// message "out of memory" (short enough to need no allocation itself). Built with
// -fno-exceptions (KILN_NO_EXCEPTIONS), a failed allocation terminates the process, as in any
// C++ program built that way. execute() allocates nothing and cannot fail this way.

#include <new>

#include "kiln/status.h"

namespace kiln::core {

/// Runs `body` (returning a Status or Result) and turns std::bad_alloc into kResourceExhausted.
template <typename Body>
auto returning_oom(Body&& body) -> decltype(body()) {
#if defined(__cpp_exceptions)
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Status(Code::kResourceExhausted, "out of memory");
  }
#else
  return body();
#endif
}

}  // namespace kiln::core
