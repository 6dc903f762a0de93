"""What the suite runs on: the CPU or the GPUs NVML describes, the hardware key, the GPUs each process
takes, and what the GPUs did during a measurement.
"""
