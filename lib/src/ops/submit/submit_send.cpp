// Sending the Job gpuctl submit built, and the server-side dry run of its pods.
#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/admission/admission_denial.hpp"
#include "gpuctl/ops/submit/submit.hpp"
#include "gpuctl/ops/submit/submit_preflight.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

Result<json> send_job(kube::Client& client, const json& job, bool server_dry_run) {
  const std::string ns = kube::namespace_of(job);
  const std::string name = kube::name_of(job);
  kube::WriteOptions write;
  write.dry_run = server_dry_run;
  write.field_validation = "Strict";
  write.field_manager = "gpuctl";
  auto created = client.create(kube::paths::jobs(ns), job, write);
  if (!created) {
    Error e = created.error();
    if (e.is_already_exists()) {
      e.message = fmt::format(
          "job {}/{} already exists; pick another name, or delete it first (gpuctl jobs clean, or "
          "kubectl delete job {} -n {})",
          ns, name, name, ns);
    } else {
      e = e.with_context(fmt::format("the API server refused job {}/{}", ns, name));
    }
    return fail(std::move(e));
  }
  if (!server_dry_run) return created;
  // A dry-run Job creates no pods, so admission of its pods (quota, LimitRange, pod security)
  // never ran: ask for that with a pod built from the template.
  auto pod = client.create(kube::paths::pods(ns), pod_from_job_template(job), write);
  if (!pod) {
    Error e = pod.error();
    if (auto denial = parse_admission_denial(e.message)) {
      e.message = fmt::format("the API server would refuse the pods of job {}/{}: {}", ns, name, describe(*denial));
    } else {
      e = e.with_context(fmt::format("the API server would refuse the pods of job {}/{}", ns, name));
    }
    return fail(std::move(e));
  }
  return created;
}

}  // namespace gpuctl::ops
