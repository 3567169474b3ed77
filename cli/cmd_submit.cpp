// gpuctl submit: registered here; the command arrives in a following commit.
#include "commands.hpp"

namespace gpuctl::cli {

void register_submit(CLI::App& /*app*/, AppContext& /*ctx*/) {}

}  // namespace gpuctl::cli
