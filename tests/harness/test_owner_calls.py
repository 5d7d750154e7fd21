"""share/harness/session_owner.py's calls command: which calls draw fresh inputs. Every judged call
draws its own from its seed; a null batch draws once and copies the same inputs into each call.
The runner's side (the exchange) is a stand-in here: tests/profile/ runs real sessions."""

import contextlib
import json
import os
import sys
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "share", "harness"))
import session_owner  # noqa: E402


class StandInOwner:
    """What Owner.calls reads of its owner, with the inputs and the exchange recorded."""

    def __init__(self, forwards=1):
        # flatten() asks whether a value is a tensor: none of the stand-ins is.
        self.torch = types.SimpleNamespace(no_grad=contextlib.nullcontext, Tensor=type(None))
        self.cuda = False
        self.flush_buffer = None
        self.args = types.SimpleNamespace(diagnostics=False)
        self.chooser = types.SimpleNamespace(random=lambda: 1.0)
        self.arms = {"candidate": types.SimpleNamespace(forwards=forwards, calls=0, flags=None, out_views=[],
                                                        in_views=[],
                                                        conn=types.SimpleNamespace(settimeout=lambda timeout: None))}
        self.drawn = []   # the seeds inputs were drawn from, in order
        self.copied = []  # the leaves each exchange copied in
        self.model = lambda *inputs: list(inputs)

    def inputs_of_call(self, seed):
        self.drawn.append(seed)
        leaves = [("input[0]", ("tensor of", seed))]
        return [seed], leaves, []

    def poison_slots(self, views):
        pass

    def exchange_host(self, arm, slot_leaves, command, timeout):
        self.copied.append(slot_leaves)
        return 0, 1, 2_000_000, json.dumps({"ok": True, "slots": [{}] * len(slot_leaves)}), None, None

    def judge_call(self, arm, expected, slot_leaves, reply):
        return {"match": True}

    def calls(self, model, seeds):
        command = {"arm": "candidate", "model": model, "seeds": seeds, "timeout_s": 5}
        return session_owner.Owner.calls(self, command)


class NullInputsTest(unittest.TestCase):
    def test_a_null_batch_draws_its_inputs_once_and_copies_them_into_every_call(self):
        owner = StandInOwner()
        answer = owner.calls("null", [11, 12, 13, 14])
        self.assertTrue(answer["ok"])
        self.assertEqual(len(answer["calls"]), 4)
        self.assertEqual(owner.drawn, [session_owner.slot_seed(11, 0)])
        self.assertEqual(len(owner.copied), 4)
        self.assertTrue(all(leaves == owner.copied[0] for leaves in owner.copied))
        self.assertTrue(all(call["check"] is None for call in answer["calls"]))

    def test_every_judged_call_draws_fresh_inputs_from_its_own_seed(self):
        owner = StandInOwner()
        answer = owner.calls("candidate", [11, 12, 13])
        self.assertEqual(owner.drawn, [session_owner.slot_seed(s, 0) for s in (11, 12, 13)])
        self.assertEqual(len(set(map(str, owner.copied))), 3)
        self.assertTrue(all(call["check"] == {"match": True} for call in answer["calls"]))

    def test_each_forward_of_a_judged_call_draws_from_its_slot(self):
        owner = StandInOwner(forwards=2)
        owner.calls("candidate", [7, 8])
        self.assertEqual(owner.drawn, [session_owner.slot_seed(s, k) for s in (7, 8) for k in (0, 1)])

    def test_the_next_null_batch_draws_anew(self):
        owner = StandInOwner()
        owner.calls("null", [1, 2])
        owner.calls("null", [3, 4])
        self.assertEqual(owner.drawn, [session_owner.slot_seed(1, 0), session_owner.slot_seed(3, 0)])


if __name__ == "__main__":
    unittest.main()
