// The recognised messages (classify.hpp). Each row: every needle must occur (case-sensitive, as
// the programs print them), first matching row wins, so specific rows come before generic ones.
#include "classify.hpp"

#include <initializer_list>

namespace gpuctl::ops::diagnose {
namespace {

struct Pattern {
  std::initializer_list<std::string_view> needles;
  MessageClass what;
};

std::optional<MessageClass> first_match(std::string_view text, std::initializer_list<Pattern> table) {
  for (const auto& p : table) {
    bool all = true;
    for (auto needle : p.needles) all = all && text.find(needle) != std::string_view::npos;
    if (all) return p.what;
  }
  return std::nullopt;
}

}  // namespace

std::optional<MessageClass> classify_allocation_failure(std::string_view m) {
  return first_match(
      m,
      {
          {{"GPU is lost"},
           {"gpu-lost", "a GPU fell off the bus (NVML: GPU is lost)", "the node needs a reboot to get it back"}},
          {{"requested number of devices unavailable"},
           {"devices-unavailable",
            "the kubelet has fewer healthy GPUs than the scheduler counted (requested number of devices unavailable)",
            "the device plugin's health view and the node's allocatable disagree"}},
          {{"no healthy devices present"},
           {"no-healthy-devices", "every GPU of the resource is unhealthy", "check the GPUs with gpuctl gpus"}},
          {{"rpc error: code = Unavailable"},
           {"plugin-unavailable", "the device plugin went away during Allocate (its gRPC socket closed)",
            "the device plugin pod restarted or crashed"}},
          {{"failed to find gpu id"},
           {"unknown-device", "the device plugin does not know the GPU the kubelet asked for",
            "restart the device plugin pod on the node"}},
          {{"Allocate failed"},
           {"allocate-failed", "the device plugin refused to allocate GPUs", "read the device plugin's log"}},
          {{"UnexpectedAdmissionError"},
           {"allocate-failed", "the kubelet refused the pod at admission", "read the device plugin's log"}},
      });
}

std::optional<MessageClass> classify_mount_failure(std::string_view m) {
  return first_match(
      m,
      {
          {{"access denied by server"},
           {"nfs-access-denied", "the NFS server refuses this node (access denied by server)",
            "add the node's network to the export's allowed clients"}},
          {{"reason given by server: No such file or directory"},
           {"nfs-export-missing", "the NFS export path does not exist on the server",
            "create the path on the server or fix the PV's nfs.path"}},
          {{"Connection timed out"},
           {"nfs-unreachable", "the NFS server does not answer (connection timed out)",
            "check the server and the network path from the node"}},
          {{"No route to host"},
           {"nfs-unreachable", "the NFS server cannot be reached (no route to host)",
            "check the server and the network path from the node"}},
          {{"mount.<type> helper program"},
           {"nfs-client-missing", "the node has no NFS client (mount.nfs helper missing)",
            "install nfs-common (Debian/Ubuntu) or nfs-utils (RHEL) on the node"}},
          {{"wrong fs type, bad option"},
           {"nfs-client-missing", "the node has no NFS client or the mount options are wrong",
            "install nfs-common/nfs-utils on the node, then check the mount options"}},
          {{"Permission denied"},
           {"permission-denied", "permission denied mounting the volume", "check the export's and the path's owners"}},
          {{"timed out waiting for the condition"},
           {"mount-timeout", "the volume was not attached or mounted in time",
            "the mount hangs: look for an unreachable storage server"}},
          {{"exit status 32"},
           {"mount-failed", "mount(8) failed (exit status 32)", "run the mount by hand on the node to see why"}},
      });
}

std::string nfs_export_of(std::string_view m) {
  auto take_token = [&](std::size_t from) {
    std::size_t end = m.find_first_of(" \n\t,", from);
    return std::string(m.substr(from, end == std::string_view::npos ? std::string_view::npos : end - from));
  };
  if (auto at = m.find("mounting "); at != std::string_view::npos) {
    std::string token = take_token(at + 9);
    if (token.find(":/") != std::string::npos) return token;
  }
  if (auto at = m.find("mount -t nfs "); at != std::string_view::npos) {
    std::size_t pos = at + 13;
    while (pos < m.size()) {
      std::string token = take_token(pos);
      if (token.find(":/") != std::string::npos) return token;
      pos += token.size() + 1;
    }
  }
  return "";
}

std::optional<MessageClass> classify_plugin_log_line(std::string_view line) {
  return first_match(
      line,
      {
          {{"context deadline exceeded"},
           {"registration-timeout", "the plugin could not register with the kubelet (context deadline exceeded)",
            "check that the kubelet runs and /var/lib/kubelet/device-plugins is mounted into the plugin"}},
          {{"Could not contact Kubelet"},
           {"registration-timeout", "the plugin could not contact the kubelet",
            "check that the kubelet runs and /var/lib/kubelet/device-plugins is mounted into the plugin"}},
          {{"Registration failed"},
           {"registration-failed", "the kubelet refused the plugin's registration", "read the kubelet's log"}},
          {{"Could not register device plugin"},
           {"registration-failed", "the plugin could not register with the kubelet", "read the kubelet's log"}},
          {{"could not load NVML library"},
           {"nvml-not-loaded", "NVML could not be loaded: the container does not see the NVIDIA driver",
            "set the nvidia container runtime as the default (or the plugin's runtimeClass) and check the driver"}},
          {{"Failed to initialize NVML"},
           {"nvml-init-failed", "NVML could not be initialised: the driver is missing or broken on the node",
            "run nvidia-smi on the node"}},
          {{"Incompatible strategy detected"},
           {"incompatible-strategy", "the plugin found no usable device discovery strategy (NVML not visible)",
            "configure the NVIDIA Container Toolkit as the runtime of the plugin's pod"}},
          {{"invalid device discovery strategy"},
           {"incompatible-strategy", "the plugin found no usable device discovery strategy",
            "configure the NVIDIA Container Toolkit as the runtime of the plugin's pod"}},
          {{"No devices found"}, {"no-devices", "the plugin found no GPUs on the node", "run nvidia-smi on the node"}},
          {{"error starting plugins"},
           {"plugin-start-failed", "the plugin could not start", "read the lines before this one"}},
      });
}

}  // namespace gpuctl::ops::diagnose
