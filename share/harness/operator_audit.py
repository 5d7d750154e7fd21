"""The operator audit: every ATen operator a candidate's forward runs outside the policy's allowed
list (allocation, views, copies; share/harness/policy.json) is counted, and so is a forward that
reads more tensor values into Python than the policy's budget (a forward that computes in Python,
element by element, runs no compute operator at all), or writes more values from Python into
tensors than its other budget (values that reached Python another way, computed there, and put
into the output). It runs inside the candidate's process, so it
can only lower a verdict; the static checks of model_new.py and of the extension's objects are what
keep a candidate from switching it off. Model construction is not audited: it happens before any
input exists in the process, so it may compute (initialisations that mirror the task's own)."""


def make_audit(torch, allowed, host_read_ops=(), host_reads_per_forward=None, host_write_ops=(),
               host_writes_per_forward=None):
    from torch.utils._python_dispatch import TorchDispatchMode

    host_read_ops = frozenset(host_read_ops)
    host_write_ops = frozenset(host_write_ops)
    over_budget = f"tensor values read one by one (over {host_reads_per_forward} per forward)"
    over_write_budget = (f"tensor values written from the program (over {host_writes_per_forward} "
                         "per forward)")

    # The probe: after each audited forward, still inside the mode, the runner runs one operator on
    # a tensor of its own. A live audit sees it; an audit the forward switched off (the Python
    # dispatch key excluded by a guard it left behind, the mode popped or disabled) does not, and
    # that is counted, never silently passed. What the probe cannot see is an audit switched off
    # only for a while inside the forward and restored before it returns: the static checks of the
    # extension's objects (dispatch-key state) and, on the GPU, the kernel trace stand there.
    probe_tensor = torch.zeros(1)
    probe_op = torch.ops.aten.neg.default

    class OperatorAudit(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.forbidden = {}
            self.host_reads = 0
            self.switched_off = 0
            self.probe_seen = False

        def probe(self):
            """Call inside the mode, after the forward: counts the forward if the audit missed it."""
            self.probe_seen = False
            probe_op(probe_tensor)
            if not self.probe_seen:
                self.switched_off += 1

        # Entered once per forward: the budget is per forward.
        def __enter__(self):
            self.host_reads = 0
            self.host_writes = 0
            return super().__enter__()

        def count(self, over, value, budget, reason):
            """Adds to a per-forward budget; past it, counted once, then the forward is stopped:
            filling a whole tensor one value at a time through this audit would take minutes, and
            catching the error changes nothing (the count stands, every further one raises)."""
            if budget is None or value <= budget:
                return value
            if over <= budget:
                self.forbidden[reason] = self.forbidden.get(reason, 0) + 1
            raise RuntimeError("the operator audit: " + reason)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if args and args[0] is probe_tensor:
                self.probe_seen = True
                return func(*args, **(kwargs or {}))
            name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
            if name in host_read_ops:
                before, self.host_reads = self.host_reads, self.host_reads + 1
                self.count(before, self.host_reads, host_reads_per_forward, over_budget)
            elif name in host_write_ops:
                # Values the program puts into tensors: torch.tensor(data) lifts a tensor of them
                # (all its elements count), a fill or full puts one.
                first = args[0] if args else None
                values = first.numel() if name == "lift_fresh" and isinstance(first, torch.Tensor) else 1
                before, self.host_writes = self.host_writes, self.host_writes + values
                self.count(before, self.host_writes, host_writes_per_forward, over_write_budget)
                if name not in allowed:
                    self.forbidden[name] = self.forbidden.get(name, 0) + 1
            elif name not in allowed:
                self.forbidden[name] = self.forbidden.get(name, 0) + 1
            return func(*args, **(kwargs or {}))

    return OperatorAudit()
