"""Times the steps of a CUDA start as the verifier's harness jobs make them, and prints one JSON
line of {step: seconds}. Run as a plain script, or as a job of share/harness/worker.py (a child
forked from a parent that imported torch), to see which of the two is slow (verify_start_bisect.sh)."""
import json
import os
import time

marks = {}
last = time.monotonic()


def done(name):
    global last
    now = time.monotonic()
    marks[name] = round(now - last, 4)
    last = now


import torch  # noqa: E402  (timed: already imported in a worker's child)

done("import_torch")
torch.cuda.init()
done("cuda_init")
torch.zeros(1, device="cuda")
torch.cuda.synchronize()
done("context_and_first_alloc")
x = torch.randn(1024, 1024, device="cuda")
(x + 1).relu_()
torch.cuda.synchronize()
done("first_kernels")
model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU()).to("cuda")
torch.cuda.synchronize()
done("module_to_cuda")
with torch.no_grad():
    model(x)
torch.cuda.synchronize()
done("first_gemm")
path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"probe-{os.getpid()}.pt")
torch.save(model.state_dict(), path)
torch.load(path, map_location="cuda")
os.unlink(path)
done("save_and_load_state")
marks["module_loading"] = os.environ.get("CUDA_MODULE_LOADING", "")
print(json.dumps(marks))
