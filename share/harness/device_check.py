"""The first GPU work of a harness job: what a task's checks will ask of the device, done before
any task code runs. The filter's job does it so that a device that will not work is the
machine's fault, never the task's; the worker has a forked child do it to learn whether its
preloads left forked jobs able to use CUDA. One function, so the two cannot drift apart."""


def put_to_work(torch):
    """Raises unless this process can use the GPU the way the checks do: a kernel, a copy back,
    a factory call under torch.device (torch 2.0 on), a synchronize."""
    if not torch.cuda.is_available():
        raise RuntimeError("torch.cuda.is_available() is False")
    torch.cuda.init()
    (torch.ones(1, device="cuda") + 1).item()
    if hasattr(torch.device, "__enter__"):
        with torch.device("cuda"):
            torch.empty(1)
    torch.cuda.synchronize()
