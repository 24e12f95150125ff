# Runs stowage-run on MODEL (argv[1]) generating for long, truncates MODEL once the run has started
# generating (the prompt is echoed after the session is created), and prints the run's standard
# error and its exit status ("rc=N"; a signal is negative: rc=-7 is SIGBUS).
import os
import subprocess
import sys

model = sys.argv[1]
args = ["stowage-run", "-m", model, "-c", "2048", "-n", "-1", "--ignore-eos", "--temp", "0", "-t", "1", "-p", "hello"]
p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
first = p.stdout.read(1)  # the prompt's echo: the model is mapped and planned, the session made
if not first:
    print("no output before exit")
os.truncate(model, 0)
out, err = p.communicate(timeout=120)
sys.stdout.write(err.decode(errors="replace"))
print("rc=%d" % p.returncode)
