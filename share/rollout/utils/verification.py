"""python3 -m utils.verification: builds the workspace and checks ModelNew against model.py on fresh
inputs, in the trusted evaluator outside the sandbox. Arguments are accepted and ignored."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eval_client  # noqa: E402

eval_client.main("verify")
