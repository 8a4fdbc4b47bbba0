"""Stubs generated from proto/runtime/v1/api.proto by proto/generate.py; do not edit."""
