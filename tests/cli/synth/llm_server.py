# A scripted stand-in for an OpenAI-compatible server, for cudaagent-synth's LLM-mode tests.
# Usage: llm_server.py MODE PORT_FILE LOG_FILE. Binds 127.0.0.1 on a free port, writes the port to
# PORT_FILE, appends every request body (one JSON line) to LOG_FILE, and answers
# POST /v1/chat/completions according to MODE:
#   ok           every reply proposes three good compositions
#   unknown-op   the reply mixes a composition naming an unknown operator with good ones
#   flaky        HTTP 500 on the first request, then as ok
#   garbage      HTTP 200 with a body that is not JSON
#   prose        a chat completion whose content holds no JSON
#   slow         waits 5 s before answering (for timeouts)
#   not-found    HTTP 404 with an error object
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

MODE, PORT_FILE, LOG_FILE = sys.argv[1:4]
GOOD = [["conv2d", "batch_norm2d", "relu"],
        ["linear", {"op": "leaky_relu", "params": {"negative_slope": 0.1}}],
        {"ops": ["layer_norm", "gelu"]}]
requests = 0


def completion(content):
    return {"id": "chatcmpl-test", "object": "chat.completion", "model": "scripted",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}]}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, body, content_type="application/json"):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        global requests
        requests += 1
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(LOG_FILE, "a") as log:
            log.write(json.dumps({"path": self.path, "auth": self.headers.get("Authorization"),
                                  "body": json.loads(body)}) + "\n")
        if self.path != "/v1/chat/completions":
            return self.reply(404, {"error": {"message": "no route " + self.path}})
        if MODE == "garbage":
            return self.reply(200, "<html>upstream exploded</html>", "text/html")
        if MODE == "not-found":
            return self.reply(404, {"error": {"message": "model not found"}})
        if MODE == "flaky" and requests == 1:
            return self.reply(500, {"error": {"message": "warming up"}})
        if MODE == "slow":
            time.sleep(5)
        if MODE == "prose":
            return self.reply(200, completion("I would rather not."))
        compositions = list(GOOD)
        if MODE == "unknown-op":
            compositions.insert(1, ["conv4d", "relu"])
        text = "Here are my proposals:\n```json\n" + json.dumps({"compositions": compositions}) + "\n```"
        return self.reply(200, completion(text))


server = HTTPServer(("127.0.0.1", 0), Handler)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os
os.rename(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()
