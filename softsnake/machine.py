"""What this machine lends this process: the CPU cores that worker and drawing processes are sized by."""

import os


def usable_cores():
    """CPU cores this process may run on [-]: its affinity set where the system reports one (the cores a container
    or a job scheduler gives it, not the host's), else the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1
