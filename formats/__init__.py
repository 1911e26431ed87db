"""Declarative construct schemas for broker store files. No I/O here: schemas and constants only."""
