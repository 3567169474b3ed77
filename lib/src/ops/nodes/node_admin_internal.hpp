#pragma once
// Helpers shared by the node_admin*.cpp files; not part of the library's interface.
#include <string>

#include "gpuctl/error.hpp"

namespace gpuctl::ops::node_admin_detail {

// A refusal of what the user asked for (a spec, a selection, an edit that needs --overwrite).
inline Error invalid(std::string message) {
  Error e;
  e.code = Errc::invalid_argument;
  e.message = std::move(message);
  return e;
}

}  // namespace gpuctl::ops::node_admin_detail
