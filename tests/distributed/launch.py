#!/usr/bin/env python3
"""Starts N ranks of a command on this machine as srun or Open MPI's mpirun would: only the
launcher's environment variables (no torch import: torchrun's start costs ~2.5 s here, this ~0.05 s).

  launch.py --nproc N --as slurm|openmpi -- COMMAND...

slurm:   SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NNODES=1, MASTER_ADDR, MASTER_PORT
openmpi: OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE, MASTER_ADDR, MASTER_PORT

The ranks share this process's stdout and stderr. When one exits non-zero the others get
SIGTERM (SIGKILL 30 s later), as torchrun does; the exit status is the first failure's, else 0.
SIGTERM or SIGINT to the launcher goes to every rank.
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(style, rank, n, port):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):  # torchrun's would win over the launcher's
        env.pop(name, None)
    if style == "slurm":
        env.update(SLURM_PROCID=str(rank), SLURM_NTASKS=str(n), SLURM_LOCALID=str(rank), SLURM_NNODES="1")
    else:
        env.update(OMPI_COMM_WORLD_RANK=str(rank), OMPI_COMM_WORLD_SIZE=str(n), OMPI_COMM_WORLD_LOCAL_RANK=str(rank),
                   OMPI_COMM_WORLD_LOCAL_SIZE=str(n))
    return env


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc", type=int, required=True)
    p.add_argument("--as", dest="style", choices=["slurm", "openmpi"], required=True)
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if a.nproc < 1 or not command:
        p.error("--nproc N (N >= 1) and a COMMAND after --")
    port = free_port()
    procs = [subprocess.Popen(command, env=environment(a.style, r, a.nproc, port)) for r in range(a.nproc)]

    def forward(signum, _frame):
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signum)
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)

    status, killed_at = 0, None
    while any(proc.poll() is None for proc in procs):
        failed = [proc.returncode for proc in procs if proc.returncode not in (None, 0)]
        if failed and not status:
            status = failed[0]
            forward(signal.SIGTERM, None)
            killed_at = time.time() + 30
        if killed_at and time.time() > killed_at:
            forward(signal.SIGKILL, None)
        time.sleep(0.05)
    if not status:
        status = next((proc.returncode for proc in procs if proc.returncode != 0), 0)
    sys.exit(status if status >= 0 else 128 - status)  # killed by signal N: 128 + N, as a shell says


if __name__ == "__main__":
    main()
