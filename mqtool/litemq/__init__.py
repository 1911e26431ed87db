"""LiteMQ family: layout, scan, dump, verify, rebuild-index and query for LiteMQ broker data dirs."""
