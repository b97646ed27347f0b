"""Bug-report snapshots: pull nodes' journals and captures into one .tar.gz bundle with a REPORT.md."""
