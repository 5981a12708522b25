"""Paste-able remediation text shared by node checks, cluster checks and ``probe`` output."""
