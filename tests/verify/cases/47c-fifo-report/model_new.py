# Attack on the trusted side: replace the harness's report.json (written before this import) by a
# FIFO, and leave. A verifier that opens it blocking would wait forever for a writer; it must treat
# it as no report. Exit 0 so that the report is the only thing left to judge by.
import os
import sys

out = sys.argv[sys.argv.index("--out") + 1]
report = os.path.join(out, "report.json")
os.unlink(report)
os.mkfifo(report)
os._exit(0)
