"""Host telemetry over SSH (nvidia-smi, rocm-smi/amd-smi, macOS, /proc/meminfo) and local NVML."""
