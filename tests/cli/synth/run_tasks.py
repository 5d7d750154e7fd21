# Runs task records (JSONL on stdin) the way a reference harness would: exec model_py, build
# Model(*get_init_inputs()), call it on get_inputs(), and compare the output's shape with the
# shape the synthesiser predicted (task.meta.output_shape). Tasks that need a newer torch than the
# one running are skipped with the reason. Exit 1 if any task failed or none ran.
import json
import sys
import traceback

import torch


def version_tuple(text):
    parts = []
    for part in text.split("+")[0].split("."):
        digits = "".join(c for c in part if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def main():
    torch.manual_seed(0)
    have = version_tuple(torch.__version__)
    ran = failed = skipped = 0
    for number, line in enumerate(sys.stdin, 1):
        record = json.loads(line)
        if "task" not in record:
            print("FAIL line %d: not a task: %s" % (number, line.strip()[:300]))
            failed += 1
            continue
        task = record["task"]
        meta = task["meta"]
        name = "->".join(task["ops"])
        if version_tuple(meta["min_torch"]) > have:
            print("SKIP %s: needs torch >= %s, this is %s" % (name, meta["min_torch"], torch.__version__))
            skipped += 1
            continue
        namespace = {}
        try:
            exec(compile(task["model_py"], "<%s>" % name, "exec"), namespace)
            model = namespace["Model"](*namespace["get_init_inputs"]())
            inputs = namespace["get_inputs"]()
            with torch.no_grad():
                output = model(*inputs)
            shape = list(output.shape)
            ran += 1
            if shape != meta["output_shape"]:
                print("FAIL %s: output shape %s, predicted %s" % (name, shape, meta["output_shape"]))
                failed += 1
            elif output.dtype.is_floating_point and not torch.isfinite(output).all():
                print("FAIL %s: output has non-finite values" % name)
                failed += 1
        except Exception:
            ran += 1
            failed += 1
            print("FAIL %s: %s" % (name, traceback.format_exc().strip().splitlines()[-1]))
            print(task["model_py"])
    print("ran %d, failed %d, skipped %d" % (ran, failed, skipped))
    return 1 if failed or not ran else 0


if __name__ == "__main__":
    sys.exit(main())
