"""Writes the replay scripts of cudaagent-rollout's tests into DIR (one reply per line):
  honest.jsonl     reads the task, writes kernel, binding and model_new.py, compiles, verifies,
                   profiles, stops (the CPU example's honest solution; model_new.py ends with a
                   comment naming the episode, so two episodes are two candidates)
  fallback.jsonl   writes a model_new.py that calls torch instead of its kernel, verifies, stops
  misbehave.jsonl  malformed arguments, unknown tools, path escapes, links out, protected files,
                   huge output, a command past its timeout, then stops
  loop.jsonl       the same harmless command, 200 times (a turn-limit loop)
  short.jsonl      reads the task, runs one command, stops
  sleepy.jsonl     a command that takes half a second, 50 times (a wall-time limit)
  evals.jsonl      asks for verification twice (an evaluation budget of one)
  reverify.jsonl   writes the honest solution (tagged per episode), verifies, edits, verifies again
  broken.jsonl     writes a kernel with a syntax error, compiles, stops
  linemarked.jsonl writes a kernel with a #line directive, compiles, stops
Usage: make_scripts.py EXAMPLE_WORKSPACE DIR"""
import json
import os
import sys

example, out = sys.argv[1:3]


def read(name):
    with open(os.path.join(example, name)) as f:
        return f.read()


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


def write(name, lines):
    with open(os.path.join(out, name), "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")


write("honest.jsonl", [
    {"content": "Let me read the task.", "tool_calls": [call("Read", file_path="model.py")]},
    {"content": "One fused pass: bias, ReLU and the scale.", "tool_calls": [
        call("Write", file_path="kernels/bias_relu.cpp", content=read("kernels/bias_relu.cpp")),
        call("Write", file_path="kernels/bias_relu_binding.cpp", content=read("kernels/bias_relu_binding.cpp")),
        call("Write", file_path="model_new.py", content=read("model_new.py") + "# @EPISODE@\n")]},
    {"content": "", "tool_calls": [call("Bash", command="bash utils/compile.sh")]},
    {"content": "", "tool_calls": [call("Bash", command="python3 -m utils.verification")]},
    {"content": "", "tool_calls": [call("Bash", command="python3 -m utils.profiling")]},
    {"content": "The fused kernel passes verification and is profiled."},
])

cheat = read("model_new.py").replace("return cuda_extension.bias_relu_scale(x, self.bias, 2.0)",
                                     "return torch.relu(x + self.bias) * 2.0")
assert cheat != read("model_new.py")
write("fallback.jsonl", [
    {"content": "", "tool_calls": [call("Read", file_path="model.py")]},
    {"content": "", "tool_calls": [
        call("Write", file_path="kernels/bias_relu.cpp", content=read("kernels/bias_relu.cpp")),
        call("Write", file_path="kernels/bias_relu_binding.cpp", content=read("kernels/bias_relu_binding.cpp")),
        call("Write", file_path="model_new.py", content=cheat)]},
    {"content": "", "tool_calls": [call("Bash", command="python3 -m utils.verification")]},
    {"content": "Done."},
])

write("misbehave.jsonl", [
    {"content": "", "tool_calls": [
        {"name": "Read", "arguments": "{\"file_path\": \"model.py\""},
        call("Teleport", target="/"),
        call("Read", file_path="../../../../etc/passwd"),
        call("Read", file_path="/etc/passwd"),
        call("Write", file_path="/tmp/escaped.txt", content="x"),
        call("Read"),
        call("Read", file_path=["model.py"])]},
    {"content": "", "tool_calls": [
        call("Bash", command="ln -s /etc/passwd leak && ln -s / root_link && echo linked"),
        call("Read", file_path="leak"),
        call("Read", file_path="root_link/etc/passwd"),
        call("Write", file_path="leak", content="x"),
        call("Grep", pattern="root", path="root_link"),
        call("Glob", pattern="**/passwd")]},
    {"content": "", "tool_calls": [
        call("Read", file_path="model.py"),
        call("Write", file_path="model.py", content="import os\n"),
        call("Edit", file_path="model.py", old_string="torch", new_string="numpy"),
        call("Write", file_path="utils/verification.py", content="print('PASS')\n"),
        call("Write", file_path="SKILL.md", content="no rules\n"),
        call("Bash", command="echo pwned > model.py; rm -f binding.cpp; mv utils u2; chmod 777 model.py; "
                             "echo tried")]},
    {"content": "", "tool_calls": [
        call("Bash", command="yes cudaagent | head -c 3000000; echo; echo TAIL-MARK"),
        call("Bash", command="sleep 30", timeout=1000),
        call("Bash", command="echo after-timeout; pwd"),
        call("Bash", command="cat /etc/shadow; ls /root; echo net; (exec 3<>/dev/tcp/127.0.0.1/80) 2>&1 | head -1"),
        call("KillBash", shell_id="bash_42")]},
    {"content": "I give up."},
])

write("short.jsonl", [
    {"content": "", "tool_calls": [call("Read", file_path="model.py")]},
    {"content": "", "tool_calls": [call("Bash", command="echo hello")]},
    {"content": "Nothing to do."},
])
write("sleepy.jsonl", [{"content": "", "tool_calls": [call("Bash", command="sleep 0.5")]}] * 50)
write("evals.jsonl", [{"content": "", "tool_calls": [call("Bash", command="python3 -m utils.verification")]}] * 2 +
      [{"content": "done"}])
write("reverify.jsonl", [
    {"content": "", "tool_calls": [
        call("Write", file_path="kernels/bias_relu.cpp", content=read("kernels/bias_relu.cpp")),
        call("Write", file_path="kernels/bias_relu_binding.cpp", content=read("kernels/bias_relu_binding.cpp")),
        call("Write", file_path="model_new.py", content=read("model_new.py") + "# @EPISODE@ first\n")]},
    {"content": "", "tool_calls": [call("Bash", command="python3 -m utils.verification")]},
    {"content": "", "tool_calls": [call("Edit", file_path="model_new.py", old_string=" first", new_string=" second")]},
    {"content": "", "tool_calls": [call("Bash", command="python3 -m utils.verification")]},
    {"content": "done"},
])
def compile_kernel(name, kernel, last_words):
    """A script that writes the example with `kernel` as its kernel, compiles it and stops."""
    assert kernel != read("kernels/bias_relu.cpp")
    write(name, [
        {"content": "", "tool_calls": [
            call("Write", file_path="kernels/bias_relu.cpp", content=kernel),
            call("Write", file_path="kernels/bias_relu_binding.cpp", content=read("kernels/bias_relu_binding.cpp")),
            call("Write", file_path="model_new.py", content=read("model_new.py"))]},
        {"content": "", "tool_calls": [call("Bash", command="bash utils/compile.sh")]},
        {"content": last_words},
    ])


compile_kernel("broken.jsonl", read("kernels/bias_relu.cpp").replace("return out;", "return out  // no semicolon\n", 1),
               "It does not build.")
compile_kernel("linemarked.jsonl", read("kernels/bias_relu.cpp").replace("\n\n", '\n#line 1 "elsewhere.h"\n\n', 1),
               "The compile tool says the verifier would refuse it.")
write("loop.jsonl", [{"content": "again", "tool_calls": [call("Bash", command="true")]}] * 200)
