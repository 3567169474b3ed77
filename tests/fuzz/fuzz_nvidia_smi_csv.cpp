// nvidia-smi CSV (`--query-gpu/--query-compute-apps/--query-retired-pages --format=csv`), with a
// header and, as `csv,noheader` gives it, with the field names passed in.
#include "fuzz_support.hpp"
#include "gpuctl/gpu/nvidia_smi.hpp"

namespace {

const std::vector<std::string> kGpuFields = {"index",
                                             "uuid",
                                             "name",
                                             "pci.bus_id",
                                             "memory.total",
                                             "memory.used",
                                             "utilization.gpu",
                                             "temperature.gpu",
                                             "power.draw",
                                             "ecc.errors.uncorrected.volatile.total",
                                             "clocks_throttle_reasons.active",
                                             "mig.mode.current"};
const std::vector<std::string> kAppFields = {"gpu_uuid", "pid", "process_name", "used_memory"};
const std::vector<std::string> kPageFields = {"gpu_uuid", "retired_pages.address", "retired_pages.cause"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpuctl::gpu;
  auto text = gpuctl::fuzz::as_text(data, size);
  if (auto table = parse_nvidia_smi_csv(text)) {
    for (const auto& row : table->rows) GPUCTL_FUZZ_CHECK(row.size() == table->fields.size(), text);
    for (const auto& gpu : gpus_from_query_gpu_csv(*table)) gpuctl::fuzz::dump_checked(nlohmann::json(gpu), "csv gpu");
  }
  if (auto gpus = parse_query_gpu_csv(text, kGpuFields)) {
    for (const auto& gpu : *gpus) gpuctl::fuzz::dump_checked(nlohmann::json(gpu), "noheader csv gpu");
  }
  (void)parse_query_compute_apps_csv(text);
  (void)parse_query_compute_apps_csv(text, kAppFields);
  (void)parse_query_retired_pages_csv(text);
  (void)parse_query_retired_pages_csv(text, kPageFields);
  return 0;
}
