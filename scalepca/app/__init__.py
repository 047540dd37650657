"""The application on top of the library: run configs (``config``), the run pipeline
(open → fit → write → summary), the preflight behind ``validate``, the command line's
message wording, the run report, and the cluster (connect, batch jobs, progress).
:mod:`scalepca.cli` parses arguments and maps outcomes to exit codes; nothing in the
library imports this package.
"""
