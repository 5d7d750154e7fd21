"""The client side of serve.sh: URL FIXTURES PID. Exits non-zero (with a message) on any mismatch."""
import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request

url, fixtures, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
base = url[: -len("/v1")]


def call(path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def check(condition, message):
    if not condition:
        sys.exit("FAIL: " + message)


generate = json.load(open(f"{fixtures}/generate.json"))
chat_cases = json.load(open(f"{fixtures}/chat_cases.json"))
expected = {}
for case in generate:
    expected.setdefault(case["model"], []).append((case["prompt"], case["output"]))

status, models = call("/v1/models")
check(status == 200 and models["data"][0]["id"] == "qwen2-tiny", f"/v1/models: {models}")
check(models["data"][0]["weights_version"] == 1 and models["data"][0]["chat_template_verified"], str(models))


def greedy_all(model, repeat=2):
    """Every prompt of `model`, `repeat` times, all at once (more requests than cache slots)."""
    cases = expected[model] * repeat
    results = [None] * len(cases)

    def run(i, prompt):
        results[i] = call("/v1/chat/completions", {
            "model": "qwen2-tiny", "prompt_token_ids": prompt, "temperature": 0, "max_tokens": 24,
            "ignore_eos": True, "logprobs": True, "top_logprobs": 2, "return_token_ids": True})

    threads = [threading.Thread(target=run, args=(i, c[0])) for i, c in enumerate(cases)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (prompt, output), (status, body) in zip(cases, results):
        check(status == 200, f"completion failed: {body}")
        choice = body["choices"][0]
        check(choice["token_ids"] == output, f"{model}: {choice['token_ids']} != HF {output}")
        check(body["prompt_token_ids"] == prompt, "prompt_token_ids differ from the prompt sent")
        content = choice["logprobs"]["content"]
        check(len(content) == 24 and all(c["logprob"] <= 0 for c in content), "logprobs missing")
        check(content[0]["top_logprobs"][0]["logprob"] >= content[0]["top_logprobs"][1]["logprob"], "top order")
        check(choice["finish_reason"] == "length", choice["finish_reason"])
        check(body["usage"]["completion_tokens"] == 24, str(body["usage"]))
    return results


greedy_all("qwen2-tiny")

# Messages in: rendered with the chat template and tokenised as Hugging Face does.
hi = chat_cases[0]
status, body = call("/v1/chat/completions", {
    "messages": hi["messages"], "temperature": 0, "max_tokens": 24, "ignore_eos": True, "return_token_ids": True})
check(status == 200 and body["prompt_token_ids"] == hi["ids"], f"chat prompt ids: {body}")
check(body["choices"][0]["token_ids"] == expected["qwen2-tiny"][1][1], "chat greedy differs from HF generate")
check(body["choices"][0]["message"]["content"] is not None and body["choices"][0]["logprobs"] is None, str(body))
tools_case = chat_cases[3]
status, body = call("/tokenize", {"messages": tools_case["messages"], "tools": tools_case["tools"],
                                  "add_generation_prompt": True})
check(status == 200 and body["tokens"] == tools_case["ids"], f"/tokenize of a tool conversation: {body}")

# Requests the server refuses.
for request, want in [({"messages": [{"role": "user", "content": "x"}], "stream": True}, 400),
                      ({"messages": [{"role": "user", "content": "x"}], "model": "other"}, 404),
                      ({"prompt_token_ids": [1, 99999]}, 400),
                      ({"messages": []}, 400)]:
    status, body = call("/v1/chat/completions", request)
    check(status == want and "message" in body["error"], f"{request} -> {status} {body}")

# New weights over HTTP: the tied checkpoint's greedy outputs from now on.
status, body = call("/v1/reload", {"checkpoint": f"{fixtures}/qwen2-tiny-tied"})
check(status == 200 and body["weights_version"] == 2, f"reload: {body}")
results = greedy_all("qwen2-tiny-tied", repeat=1)
check(all(r[1]["weights_version"] == 2 for r in results), "completions do not name weights version 2")
status, body = call("/v1/reload", {"checkpoint": f"{fixtures}/llama-tiny"})
check(status == 400 and "architecture" in body["error"]["message"], f"llama reload: {body}")

# SIGHUP re-reads the served checkpoint.
os.kill(pid, signal.SIGHUP)
for _ in range(100):
    if call("/v1/models")[1]["data"][0]["weights_version"] == 3:
        break
    time.sleep(0.1)
check(call("/v1/models")[1]["data"][0]["weights_version"] == 3, "SIGHUP did not reload")
greedy_all("qwen2-tiny-tied", repeat=1)
print("serve checks passed")
