#pragma once
// Parsers for the outputs of nvidia-smi that gpuctl reads: `-q -x` (XML schema v10..v13), `-q`
// (text), the default table, `--query-gpu/--query-compute-apps/--query-retired-pages ...
// --format=csv[,noheader][,nounits]` and `-L`. Each takes the output as a string; none reads files
// or runs processes. See gpu_info.hpp for the model they fill.
#include <string>
#include <string_view>
#include <vector>

#include "gpuctl/error.hpp"
#include "gpuctl/gpu/gpu_info.hpp"
#include "gpuctl/gpu/reported.hpp"

namespace gpuctl::gpu {

// --- `nvidia-smi -q -x` and `nvidia-smi -q` ---

// A generic key tree of `-q` output, XML or text: keys are XML tag names, or the text labels in
// snake_case ("FB Memory Usage" -> "fb_memory_usage"); values are trimmed text. XML attributes
// become children named "@attr"; text "GPU 00000000:01:00.0" headers become key "gpu" with the
// bus id as value. Lets `diagnose` read fields the model does not carry.
struct NvsmiNode {
  std::string key;
  std::string value;
  std::vector<NvsmiNode> children;

  // First direct child with this key, or nullptr.
  const NvsmiNode* child(std::string_view key) const;
  // Follows "a/b/c" through first children, or nullptr.
  const NvsmiNode* find(std::string_view path) const;
  std::vector<const NvsmiNode*> children_named(std::string_view key) const;
};

// Parses `nvidia-smi -q -x` into the tree. Tolerates text before the XML declaration and after the
// closing </nvidia_smi_log> (e.g. a warning line); that text is returned in `outside_text`.
// Errc::parse when there is no <nvidia_smi_log> document or it is not well-formed (also when it
// was cut off).
struct XmlTree {
  NvsmiNode root;
  int schema_version = 0;    // from "nvsmi_device_vNN.dtd"; 0 when the DOCTYPE is absent
  std::string outside_text;  // lines around the document, trimmed
};
Result<XmlTree> parse_nvidia_smi_xml_tree(std::string_view xml);

// Parses `nvidia-smi -q` text (any `-d` subset) into the tree, by indentation. Errc::parse when
// there is no "==============NVSMI LOG==============" banner and no "GPU <bus id>" section.
Result<NvsmiNode> parse_nvidia_smi_query_text_tree(std::string_view text);

// Maps a tree from either parser onto the model; fields the tree lacks are Absence::missing.
// GPU indices are assigned in document order (nvidia-smi's default PCI bus order).
NvidiaSmiLog nvidia_smi_log_from_tree(const NvsmiNode& root);

// `nvidia-smi -q -x` output -> model. Warnings printed around the XML (infoROM corrupted) are
// attached to the GPU they name. Errc::parse as for parse_nvidia_smi_xml_tree, and when the
// document has no <gpu> and no driver version (nothing gpuctl could use).
Result<NvidiaSmiLog> parse_nvidia_smi_xml(std::string_view xml);

// `nvidia-smi -q` text -> model (best effort: the text form has no schema; what gpuctl reads is
// listed in gpu_info.hpp, and fields it does not map stay in the tree). When "Attached GPUs" is
// larger than the number of GPU sections found, a warning says the output looks truncated.
Result<NvidiaSmiLog> parse_nvidia_smi_query_text(std::string_view text);

// --- The default `nvidia-smi` table ---

// Reads the driver/CUDA versions and, per GPU, index, name (truncated as printed), persistence mode,
// bus id, volatile uncorrected ECC, fan, temperature, performance state, power draw/limit,
// memory used/total and GPU utilization. Lines after the table that nvidia-smi prints as
// "WARNING: ..." are attached as warnings. Errc::parse when no "NVIDIA-SMI" header is found.
Result<NvidiaSmiLog> parse_nvidia_smi_table(std::string_view text);

// --- CSV (`--format=csv`, with or without noheader / nounits) ---

struct CsvTable {
  // Field names as queried, without the " [unit]" suffix the header adds ("memory.total").
  std::vector<std::string> fields;
  // Units from the header ("MiB"), empty when none or when there was no header.
  std::vector<std::string> units;
  // Cells, trimmed; every row has fields.size() cells.
  std::vector<std::vector<std::string>> rows;
  // Lines without a single "," where rows were expected: messages nvidia-smi printed in between
  // ("No devices were found", "Unable to determine the device handle for GPU ...").
  std::vector<std::string> other_lines;
};

// Splits nvidia-smi CSV. With `fields` empty the first line is the header; otherwise `fields` are
// the names passed to --query-*=... and every line is data (csv,noheader). Cells are separated by
// "," (nvidia-smi does not quote; a row with extra cells has them joined back into its
// process_name/name column, the only free-text ones). Errc::parse when a header is expected and the
// input is empty, and on a row with too few cells, or too many and no free-text column.
Result<CsvTable> parse_nvidia_smi_csv(std::string_view text, const std::vector<std::string>& fields = {});

// `--query-gpu=...` -> one GpuInfo per row. Known fields (index, uuid, name, pci.bus_id,
// memory.*, temperature.*, power.*, clocks.*, ecc.*, retired_pages.*, remapped_rows.*,
// clocks_throttle_reasons.* / clocks_event_reasons.*, fan.speed, pstate, mig.mode.*, ...) are
// mapped; unknown ones are ignored. GPUs without an index column are numbered by row.
Result<std::vector<GpuInfo>> parse_query_gpu_csv(std::string_view text, const std::vector<std::string>& fields = {});
std::vector<GpuInfo> gpus_from_query_gpu_csv(const CsvTable& table);

// `--query-compute-apps=...` rows.
struct ComputeApp {
  Reported<std::string> gpu_uuid;
  Reported<std::string> gpu_bus_id;
  Reported<std::string> gpu_name;
  GpuProcess process;
};
Result<std::vector<ComputeApp>> parse_query_compute_apps_csv(std::string_view text,
                                                             const std::vector<std::string>& fields = {});

// `--query-retired-pages=...` rows. Note: some drivers print one placeholder row per cause with
// address "[N/A]" when nothing was retired; such rows have no address.
struct RetiredPageRecord {
  Reported<std::string> gpu_uuid;
  Reported<std::string> gpu_bus_id;
  Reported<std::string> gpu_name;
  Reported<std::string> gpu_serial;
  Reported<std::string> address;    // "0x00000000000f3b7c"
  Reported<std::string> timestamp;  // when the page was retired
  Reported<std::string> cause;      // "Single Bit ECC", "Double Bit ECC"
};
Result<std::vector<RetiredPageRecord>> parse_query_retired_pages_csv(std::string_view text,
                                                                     const std::vector<std::string>& fields = {});

// --- `nvidia-smi -L` ---

struct ListedMigDevice {
  int device_index = -1;               // "Device  0"
  Reported<std::string> profile_name;  // "1g.10gb", "1c.3g.71gb"
  Reported<std::string> uuid;          // "MIG-3f6f389f-..." or, before R470, "MIG-GPU-<uuid>/<gi>/<ci>"
  Reported<int> gpu_instance_id;       // only from the pre-R470 UUID form
  Reported<int> compute_instance_id;
};
struct ListedGpu {
  int index = -1;
  std::string name;
  Reported<std::string> uuid;
  std::vector<ListedMigDevice> mig_devices;
};
struct GpuList {
  std::vector<ListedGpu> gpus;
  std::vector<std::string> other_lines;  // non-empty lines that are not GPU or MIG lines (errors)
};
// Never fails: lines it does not understand go to other_lines. Accepts CRLF.
GpuList parse_nvidia_smi_list(std::string_view text);

// Copies what only `-L` knows (MIG profile names and UUIDs) into `gpu`, matching the listed GPU
// by UUID, else by index, and MIG devices by their index. Returns false when no listed GPU matches.
bool merge_gpu_list(GpuInfo& gpu, const GpuList& list);
// merge_gpu_list for every GPU, in time linear in the GPUs and the list together.
void merge_gpu_lists(std::vector<GpuInfo>& gpus, const GpuList& list);

// --- `nvidia-smi nvlink -s` ---

// One GPU's NVLinks as `nvidia-smi nvlink -s` lists them: "Link 3: 25 GB/s" is up,
// "Link 3: <inactive>" is down. A GPU without NVLink has a header and no Link lines.
struct NvlinkGpuStatus {
  int index = -1;
  Reported<std::string> uuid;
  std::vector<int> active_links;
  std::vector<int> inactive_links;
};
// Never fails: lines it does not understand are skipped. Accepts CRLF.
std::vector<NvlinkGpuStatus> parse_nvlink_status(std::string_view text);

}  // namespace gpuctl::gpu
