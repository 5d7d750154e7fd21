// object_policy_probe POLICY_JSON [--glue-root=DIR]... SOURCE=OBJECT...: runs the binary-level policy (object_policy.h)
// on objects compiled elsewhere, each named by the candidate source it came from
// ("kernels/a.cu=/tmp/a.o"), and prints the verdict (PASS, REJECT_POLICY, FLAG_HACK) on the first
// line and one finding per line after it. Exit 0 when it could judge, 1 when it could not, 2 on
// usage. For tests/verify/gpu_objects.sh: CUDA objects checked on a machine without a GPU.
#include <cstdio>
#include <string>

#include "cudaagent/candidate/object_policy.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: object_policy_probe POLICY_JSON SOURCE=OBJECT...\n");
    return 2;
  }
  auto policy = cudaagent::load_object_policy(argv[1]);
  if (!policy) {
    std::fprintf(stderr, "object_policy_probe: %s\n", policy.status().message().c_str());
    return 1;
  }
  cudaagent::BuildResult build;
  build.ok = true;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--glue-root=", 0) == 0) {  // a header folder whose lines are not the candidate's
      build.glue_roots.push_back(arg.substr(12));
      continue;
    }
    const std::size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "object_policy_probe: expected SOURCE=OBJECT, got '%s'\n", argv[i]);
      return 2;
    }
    cudaagent::CompileStep step;
    step.source = arg.substr(0, eq);
    step.object = arg.substr(eq + 1);
    step.ok = true;
    build.steps.push_back(step);
  }
  cudaagent::ObjectCheckOptions options;
  options.policy = std::move(policy).value();
  auto findings = cudaagent::check_candidate_objects(build, options);
  if (!findings) {
    std::fprintf(stderr, "object_policy_probe: %s\n", findings.status().message().c_str());
    return 1;
  }
  std::printf("%s\n", std::string(cudaagent::verdict_name(cudaagent::verdict_of_findings(findings.value())))
                          .c_str());
  for (const auto& f : findings.value()) {
    std::printf("%s %s %s: %s\n", std::string(cudaagent::verdict_name(f.verdict)).c_str(), f.rule.c_str(),
                f.path.c_str(), f.detail.c_str());
  }
  return 0;
}
