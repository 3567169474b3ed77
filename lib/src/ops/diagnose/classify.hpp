#pragma once
// The messages the checks recognise, as data: kubelet admission refusals, volume mount failures,
// device plugin log lines and GPU job failures. Each pattern is the verbatim text Kubernetes, the
// device plugin or CUDA prints (tests/fixtures/k8s-errors holds the real samples), the cause an
// admin reads, and what to do. Pure: no I/O.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuctl/ops/common/gpu_failure_text.hpp"

namespace gpuctl::ops::diagnose {

// id (stable, e.g. "gpu-lost", "nfs-export-missing"), cause (one clause), hint (what to do).
using MessageClass = TextClass;

// A kubelet admission refusal of a GPU pod ("Allocate failed due to ...", UnexpectedAdmissionError).
std::optional<MessageClass> classify_allocation_failure(std::string_view message);

// A FailedMount / FailedAttachVolume message.
std::optional<MessageClass> classify_mount_failure(std::string_view message);
// The NFS "server:/path" a mount message names ("mount -t nfs ... SERVER:PATH", "mounting
// SERVER:PATH failed"); "" when it names none.
std::string nfs_export_of(std::string_view message);

// One line of a device plugin's log that shows it failing (registration, NVML, strategy, no devices).
std::optional<MessageClass> classify_plugin_log_line(std::string_view line);

// A GPU job's failure text (termination message or log line): see ops/common/gpu_failure_text.hpp.
using ops::classify_gpu_failure;

}  // namespace gpuctl::ops::diagnose
