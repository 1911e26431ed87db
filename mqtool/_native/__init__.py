"""Optional compiled helpers (C, built by setup.py when a compiler is there). Load them via ``mqtool.native``."""
