// Sending the Job gpuctl submit built (with its ResourceClaimTemplate first, when the pods claim
// DRA devices), and the server-side dry run of its pods.
#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/admission/admission_denial.hpp"
#include "gpuctl/ops/dra/dra.hpp"
#include "gpuctl/ops/submit/submit.hpp"
#include "gpuctl/ops/submit/submit_preflight.hpp"
#include "submit_send_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

kube::WriteOptions strict_write(bool dry_run) {
  kube::WriteOptions write;
  write.dry_run = dry_run;
  write.field_validation = "Strict";
  write.field_manager = "gpuctl";
  return write;
}

Result<json> send_job(kube::Client& client, const json& job, bool server_dry_run) {
  const std::string ns = kube::namespace_of(job);
  const std::string name = kube::name_of(job);
  const kube::WriteOptions write = strict_write(server_dry_run);
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

namespace {

std::string template_path(std::string_view ns, std::string_view name = {}) {
  if (name.empty()) return kube::paths::resources(kResourceApiVersion, "resourceclaimtemplates", true, ns);
  return kube::paths::resource(kResourceApiVersion, "resourceclaimtemplates", true, ns, name);
}

// Deletes only the object we made, never one made since under its name.
json uid_precondition(const json& object) {
  return {{"preconditions", {{"uid", kube::string_field(kube::field(object, "metadata"), "uid")}}}};
}

Result<json> create_claim_template(kube::Client& client, const json& claim_template, bool server_dry_run) {
  const std::string ns = kube::namespace_of(claim_template);
  const std::string name = kube::name_of(claim_template);
  auto created = client.create(template_path(ns), claim_template, strict_write(server_dry_run));
  if (created) return created;
  Error e = created.error();
  if (e.is_already_exists()) {
    e.message = fmt::format(
        "resourceclaimtemplate {}/{} already exists (an earlier job of that name claimed its devices through it); "
        "pick another job name, or delete it (kubectl delete resourceclaimtemplate {} -n {})",
        ns, name, name, ns);
  } else {
    e = e.with_context(fmt::format("the API server refused resourceclaimtemplate {}/{}", ns, name));
  }
  return fail(std::move(e));
}

// `created` goes again (only that object, by uid: never one made since under its name), because
// what it was made with was refused; the error says whether it went, or how to delete it.
Error delete_again(kube::Client& client, std::string_view kind, const std::string& path, json options,
                   const json& created, std::string_view made, Error error) {
  const std::string ns = kube::namespace_of(created);
  const std::string name = kube::name_of(created);
  auto removed = client.remove(path, options);
  if (removed || removed.error().is_not_found()) {
    error.message += fmt::format(" ({} {}/{}, {}, was deleted again)", kind, ns, name, made);
  } else {
    error.message += fmt::format("; {} {}/{}, {}, could not be deleted ({}): kubectl delete {} {} -n {}", kind, ns,
                                 name, made, removed.error().message, kind, name, ns);
  }
  return error;
}

// The Job was refused: the template made for it goes too.
Error take_back(kube::Client& client, const json& created, Error job_error) {
  return delete_again(client, "resourceclaimtemplate",
                      template_path(kube::namespace_of(created), kube::name_of(created)), uid_precondition(created),
                      created, "created for it", std::move(job_error));
}

// The Job owns the template from now on: deleting the Job deletes it. Not the controller, and no
// blocking of the Job's deletion: the template is a leftover to collect, never a dependent to wait for.
Result<json> own_by_job(kube::Client& client, const json& created, const json& job) {
  json owner = {{"apiVersion", "batch/v1"},   {"kind", "Job"},
                {"name", kube::name_of(job)}, {"uid", kube::string_field(kube::field(job, "metadata"), "uid")},
                {"controller", false},        {"blockOwnerDeletion", false}};
  // The uid makes the patch a precondition: it never lands on a template made since by someone else.
  json patch = {{"metadata",
                 {{"uid", kube::string_field(kube::field(created, "metadata"), "uid")},
                  {"ownerReferences", json::array({std::move(owner)})}}}};
  kube::WriteOptions write;
  write.field_manager = "gpuctl";
  return client.patch(template_path(kube::namespace_of(created), kube::name_of(created)), kube::PatchType::merge, patch,
                      write);
}

// The rendezvous Service, owned by the Job it serves (deleted with it). In a server dry run the
// Job has no uid, so no owner either.
Result<json> create_service(kube::Client& client, json service, const json& job, bool server_dry_run) {
  const std::string ns = kube::namespace_of(service);
  const std::string name = kube::name_of(service);
  if (!server_dry_run) {
    service["metadata"]["ownerReferences"] =
        json::array({{{"apiVersion", "batch/v1"},
                      {"kind", "Job"},
                      {"name", kube::name_of(job)},
                      {"uid", kube::string_field(kube::field(job, "metadata"), "uid")},
                      {"controller", false},
                      {"blockOwnerDeletion", false}}});
  }
  auto created =
      client.create(kube::paths::resources("v1", "services", true, ns), service, strict_write(server_dry_run));
  if (created) return created;
  Error e = created.error();
  if (e.is_already_exists()) {
    e.message = fmt::format(
        "service {}/{} already exists, and a job run over --nodes needs its own rendezvous Service of its name; pick "
        "another job name, or delete the service (kubectl delete service {} -n {})",
        ns, name, name, ns);
  } else {
    e = e.with_context(fmt::format("the API server refused the rendezvous service {}/{}", ns, name));
  }
  return fail(std::move(e));
}

// The Service was refused, so the pods could never meet: the Job goes (its pods and, through
// its ownerReference, its claim template with it).
Error take_back_job(kube::Client& client, const json& job, Error service_error) {
  json options = uid_precondition(job);
  options["propagationPolicy"] = "Background";
  return delete_again(client, "job", kube::paths::job(kube::namespace_of(job), kube::name_of(job)), options, job,
                      "created just before", std::move(service_error));
}

Result<void> send_service(kube::Client& client, const BuiltJob& built, bool server_dry_run, SentSubmission& sent) {
  if (built.service.is_null()) return {};
  auto service = create_service(client, built.service, sent.job, server_dry_run);
  if (!service) return fail(server_dry_run ? service.error() : take_back_job(client, sent.job, service.error()));
  sent.service = std::move(*service);
  return {};
}

}  // namespace

Result<SentSubmission> send_submission(kube::Client& client, const BuiltJob& built, bool server_dry_run) {
  SentSubmission sent;
  if (built.claim_template.is_null()) {
    GPUCTL_TRY_ASSIGN(sent.job, send_job(client, built.job, server_dry_run));
    GPUCTL_TRY(send_service(client, built, server_dry_run, sent));
    return sent;
  }
  GPUCTL_TRY_ASSIGN(sent.claim_template, create_claim_template(client, built.claim_template, server_dry_run));
  auto job = send_job(client, built.job, server_dry_run);
  if (!job) {
    if (server_dry_run) return fail(job.error());  // nothing was made
    return fail(take_back(client, sent.claim_template, job.error()));
  }
  sent.job = std::move(*job);
  if (server_dry_run) {
    GPUCTL_TRY(send_service(client, built, server_dry_run, sent));
    return sent;
  }
  if (auto owned = own_by_job(client, sent.claim_template, sent.job); owned) {
    sent.claim_template = std::move(*owned);
  } else {
    const std::string ns = kube::namespace_of(sent.claim_template);
    const std::string name = kube::name_of(sent.claim_template);
    sent.warnings.push_back(fmt::format(
        "resourceclaimtemplate {}/{} could not be tied to job {}/{} ({}), so it stays when the job is deleted: "
        "kubectl delete resourceclaimtemplate {} -n {} after it",
        ns, name, ns, kube::name_of(sent.job), owned.error().message, name, ns));
  }
  GPUCTL_TRY(send_service(client, built, server_dry_run, sent));
  return sent;
}

}  // namespace gpuctl::ops
