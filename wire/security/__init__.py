"""Security without I/O: principals, certificate-subject mapping, per-connection security state."""
