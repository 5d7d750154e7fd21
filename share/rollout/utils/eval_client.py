"""The workspace's evaluation commands: ask the trusted evaluator outside the sandbox and print
its answer. Nothing is built, run or judged here; this only forwards one word ("compile",
"verify" or "profile") over the Unix socket the rollout binds into the sandbox, prints the text
that comes back and exits with the code that comes with it."""
import os
import socket
import sys


def socket_path():
    path = os.environ.get("CUDAAGENT_EVAL_SOCKET", "")
    if not path:
        here = os.path.dirname(os.path.abspath(__file__))
        try:
            with open(os.path.join(here, "eval_socket")) as f:
                path = f.read().strip()
        except OSError:
            pass
    return path


def main(op):
    path = socket_path()
    if not path:
        print("no evaluator is reachable from this shell (CUDAAGENT_EVAL_SOCKET is not set)", file=sys.stderr)
        sys.exit(2)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        conn.sendall((op + "\n").encode())
        data = bytearray()
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError as error:
        print(f"cannot reach the evaluator at {path}: {error}", file=sys.stderr)
        sys.exit(2)
    finally:
        conn.close()
    head, _, text = bytes(data).partition(b"\n")
    code = 2
    if head.startswith(b"exit "):
        try:
            code = int(head[5:])
        except ValueError:
            pass
    else:
        text = b"the evaluator answered nothing (it may have stopped)\n"
    sys.stdout.write(text.decode("utf-8", "replace"))
    sys.stdout.flush()
    sys.exit(code)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
