"""The operator audit: every ATen operator a candidate's forward runs outside the policy's allowed
list (allocation, views, copies; share/harness/policy.json) is counted. It runs inside the
candidate's process, so it can only lower a verdict; the static checks of model_new.py and of the
extension's objects are what keep a candidate from switching it off. Model construction is not
audited: it happens before any input exists in the process, so it may compute (initialisations
that mirror the task's own)."""


def make_audit(torch, allowed):
    from torch.utils._python_dispatch import TorchDispatchMode

    class OperatorAudit(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.forbidden = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
            if name not in allowed:
                self.forbidden[name] = self.forbidden.get(name, 0) + 1
            return func(*args, **(kwargs or {}))

    return OperatorAudit()
