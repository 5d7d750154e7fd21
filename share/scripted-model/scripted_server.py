"""A scripted stand-in for an OpenAI-compatible model server (vLLM's fields): the quick start's episode
(examples/pipeline.sh), cudaagent-rollout's tests and the rollout benchmark run against it, so an
episode goes through the real HTTP path with no model. It answers POST /v1/chat/completions with the n-th reply of a script, where n is the number
of assistant messages in the request, so any number of concurrent episodes get the same
conversation. The script is cudaagent-rollout's replay format: one JSON object per line,
{"content": ..., "tool_calls": [{"name": ..., "arguments": {...}}]}.

Token ids, when asked for (return_token_ids), come from a byte-level "tokenizer": every UTF-8 byte
is its own id, and the ChatML markers <|im_start|> and <|im_end|> are ids 256 and 257. Prompts are
the ChatML rendering of the messages (tool calls rendered as <tool_call> JSON), so the rendering of
turn t+1 extends turn t's prompt and reply exactly, as a real server's does when nothing drifts.

"@EPISODE@" in a reply's text or arguments becomes a tag of the conversation (a hash of its first
user message, which names the episode's workspace), so concurrent episodes can write different files.

Token prompts (vLLM's token-in endpoints) are served too: POST /tokenize renders messages the same
way, and POST /v1/completions takes a prompt of ids, decodes it, and answers the turn it is at
(its number of assistant openings) with the reply's text (tool calls as <tool_call> blocks).

Usage: scripted_server.py SCRIPT PORT_FILE LOG_FILE [--fail N] [--text] [--no-ids]
       [--reject-token-fields] [--drift] [--delay S] [--no-token-in]
  --fail N               HTTP 500 for the first N requests
  --text                 tool calls written in the content as <tool_call> blocks (no tool_calls field)
  --no-ids               never return token ids or log-probs
  --reject-token-fields  HTTP 400 for any request that asks for return_token_ids (as OpenAI does)
  --drift                render assistant turns before the last with other text (re-tokenisation)
  --delay S              wait S seconds before each answer
  --no-token-in          HTTP 404 for /tokenize and /v1/completions (a server without them)
"""
import hashlib
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCRIPT, PORT_FILE, LOG_FILE = sys.argv[1:4]
FLAGS = sys.argv[4:]
FAIL = int(FLAGS[FLAGS.index("--fail") + 1]) if "--fail" in FLAGS else 0
DELAY = float(FLAGS[FLAGS.index("--delay") + 1]) if "--delay" in FLAGS else 0.0
TEXT = "--text" in FLAGS
NO_IDS = "--no-ids" in FLAGS
REJECT = "--reject-token-fields" in FLAGS
DRIFT = "--drift" in FLAGS
NO_TOKEN_IN = "--no-token-in" in FLAGS
REPLIES = [json.loads(line) for line in open(SCRIPT) if line.strip()]
IM_START, IM_END = 256, 257
lock = threading.Lock()
requests = 0


def ids_of(text):
    out = []
    i = 0
    while i < len(text):
        if text.startswith("<|im_start|>", i):
            out.append(IM_START)
            i += len("<|im_start|>")
        elif text.startswith("<|im_end|>", i):
            out.append(IM_END)
            i += len("<|im_end|>")
        else:
            out.extend(text[i].encode())
            i += 1
    return out


def render_calls(calls):
    text = ""
    for call in calls:
        fn = call["function"] if "function" in call else call
        args = fn["arguments"]
        try:
            args = json.loads(args) if isinstance(args, str) else args
        except ValueError:
            pass
        text += "\n<tool_call>\n" + json.dumps({"name": fn["name"], "arguments": args}) + "\n</tool_call>"
    return text


def render_reply(content, calls):
    return (content or "") + render_calls(calls) + "<|im_end|>"


def decode(ids):
    out, raw = "", bytearray()
    for i in ids:
        if i in (IM_START, IM_END):
            out += raw.decode(errors="replace") + ("<|im_start|>" if i == IM_START else "<|im_end|>")
            raw = bytearray()
        else:
            raw.append(i)
    return out + raw.decode(errors="replace")


def render_prompt(messages, add_generation_prompt=True):
    text = ""
    last_assistant = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    for i, m in enumerate(messages):
        if m["role"] == "assistant":
            content = "(an earlier reply)" if DRIFT and i < last_assistant else m.get("content")
            body = render_reply(content, m.get("tool_calls") or [])
            text += "<|im_start|>assistant\n" + body + "\n"
        elif m["role"] == "tool":
            text += "<|im_start|>user\n<tool_response>\n" + m["content"] + "\n</tool_response><|im_end|>\n"
        else:
            text += "<|im_start|>" + m["role"] + "\n" + m["content"] + "<|im_end|>\n"
    return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


def completion(body):
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    reply = scripted_reply(turn, hashlib.sha256((users[0] if users else "").encode()).hexdigest()[:12])
    calls = [{"id": "call_%d_%d" % (turn, i), "type": "function",
              "function": {"name": c["name"],
                           "arguments": c["arguments"] if isinstance(c["arguments"], str) else json.dumps(c["arguments"])}}
             for i, c in enumerate(reply.get("tool_calls", []))]
    content = reply.get("content", "")
    message = {"role": "assistant", "content": content}
    if TEXT:
        message["content"] = content + render_calls(calls)
    elif calls:
        message["tool_calls"] = calls
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
    prompt_ids = ids_of(render_prompt(body["messages"]))
    # The sampled ids are what the template renders for this reply, so the next prompt extends them.
    reply_ids = ids_of(render_reply(message["content"], [] if TEXT else calls))
    out = {"id": "chatcmpl-%d" % turn, "object": "chat.completion", "model": body["model"],
           "system_fingerprint": "scripted-1", "choices": [choice],
           "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(reply_ids)}}
    if not NO_IDS and body.get("return_token_ids"):
        out["prompt_token_ids"] = prompt_ids
        choice["token_ids"] = reply_ids
    if not NO_IDS and body.get("logprobs"):
        choice["logprobs"] = {"content": [{"token": "token_id:%d" % t, "logprob": -0.25, "bytes": None,
                                           "top_logprobs": []} for t in reply_ids]}
    return out


def scripted_reply(turn, tag):
    reply = REPLIES[turn] if turn < len(REPLIES) else {"content": "I am done."}
    return json.loads(json.dumps(reply).replace("@EPISODE@", tag))


def token_completion(body):
    prompt = body["prompt"]
    text = decode(prompt)
    turn = text.count("<|im_start|>assistant") - 1
    users = text.split("<|im_start|>user\n")
    tag = hashlib.sha256((users[1].split("<|im_end|>")[0] if len(users) > 1 else "").encode()).hexdigest()[:12]
    reply = scripted_reply(turn, tag)
    calls = [{"function": {"name": c["name"], "arguments": c["arguments"]}} for c in reply.get("tool_calls", [])]
    out_text = reply.get("content", "") + render_calls(calls)
    ids = ids_of(out_text + "<|im_end|>")
    choice = {"index": 0, "text": out_text, "finish_reason": "stop"}
    if body.get("return_token_ids"):
        choice["token_ids"] = ids
    if body.get("logprobs") is not None:
        choice["logprobs"] = {"token_logprobs": [-0.25] * len(ids), "tokens": ["token_id:%d" % t for t in ids]}
    return {"id": "cmpl-%d" % turn, "object": "text_completion", "model": body["model"], "choices": [choice],
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(ids)}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        global requests
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        with lock:
            requests += 1
            number = requests
            with open(LOG_FILE, "a") as log:
                log.write(json.dumps({"path": self.path, "auth": self.headers.get("Authorization"),
                                      "body": body}) + "\n")
        if DELAY:
            time.sleep(DELAY)
        if self.path in ("/tokenize", "/v1/completions") and not NO_TOKEN_IN:
            if number <= FAIL:
                return self.reply(500, {"error": {"message": "warming up"}})
            if self.path == "/tokenize":
                ids = ids_of(render_prompt(body["messages"], body.get("add_generation_prompt", True)))
                return self.reply(200, {"tokens": ids, "count": len(ids), "max_model_len": 1 << 17})
            return self.reply(200, token_completion(body))
        if self.path != "/v1/chat/completions":
            return self.reply(404, {"error": {"message": "no route " + self.path}})
        if number <= FAIL:
            return self.reply(500, {"error": {"message": "warming up"}})
        if REJECT and ("return_token_ids" in body or "logprobs" in body):
            return self.reply(400, {"error": {"message": "Unrecognized request argument supplied: return_token_ids"}})
        return self.reply(200, completion(body))


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client that went away mid-answer (a stopped rollout) is not news


server = Server(("127.0.0.1", 0), Handler)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()
