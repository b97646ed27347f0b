"""Hardware access: the only code that touches the machine (files under a root, NVML, serial, udev)."""
