# %% [markdown]
# # 7 · Scaling out: the same job on a `dask scheduler` + workers, and on SLURM
#
# Nothing in a scalepca job depends on where the workers run. This notebook starts a real
# Dask scheduler and two worker processes on this machine (loopback), runs a job on them from
# Python and from the command line (`scalepca run --scheduler`), checks the result equals the
# embedded-cluster result, shuts them down, and shows the SLURM config with the batch script
# dask-jobqueue generates from it (no batch system needed to generate it).

# %%
import shutil
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import scalepca
from scalepca.analysis import plot

plt.rcParams["figure.dpi"] = 80

import atexit
import socket
import subprocess
import sys
import time

from scalepca.datasets import make_low_rank, write_dataset

work = Path(tempfile.mkdtemp(prefix="scalepca-scale-"))
ROOT = Path.cwd().parent if (Path.cwd().parent / "configs").is_dir() else Path.cwd()

# %% [markdown]
# ## Start a scheduler and two workers
#
# Exactly what one types on a cluster's nodes: `dask scheduler` on one, `dask worker ADDRESS`
# on the others (here with a 1 GiB memory limit each).

# %%
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
address = f"tcp://127.0.0.1:{port}"
dask_cli = [sys.executable, "-m", "dask"]
scheduler = subprocess.Popen(dask_cli + ["scheduler", "--host", "127.0.0.1", "--port",
                                         str(port), "--dashboard-address", ":0"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
workers = [
    subprocess.Popen(dask_cli + ["worker", address, "--nthreads", "1", "--memory-limit", "1GiB",
                                 "--host", "127.0.0.1", "--dashboard-address", ":0",
                                 "--name", f"worker-{i}"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for i in range(2)
]
# if a later cell fails, the kernel's exit still stops them
atexit.register(lambda: [p.kill() for p in workers + [scheduler] if p.poll() is None])
client = scalepca.connect(address=address, timeout="60s")
client.wait_for_workers(2, timeout=120)
print("workers:", sorted(w["name"] for w in client.scheduler_info()["workers"].values()))

# %% [markdown]
# ## The job, from Python
#
# The data are written by the workers, then PPCA is fitted on them. Only the 50 × 50 moments
# travel to this process.

# %%
path = write_dataset(make_low_rank(50_000, 50, rank=5, chunk_rows=5_000, seed=7),
                     work / "data.zarr")
X = scalepca.open_matrix(path)
remote = scalepca.PPCA(5).fit(X)
print(f"{remote.n_passes_} pass, {remote.fit_time_:.2f} s, σ² = {remote.noise_variance_:.4f}")

# %% [markdown]
# ## The job, from the command line
#
# `scalepca run CONFIG --scheduler ADDRESS` runs a YAML job on the existing cluster instead of
# starting one; `output.report: true` writes an HTML report with figures next to the outputs.

# %%
config = work / "job.yaml"
config.write_text(f'''
data:
  path: {path}
model:
  method: ppca
  n_components: 5
output:
  store: {work / "out"}
  report: true
progress: false
''')
run = subprocess.run([sys.executable, "-m", "scalepca.cli", "run", str(config),
                      "--scheduler", address], capture_output=True, text=True)
print(run.stdout or run.stderr)
cli_model = scalepca.load(work / "out" / "model.zarr")
print("CLI vs Python, largest difference of the components:",
      np.abs(cli_model.components_ - remote.components_).max())

# %% thumbnail=true
import base64
import re

from IPython.display import Image, display

print(sorted(p.name for p in (work / "out").iterdir()))
# report.html is one self-contained file: its figures are embedded PNGs
page = (work / "out" / "report.html").read_text()
figure = r'<img src="data:image/png;base64,([^"]+)"[^>]* data-figure="scree"'
scree = re.search(figure, page).group(1)
display(Image(data=base64.b64decode(scree), width=420))

# %% [markdown]
# ## Shut the cluster down, and compare with the embedded cluster

# %%
client.close()
for p in workers:  # workers first, then the scheduler they report to
    p.terminate()
    p.wait(timeout=60)
scheduler.terminate()
scheduler.wait(timeout=60)
print("exit codes:", [p.returncode for p in workers + [scheduler]])

# an embedded cluster with two thread workers in this process (processes=False)
with scalepca.connect(n_workers=2, threads_per_worker=1, processes=False, quiet=True):
    local = scalepca.PPCA(5).fit(scalepca.open_matrix(path))
print("scheduler+workers vs embedded LocalCluster:")
print("  components:", np.abs(local.components_ - remote.components_).max())
print("  σ²        :", abs(local.noise_variance_ - remote.noise_variance_))

# %% [markdown]
# ## On SLURM
#
# On an HPC system the same job takes a `cluster` section of kind `slurm` (or `pbs`, `sge`,
# `lsf`, `htcondor`): scalepca asks dask-jobqueue to submit worker jobs and connects to them.
# `configs/slurm.yaml` ships with the package:

# %%
print((ROOT / "configs" / "slurm.yaml").read_text())

# %% [markdown]
# The batch script dask-jobqueue submits for every worker job — what
# `scalepca validate configs/slurm.yaml --job-script` prints. Generating it needs no batch
# system; on the cluster, `scalepca run configs/slurm.yaml` submits the jobs.

# %%
from scalepca.app.cluster import make_cluster
from scalepca.app.config import load_config

cluster = make_cluster(load_config(ROOT / "configs" / "slurm.yaml")["cluster"])
try:
    print(cluster.job_script())
finally:
    cluster.close()

# %%
shutil.rmtree(work)
