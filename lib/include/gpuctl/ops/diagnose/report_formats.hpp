#pragma once
// diagnose's outputs for machines other than gpuctl's own schema: JUnit XML for CI systems
// (`-o junit`) and the Prometheus text exposition format for node_exporter's textfile collector
// (`-o prometheus`). Both are pure renderings of one Report; `run_at` is when the cluster was
// read (Snapshot::now), so the same report renders the same text.
#include <chrono>
#include <string>
#include <string_view>

#include "gpuctl/ops/diagnose/diagnose.hpp"

namespace gpuctl::ops::diagnose {

// JUnit XML as Jenkins' xunit plugin validates it (junit-10.xsd) and GitLab, GitHub and Maven
// Surefire readers read it: <testsuites name="gpuctl diagnose"> holding one <testsuite> per check
// that was selected (name = check id). Within it, one <testcase classname="gpuctl.diagnose.<id>"
// name="<Kind/namespace/name>"> per object with findings, holding one <failure> (message: the
// worst finding's summary, type: its severity; text: every finding's summary, evidence and what
// to run); one skipped testcase per object whose findings were all suppressed (message: the
// rule's reason); a check that passed has one passing testcase named by its title (a suite is
// never empty, and CI keeps its history), a check that could not run one skipped testcase with
// why. Text from the cluster has its control characters escaped, so the XML is always valid.
std::string to_junit(const Report& report, std::chrono::system_clock::time_point run_at);

// The Prometheus text exposition format 0.0.4 (HELP and TYPE for every family, no sample
// timestamps, which the textfile collector refuses). Gauges:
//   gpuctl_diagnose_findings{check,severity,node}      findings left after suppression, per group
//                                                       (node "" for findings on no node; only
//                                                       groups with a finding are written)
//   gpuctl_diagnose_suppressed_findings{check}         per selected check, 0 included
//   gpuctl_diagnose_check_status{check,status}         1 for the status the check ended with
//                                                       (pass, fail, skipped), 0 for the other two
//   gpuctl_diagnose_check_duration_seconds{check}
//   gpuctl_diagnose_node_layer_ok{node,layer}          every GPU node x every layer: 1 while that
//                                                       layer and every one below it pass, 0 from
//                                                       the node's first failing layer on
//   gpuctl_diagnose_node_failing_layer{node,layer,check}  1 per failing GPU node: its first
//                                                       failing layer and the check that found it
//   gpuctl_diagnose_last_run_timestamp_seconds         when the cluster was read (Unix time)
// Layers are labelled node, network, device_plugin, gpus_registered, gpus_healthy, gpu_pods,
// workload. Label values are escaped as the format asks (backslash, double quote, newline).
std::string to_prometheus(const Report& report, std::chrono::system_clock::time_point run_at);

// A layer as a Prometheus label value: to_string(layer) in snake_case ("device_plugin").
std::string_view layer_label(Layer layer);

}  // namespace gpuctl::ops::diagnose
